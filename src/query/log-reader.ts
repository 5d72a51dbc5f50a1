/**
 * Reads a table's log as Arrow batches, from each bucket's earliest offset up to the high watermark
 * it had when the read started: the bounded "all rows so far" that a SELECT over a log table sees,
 * and, with metadata columns in front, the `table$changelog` of any table. Readers that start
 * elsewhere (union read after the lake's offsets, startup modes) pass the buckets' ranges.
 *
 *   _change_type       STRING            insert (+A, +I), update_before (-U), update_after (+U), delete (-D)
 *   _log_offset        BIGINT            the record's offset in its bucket
 *   _commit_timestamp  TIMESTAMP_LTZ(3)  its batch's commit timestamp (server append time)
 *   then the table's (projected) columns
 */
import * as arrow from 'apache-arrow';
import { CHANGE_TYPE_BYTE, type ChangeType } from '../common/change-type.js';
import { TributaryError } from '../common/errors.js';
import type { OffsetSpec } from '../client/admin.js';
import { type BucketRef, bucketLabel } from '../client/log-scanner.js';
import type { ScanBatch } from '../client/scan-batch.js';
import type { Table } from '../client/table.js';
import type { Connection } from '../client/connection.js';
import { type PartitionInfo, tablePathString } from '../common/schema.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { rowCounter } from './progress.js';

/** The metadata columns of `$changelog`, in order. */
export const CHANGELOG_COLUMNS = ['_change_type', '_log_offset', '_commit_timestamp'];

/** Fluss's names of the change types. */
const CHANGE_NAMES: Record<ChangeType, string> = { '+A': 'insert', '+I': 'insert', '-U': 'update_before', '+U': 'update_after', '-D': 'delete' };
/** The UTF-8 name by change type byte; batches without change type bytes are append-only (+A). */
const NAME_BYTES: Uint8Array[] = [];
for (const [type, name] of Object.entries(CHANGE_NAMES)) NAME_BYTES[CHANGE_TYPE_BYTE[type as ChangeType]] = new TextEncoder().encode(name);
const APPEND_ONLY = CHANGE_TYPE_BYTE['+A'];

const CHANGELOG_FIELDS = [
  new arrow.Field(CHANGELOG_COLUMNS[0], new arrow.Utf8(), false),
  new arrow.Field(CHANGELOG_COLUMNS[1], new arrow.Int64(), false),
  new arrow.Field(CHANGELOG_COLUMNS[2], new arrow.TimestampMicrosecond('UTC'), false),
];

/** The offsets of one bucket (of one partition) to read: [start, end), and where its log starts. */
export interface BucketRange {
  partition?: PartitionInfo;
  bucket: number;
  /** The bucket's earliest offset still in the log. */
  logStart: bigint;
  start: bigint;
  /** The high watermark when the range was listed. */
  end: bigint;
}

/**
 * Every bucket of the table (of `partitions`, all by default) from `from` ('earliest' by default;
 * 'latest' reads nothing; a timestamp, from the first batch committed at or after it) up to its
 * high watermark.
 */
export async function bucketRanges(conn: Connection, table: Table, options: { partitions?: PartitionInfo[]; from?: OffsetSpec } = {}): Promise<BucketRange[]> {
  const info = table.info;
  const admin = conn.getAdmin();
  const buckets = Array.from({ length: info.bucketCount }, (_, b) => b);
  const partitions = info.partitionKeys.length === 0 ? [undefined] : (options.partitions ?? (await admin.listPartitionInfos(info.path)));
  const from = options.from ?? 'earliest';
  const perPartition = await Promise.all(
    partitions.map(async (partition) => {
      const name = partition?.partitionName;
      let offsets;
      try {
        offsets = await Promise.all([
          admin.listOffsets(info.path, buckets, 'earliest', name),
          admin.listOffsets(info.path, buckets, 'latest', name),
          typeof from === 'object' ? admin.listOffsets(info.path, buckets, from, name) : undefined,
        ]);
      } catch (err) {
        // Dropped since it was listed: its log is gone.
        if (err instanceof TributaryError && err.errorName === 'PARTITION_NOT_EXISTS') return [];
        throw err;
      }
      const [earliest, latest, starts] = offsets;
      return buckets.map((b): BucketRange => {
        const end = latest.get(b)!;
        const logStart = earliest.get(b)!;
        const start = from === 'earliest' ? logStart : from === 'latest' ? end : starts!.get(b)!;
        return { ...(partition ? { partition } : {}), bucket: b, logStart, start: start < logStart ? logStart : start, end };
      });
    }),
  );
  return perPartition.flat();
}

/** How readers name a bucket of a partition in maps: as the log scanner does (bucketLabel). */
export const bucketKey = (r: { partition?: PartitionInfo; bucket: number }): string => bucketLabel(r.partition?.partitionName, r.bucket);

/** The offsets [from, to) of one bucket (bucketKey) that a read holds, as EXPLAIN shows them. */
export interface LogRange {
  bucket: string;
  from: bigint;
  to: bigint;
}

export const logRangesOf = (ranges: readonly BucketRange[]): LogRange[] => ranges.map((r) => ({ bucket: bucketKey(r), from: r.start, to: r.end }));

/** Where to read one bucket (of one partition) from, up to the high watermark its first fetch reports. */
export type BucketStart = Omit<BucketRange, 'end' | 'logStart'>;

/**
 * The rows of `ranges` of a table's log (every bucket's whole log by default), batch by batch,
 * and where each bucket's rows end (by bucketKey); `columns` are projected. A range
 * without an end reads up to the high watermark that its first fetch reports.
 */
