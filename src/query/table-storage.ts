/**
 * SHOW TABLE STORAGE t: what each bucket of a table keeps, and where. One row per partition and
 * bucket: the log's bytes and segments on its leader's local disk and in remote storage (NULL
 * while the bucket has no remote log), and the bytes and files of the lake's current snapshot
 * that hold the bucket's rows (data and delete files; NULL for a table that is not lake-enabled).
 * A lake file's bucket is its partition's last field (identity(__bucket) or bucket[N] of the
 * bucket key, which Tributary buckets the same way); its Tributary partition is the name of the
 * other fields' values.
 */
import type { BucketStorageInfo, Connection } from '../client/index.js';
import { tableOption } from '../common/config.js';
import type { TableInfo } from '../common/schema.js';
import type { LakeTable } from '../lake/lake-format.js';
import type { DuckSession } from './duckdb/session.js';
import type { QueryResult } from './duckdb/result.js';

interface LakeShare {
  bytes: bigint;
  files: bigint;
}

const keyOf = (partition: string | undefined, bucket: number): string => `${partition ?? ''}\u0000${bucket}`;

/** The rows of SHOW TABLE STORAGE for `info`; `lakeTable` opens its lake table when it has a lake snapshot. */
export async function tableStorage(conn: Connection, duck: DuckSession, info: TableInfo, lakeTable: () => Promise<LakeTable>): Promise<QueryResult> {
  const admin = conn.getAdmin();
  const buckets = await admin.getTableStorage(info.path);
  const lakeEnabled = tableOption(info.properties, 'table.datalake.enabled') === 'true';
  const lake = new Map<string, LakeShare>();
  if (lakeEnabled && (await admin.getLakeTieringStatus(info.path)).snapshotId !== undefined) {
    const files = await duck.run(`SELECT partition, file_size_in_bytes FROM (${await (await lakeTable()).filesSql()})`);
    for (const [partition, size] of files.rows as [string, bigint][]) {
      const values = Object.values(JSON.parse(partition) as Record<string, unknown>);
      const bucket = Number(values.pop());
      const key = keyOf(info.partitionKeys.length > 0 ? values.map(String).join('$') : undefined, bucket);
      const share = lake.get(key) ?? { bytes: 0n, files: 0n };
      share.bytes += BigInt(size);
      share.files++;
      lake.set(key, share);
    }
  }
  const row = (b: BucketStorageInfo): unknown[] => {
    const share = lakeEnabled ? (lake.get(keyOf(b.partition, b.bucket)) ?? { bytes: 0n, files: 0n }) : undefined;
    return [b.partition ?? null, b.bucket, b.localBytes, BigInt(b.localSegments), b.remoteBytes ?? null, b.remoteSegments === undefined ? null : BigInt(b.remoteSegments), share?.bytes ?? null, share?.files ?? null];
  };
  return {
    columns: [
      { name: 'partition', type: 'VARCHAR' },
      { name: 'bucket', type: 'INTEGER' },
      { name: 'local_bytes', type: 'BIGINT' },
      { name: 'local_segments', type: 'BIGINT' },
      { name: 'remote_bytes', type: 'BIGINT' },
      { name: 'remote_segments', type: 'BIGINT' },
      { name: 'lake_bytes', type: 'BIGINT' },
      { name: 'lake_files', type: 'BIGINT' },
    ],
    rows: buckets.map(row),
  };
}
