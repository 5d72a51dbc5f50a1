/**
 * Reads a table's log as Arrow batches, from each bucket's earliest offset up to the high watermark
 * it had when the read started: the bounded "all rows so far" that a SELECT over a log table sees.
 */
import type * as arrow from 'apache-arrow';
import type { BucketRef } from '../client/log-scanner.js';
import type { Table } from '../client/table.js';
import type { Connection } from '../client/connection.js';

export async function readLogUpToHighWatermark(conn: Connection, table: Table, columns?: string[]): Promise<arrow.RecordBatch[]> {
  const info = table.info;
  const admin = conn.getAdmin();
  const buckets = Array.from({ length: info.bucketCount }, (_, b) => b);
  const partitions = info.partitionKeys.length > 0 ? (await admin.listPartitionInfos(info.path)).map((p) => p.partitionName) : [undefined];
  const scan = table.newScan();
  if (columns) scan.project(columns);
  const scanner = scan.createLogScanner();
  const ends = new Map<string, bigint>();
  const keyOf = (partition: string | undefined, bucket: number): string => `${partition ?? ''}/${bucket}`;
  for (const partition of partitions) {
    const [earliest, latest] = await Promise.all([
      admin.listOffsets(info.path, buckets, 'earliest', partition),
      admin.listOffsets(info.path, buckets, 'latest', partition),
    ]);
    for (const b of buckets) {
      if (latest.get(b)! <= earliest.get(b)!) continue;
      const ref: BucketRef = partition === undefined ? b : { partition, bucket: b };
      await scanner.subscribe(ref, earliest.get(b)!);
      ends.set(keyOf(partition, b), latest.get(b)!);
    }
  }
  const out: arrow.RecordBatch[] = [];
  try {
    while (ends.size > 0) {
      for (const sb of await scanner.pollBatches(1000)) {
        const key = keyOf(sb.partition, sb.bucket);
        const end = ends.get(key);
        if (end === undefined || sb.baseOffset >= end) continue;
        const keep = Number(end - sb.baseOffset);
        out.push(keep < sb.batch.numRows ? sb.batch.slice(0, keep) : sb.batch);
        if (sb.baseOffset + BigInt(sb.batch.numRows) >= end) {
          ends.delete(key);
          scanner.unsubscribe(sb.partition === undefined ? sb.bucket : { partition: sb.partition, bucket: sb.bucket });
        }
      }
    }
  } finally {
    scanner.close();
  }
  return out;
}