async function readScanBatches(conn: Connection, table: Table, columns?: string[], ranges?: readonly (BucketRange | BucketStart)[]): Promise<{ batches: ScanBatch[]; ends: Map<string, bigint> }> {
  // The log alone: the union read reads the lake itself, and needs a primary-key table's exact changelog.
  const scan = table.newScan().logOnly();
  if (columns) scan.project(columns);
  const scanner = scan.createLogScanner();
  /** The end of each bucket still read, undefined until its first fetch reports the high watermark. */
  const ends = new Map<string, bigint | undefined>();
  const reached = new Map<string, bigint>();
  const refs = new Map<string, BucketRef>();
  for (const r of ranges ?? (await bucketRanges(conn, table))) {
    const partition = r.partition?.partitionName;
    const key = bucketKey(r);
    const end = 'end' in r ? r.end : undefined;
    reached.set(key, r.start);
    if (end !== undefined && end <= r.start) continue;
    const ref: BucketRef = partition === undefined ? r.bucket : { partition, bucket: r.bucket };
    await scanner.subscribe(ref, r.start);
    refs.set(key, ref);
    ends.set(key, end);
  }
  const out: ScanBatch[] = [];
  const read = rowCounter('read', tablePathString(table.info.path));
  try {
    while (ends.size > 0) {
      const unknown = [...ends.values()].includes(undefined);
      // Without an end to wait for, the fetch must not wait for data: it answers at once.
      const polled = await scanner.pollBatches(unknown ? 0 : 1000);
      if (unknown) {
        for (const [key, highWatermark] of scanner.highWatermarks()) {
          if (ends.has(key) && ends.get(key) === undefined) ends.set(key, highWatermark);
        }
      }
      for (const sb of polled) {
        const end = ends.get(bucketLabel(sb.partition, sb.bucket));
        if (end === undefined || sb.baseOffset >= end) continue;
        const keep = Number(end - sb.baseOffset);
        out.push(keep < sb.batch.numRows ? { ...sb, batch: sb.batch.slice(0, keep), ...(sb.changeTypes ? { changeTypes: sb.changeTypes.subarray(0, keep) } : {}) } : sb);
        read(Math.min(keep, sb.batch.numRows));
      }
      // A bucket is done once its position reaches the end, also when the last batches were empty
      // changelog batches (writes that changed nothing), which yield no rows.
      for (const [key, position] of scanner.positions()) {
        const end = ends.get(key);
        if (end !== undefined && position >= end) {
          ends.delete(key);
          reached.set(key, end);
          scanner.unsubscribe(refs.get(key)!);
        }
      }
    }
  } finally {
    scanner.close();
  }
  return { batches: out, ends: reached };
}

export async function readLogUpToHighWatermark(conn: Connection, table: Table, columns?: string[], ranges?: readonly BucketRange[]): Promise<arrow.RecordBatch[]> {
  return (await readLogRanges(conn, table, columns, ranges)).batches;
}

/** The rows of `ranges` (see readScanBatches), and where each bucket's rows end. */
export async function readLogRanges(conn: Connection, table: Table, columns?: string[], ranges?: readonly (BucketRange | BucketStart)[]): Promise<{ batches: arrow.RecordBatch[]; ends: Map<string, bigint> }> {
  const { batches, ends } = await readScanBatches(conn, table, columns, ranges);
  return { batches: batches.map((sb) => sb.batch), ends };
}

/** The changelog columns (see the header) of one batch, built straight into typed arrays. */
function changelogColumns(sb: ScanBatch): arrow.Data[] {
  const n = sb.batch.numRows;
  const valueOffsets = new Int32Array(n + 1);
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    bytes += NAME_BYTES[sb.changeTypes ? sb.changeTypes[i] : APPEND_ONLY].length;
    valueOffsets[i + 1] = bytes;
  }
  const names = new Uint8Array(bytes);
  for (let i = 0; i < n; i++) names.set(NAME_BYTES[sb.changeTypes ? sb.changeTypes[i] : APPEND_ONLY], valueOffsets[i]);
  const offsets = new BigInt64Array(n);
  for (let i = 0; i < n; i++) offsets[i] = sb.baseOffset + BigInt(i);
  const timestamps = new BigInt64Array(n).fill(BigInt(sb.timestamp) * 1000n);
  return [
    arrow.makeData({ type: CHANGELOG_FIELDS[0].type as arrow.Utf8, length: n, nullCount: 0, valueOffsets, data: names }),
    arrow.makeData({ type: CHANGELOG_FIELDS[1].type as arrow.Int64, length: n, nullCount: 0, data: offsets }),
    arrow.makeData({ type: CHANGELOG_FIELDS[2].type as arrow.TimestampMicrosecond, length: n, nullCount: 0, data: timestamps }),
  ];
}

/**
 * `table$changelog` below the high watermark (of `ranges`, see readScanBatches): the metadata
 * columns, then `columns` of the table; and where each bucket's rows end.
 */
export async function readChangelogUpToHighWatermark(conn: Connection, table: Table, columns: string[], ranges?: readonly (BucketRange | BucketStart)[]): Promise<{ schema: arrow.Schema; batches: arrow.RecordBatch[]; ends: Map<string, bigint> }> {
  const projected = toArrowSchema(table.info.schema, columns.map((c) => table.info.schema.columns.findIndex((x) => x.name === c)));
  const schema = new arrow.Schema([...CHANGELOG_FIELDS, ...projected.fields]);
  const type = new arrow.Struct(schema.fields);
  const read = await readScanBatches(conn, table, columns, ranges);
  const batches = read.batches.map((sb) => {
    const children = [...changelogColumns(sb), ...sb.batch.data.children];
    return new arrow.RecordBatch(schema, arrow.makeData({ type, length: sb.batch.numRows, nullCount: 0, children }));
  });
  return { schema, batches, ends: read.ends };
}
