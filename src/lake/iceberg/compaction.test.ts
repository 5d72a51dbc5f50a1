import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { DuckSession } from '../../query/duckdb/session.js';
import { FileSystemCatalog } from './catalog.js';
import { type DataFile, FileContent } from './data-file.js';
import { planScan } from './scan.js';
import { fromSingleValue } from './single-value.js';
import { commitRowDelta } from './snapshot-producer.js';
import { currentSnapshot, newTableMetadata } from './table-metadata.js';
import type { IcebergSchema } from './types.js';
import { batchOf, lakeRowsSql, POSITION_DELETE_SCHEMA, writeContentFile } from './fixtures/lake-files.js';
import { TABLE_ID_PROPERTY } from '../lake-format.js';
import { compactLakeTable, prepareCompaction } from './compaction.js';
import { bucketOffsetsSummary, SUMMARY_BUCKET_OFFSETS, SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH } from '../tiered-offsets.js';

/** DuckDB, the engine compaction rewrites with. */
const sql = () => DuckSession.create();

const DB = 'db';
const TABLE = 'accounts';
const TABLE_ID = 7;

/** A primary-key table's lake shape: key k, value v, the system columns; partitioned by __bucket, sorted by __offset. */
const schema: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'k', required: true, type: 'long' },
    { id: 2, name: 'v', required: false, type: 'string' },
    { id: 3, name: '__bucket', required: true, type: 'int' },
    { id: 4, name: '__offset', required: true, type: 'long' },
    { id: 5, name: '__timestamp', required: true, type: 'timestamptz' },
  ],
};
const keySchema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [schema.fields[0]] };
type Row = { k: bigint; v: string | null; offset: bigint };

describe('lake compaction', () => {
  let warehouse: string;
  let catalog: FileSystemCatalog;
  let location: string;
  let duck: DuckSession;
  let fileNo = 0;
  /** What the lake must hold: bucket → key → row. */
  let model: Map<number, Map<bigint, Row>>;
  /** Next log offset per bucket. */
  let nextOffset: bigint[];
  let epoch = 0;

  beforeEach(async () => {
    warehouse = fs.mkdtempSync(path.join(os.tmpdir(), 'lake-compaction-'));
    catalog = new FileSystemCatalog(warehouse);
    location = catalog.tableLocation(DB, TABLE);
    const spec = { 'spec-id': 0, fields: [{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
    const sortOrder = { 'order-id': 1, fields: [{ transform: 'identity', 'source-id': 4, direction: 'asc' as const, 'null-order': 'nulls-first' as const }] };
    await catalog.createTable(DB, TABLE, newTableMetadata({ location, schema, spec, sortOrder, properties: { [TABLE_ID_PROPERTY]: String(TABLE_ID), 'commit.retry.num-retries': '0' } }));
    duck = await DuckSession.create();
    model = new Map([
      [0, new Map()],
      [1, new Map()],
    ]);
    nextOffset = [0n, 0n];
  });

  afterEach(() => {
    duck.close();
    fs.rmSync(warehouse, { recursive: true, force: true });
  });

  function write(content: FileContent, bucket: number, fileSchema: IcebergSchema, columns: unknown[][]): DataFile {
    return writeContentFile(content, path.join(location, 'data', `__bucket=${bucket}`, `f${fileNo++}.parquet`), [bucket], fileSchema, batchOf(fileSchema, columns));
  }

  /** The summary tiering writes: the table id, an epoch and every bucket's end offset. */
  function tieredSummary(): Record<string, string> {
    return {
      [SUMMARY_TABLE_ID]: String(TABLE_ID),
      [SUMMARY_TIERING_EPOCH]: String(++epoch),
      [SUMMARY_BUCKET_OFFSETS]: bucketOffsetsSummary(nextOffset.map((endOffset, bucket) => ({ bucket, endOffset }))),
    };
  }

  /**
   * One tiering-like round: per bucket, upserts (a data file of the new rows) and an equality
   * delete file for the keys that were in the lake before (updated or deleted). With `duplicate`,
   * the first upserted key is written twice in the data file and its first row removed by a
   * position delete, as a writer does for a key changed twice within one file.
   */
  async function round(changes: { bucket: number; upserts: bigint[]; deletes?: bigint[]; duplicate?: boolean }[]): Promise<void> {
    const dataFiles: DataFile[] = [];
    const deleteFiles: DataFile[] = [];
    for (const { bucket, upserts, deletes = [], duplicate } of changes) {
      const state = model.get(bucket)!;
      const existed = [...upserts, ...deletes].filter((k) => state.has(k));
      const rows: Row[] = [];
      if (duplicate) rows.push({ k: upserts[0], v: 'stale', offset: nextOffset[bucket]++ });
      for (const k of upserts) rows.push({ k, v: k % 3n === 0n ? null : `v${k}@${nextOffset[bucket]}`, offset: nextOffset[bucket]++ });
      for (const k of deletes) {
        state.delete(k);
        nextOffset[bucket]++;
      }
      for (const r of rows.slice(duplicate ? 1 : 0)) state.set(r.k, r);
      if (rows.length > 0) {
        const data = write(FileContent.DATA, bucket, schema, [
          rows.map((r) => r.k),
          rows.map((r) => r.v),
          rows.map(() => bucket),
          rows.map((r) => r.offset),
          rows.map((r) => Number(r.offset) * 1000),
        ]);
        dataFiles.push(data);
        if (duplicate) deleteFiles.push(write(FileContent.POSITION_DELETES, bucket, POSITION_DELETE_SCHEMA, [[data.filePath], [0n]]));
      }
      if (existed.length > 0) deleteFiles.push(write(FileContent.EQUALITY_DELETES, bucket, keySchema, [existed]));
    }
    await commitRowDelta(catalog, DB, TABLE, { dataFiles, deleteFiles, summary: tieredSummary() });
  }

  /** Several rounds of inserts, updates and deletes in buckets 0 and 1. */
  async function buildLake(): Promise<void> {
    await round([
      { bucket: 0, upserts: [1n, 2n, 3n, 4n, 5n] },
      { bucket: 1, upserts: [10n, 11n, 12n] },
    ]);
    await round([
      { bucket: 0, upserts: [2n, 6n], deletes: [4n], duplicate: true },
      { bucket: 1, upserts: [11n, 13n] },
    ]);
    await round([
      { bucket: 0, upserts: [1n, 2n], deletes: [5n] },
      { bucket: 1, upserts: [14n], deletes: [10n, 12n] },
    ]);
    await round([{ bucket: 0, upserts: [7n, 3n], deletes: [6n], duplicate: true }]);
  }

  /** The model's rows as the format's read gives them: [k, v, __bucket, __offset], sorted. */
  function expectedRows(): unknown[][] {
    const rows: unknown[][] = [];
    for (const [bucket, state] of model) for (const r of state.values()) rows.push([r.k, r.v, bucket, r.offset]);
    return rows.sort((a, b) => (a[0] as bigint < (b[0] as bigint) ? -1 : 1));
  }

  async function lakeRows(): Promise<unknown[][]> {
    return (await duck.run(`SELECT k, v, __bucket, __offset FROM (${await lakeRowsSql(catalog, DB, TABLE)}) ORDER BY k`)).rows;
  }

  async function filesByBucket(): Promise<Map<number, { data: DataFile[]; deletes: Set<string> }>> {
    const plan = await planScan(await catalog.loadTable(DB, TABLE));
    const out = new Map<number, { data: DataFile[]; deletes: Set<string> }>();
    for (const task of plan.dataFiles) {
      const bucket = task.file.partition[0] as number;
      const entry = out.get(bucket) ?? { data: [], deletes: new Set() };
      entry.data.push(task.file);
      for (const d of task.deletes) entry.deletes.add(d.filePath);
      out.set(bucket, entry);
    }
    return out;
  }

  it('rewrites each partition into one data file sorted by __offset, without deleted rows and delete files, in one commit', async () => {
    await buildLake();
    assert.deepEqual(await lakeRows(), expectedRows());
    const before = await catalog.loadTable(DB, TABLE);
    const read = currentSnapshot(before.metadata)!;
    assert.equal((await filesByBucket()).get(0)!.data.length, 4);

    const progress: number[] = [];
    const result = await compactLakeTable(catalog, DB, TABLE, sql, { onProgress: (rows) => progress.push(rows) });
    assert.ok(result);
    assert.deepEqual(result.partitions.map((p) => p.name).sort(), ['__bucket=0', '__bucket=1']);
    // The rows written so far, after each partition.
    const records = result.partitions.map((p) => p.added?.recordCount ?? 0);
    assert.deepEqual(progress, [records[0], records[0] + records[1]]);
    const bucket0 = result.partitions.find((p) => p.name === '__bucket=0')!;
    assert.equal(bucket0.removedDataFiles.length, 4);
    assert.equal(bucket0.removedDeleteFiles.length, 5); // 3 equality + 2 position delete files

    assert.deepEqual(await lakeRows(), expectedRows());
    const after = await catalog.loadTable(DB, TABLE);
    assert.equal(after.metadata.snapshots.length, before.metadata.snapshots.length + 1);
    const snapshot = currentSnapshot(after.metadata)!;
    assert.equal(snapshot.snapshotId, result.snapshotId);
    assert.equal(snapshot.summary.operation, 'replace');
    assert.equal(snapshot.summary['total-delete-files'], '0');
    assert.equal(snapshot.summary['total-data-files'], '2');
    for (const key of [SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH, SUMMARY_BUCKET_OFFSETS]) assert.equal(snapshot.summary[key], read.summary[key], key);

    const files = await filesByBucket();
    for (const [bucket, state] of model) {
      const { data, deletes } = files.get(bucket)!;
      assert.equal(data.length, 1, `bucket ${bucket}: one data file`);
      assert.equal(deletes.size, 0, `bucket ${bucket}: no delete file applies`);
      const file = data[0];
      const offsets = [...state.values()].map((r) => r.offset).sort((a, b) => (a < b ? -1 : 1));
      assert.equal(file.recordCount, state.size);
      assert.equal(file.sortOrderId, 1);
      assert.deepEqual(file.partition, [bucket]);
      assert.equal(fromSingleValue('long', file.lowerBounds!.get(4)!), offsets[0]);
      assert.equal(fromSingleValue('long', file.upperBounds!.get(4)!), offsets.at(-1));
      assert.equal(fromSingleValue('int', file.lowerBounds!.get(3)!), bucket);
      assert.equal(file.valueCounts!.get(2), state.size);
      assert.equal(file.nullValueCounts!.get(2), [...state.values()].filter((r) => r.v === null).length);
      assert.equal(file.fileSizeInBytes, fs.statSync(file.filePath).size);
      // Rows in __offset order, columns by Iceberg field id, ZSTD.
      const stored = await duck.run(`SELECT __offset FROM read_parquet('${file.filePath}')`);
      assert.deepEqual(stored.rows.map((r) => r[0]), offsets);
      const ids = await duck.run(`SELECT name, field_id FROM parquet_schema('${file.filePath}') WHERE field_id IS NOT NULL ORDER BY field_id`);
      assert.deepEqual(ids.rows, schema.fields.map((f) => [f.name, BigInt(f.id)]));
      const codecs = await duck.run(`SELECT DISTINCT compression FROM parquet_metadata('${file.filePath}')`);
      assert.deepEqual(codecs.rows, [['ZSTD']]);
    }

    // Nothing left to compact: no commit.
    assert.equal(await compactLakeTable(catalog, DB, TABLE, sql), undefined);
    assert.equal((await catalog.loadTable(DB, TABLE)).metadata.snapshots.length, after.metadata.snapshots.length);
  });

  it('applies an equality delete committed between the scan and the rewrite to the new file', async () => {
    await buildLake();
    const prepared = await prepareCompaction(catalog, DB, TABLE, sql);
    assert.ok(prepared);
    // Another writer deletes key 2 of bucket 0 while the rewrite is being written.
    const concurrent = write(FileContent.EQUALITY_DELETES, 0, keySchema, [[2n]]);
    await commitRowDelta(catalog, DB, TABLE, { dataFiles: [], deleteFiles: [concurrent] });
    model.get(0)!.delete(2n);
    await prepared.commit();

    assert.deepEqual(await lakeRows(), expectedRows());
    const bucket0 = (await filesByBucket()).get(0)!;
    assert.equal(bucket0.data.length, 1);
    assert.deepEqual([...bucket0.deletes], [concurrent.filePath]);
    assert.equal(bucket0.data[0].recordCount, model.get(0)!.size + 1, 'the rewrite holds key 2; the later delete removes it on read');
  });

  it('is fenced when tiering commits meanwhile, and deletes the files it wrote', async () => {
    await buildLake();
    const prepared = await prepareCompaction(catalog, DB, TABLE, sql);
    assert.ok(prepared);
    await round([{ bucket: 1, upserts: [11n, 15n] }]);
    await assert.rejects(prepared.commit(), (err: { errorName?: string }) => err.errorName === 'FENCED_TIERING_EPOCH_EXCEPTION');
    for (const p of prepared.partitions) assert.equal(fs.existsSync(p.added!.filePath), false);
    assert.deepEqual(await lakeRows(), expectedRows());
    // The next compaction starts from the new snapshot.
    assert.ok(await compactLakeTable(catalog, DB, TABLE, sql));
    assert.deepEqual(await lakeRows(), expectedRows());
  });

  it('fails rather than lose position deletes committed meanwhile, which name the files it rewrites', async () => {
    await buildLake();
    const prepared = await prepareCompaction(catalog, DB, TABLE, sql);
    assert.ok(prepared);
    const target = prepared.partitions.find((p) => p.name === '__bucket=1')!.removedDataFiles[0];
    await commitRowDelta(catalog, DB, TABLE, { dataFiles: [], deleteFiles: [write(FileContent.POSITION_DELETES, 1, POSITION_DELETE_SCHEMA, [[target.filePath], [0n]])] });
    await assert.rejects(prepared.commit(), (err: { errorName?: string }) => err.errorName === 'COMMIT_FAILED');
    for (const p of prepared.partitions) assert.equal(fs.existsSync(p.added!.filePath), false);
  });

  it('compacts only the chosen partitions, and only those with enough delete files', async () => {
    await buildLake();
    assert.equal(await compactLakeTable(catalog, DB, TABLE, sql, { minDeleteFiles: 6 }), undefined);
    const one = await compactLakeTable(catalog, DB, TABLE, sql, { partitions: [[1]] });
    assert.deepEqual(one?.partitions.map((p) => p.name), ['__bucket=1']);
    const files = await filesByBucket();
    assert.equal(files.get(0)!.data.length, 4);
    assert.equal(files.get(1)!.data.length, 1);
    // Bucket 0 holds 5 delete files.
    assert.equal(await compactLakeTable(catalog, DB, TABLE, sql, { partitions: [[0]], minDeleteFiles: 6 }), undefined);
    assert.deepEqual((await compactLakeTable(catalog, DB, TABLE, sql, { minDeleteFiles: 5 }))?.partitions.map((p) => p.name), ['__bucket=0']);
    assert.deepEqual(await lakeRows(), expectedRows());
  });

  it('drops a partition whose rows are all deleted: no new file, no delete file left', async () => {
    await round([
      { bucket: 0, upserts: [1n, 2n] },
      { bucket: 1, upserts: [10n] },
    ]);
    await round([{ bucket: 0, upserts: [], deletes: [1n, 2n] }]);
    const result = await compactLakeTable(catalog, DB, TABLE, sql);
    assert.deepEqual(result?.partitions.map((p) => [p.name, p.added]), [['__bucket=0', undefined]]);
    assert.deepEqual(await lakeRows(), expectedRows());
    const files = await filesByBucket();
    assert.deepEqual([...files.keys()], [1]);
    assert.equal(currentSnapshot((await catalog.loadTable(DB, TABLE)).metadata)!.summary['total-delete-files'], '0');
  });
});
