import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { type ColumnSpec, addColumns, type TableInfo } from '../common/schema.js';
import { type TestTableOptions, testTableInfo } from '../common/fixtures/table-info.js';
import { recordBatchRows } from '../record/arrow-payload.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { FileSystemCatalog } from '../lake/iceberg/catalog.js';
import { type DataFile, FileContent, type PartitionValue } from '../lake/iceberg/data-file.js';
import { commitAppend, commitRowDelta } from '../lake/iceberg/snapshot-producer.js';
import { currentSchema, newTableMetadata, partitionSpecById } from '../lake/iceberg/table-metadata.js';
import type { IcebergSchema } from '../lake/iceberg/types.js';
import { batchOf, POSITION_DELETE_SCHEMA, writeContentFile } from '../lake/iceberg/fixtures/lake-files.js';
import { IcebergFormat } from '../lake/iceberg/iceberg-format.js';
import { toLakeBatch } from '../lake/iceberg/lake-batch.js';
import { lakePartitionSpec, lakeSortOrder, newLakeSchema } from '../lake/iceberg/table-shape.js';
import { type LakePart, LakeReader } from './lake-backfill.js';
import type { ScanBatch } from './scan-batch.js';

type TableRow = Record<string, unknown>;
/** A row as the lake holds it: the table's columns and where it sits in the log. */
interface LakeRow {
  row: TableRow;
  offset: bigint;
  /** Commit time, ms. */
  timestamp: number;
}

/** The test table: id 42, schema 1, 2 buckets, lake-enabled, unless `options` say otherwise. */
const tableInfo = (columns: ColumnSpec[], options: TestTableOptions = {}) =>
  testTableInfo(columns, { tableId: 42, schemaId: 1, bucketCount: 2, properties: { 'table.datalake.enabled': 'true', 'table.datalake.format': 'iceberg' }, ...options });

/** A lake table of `info` in a temp warehouse, written as tiering writes it: lake schema, spec and batches from the real modules. */
class TestLake {
  readonly catalog: FileSystemCatalog;
  private fileNo = 0;

  constructor(
    readonly warehouse: string,
    readonly info: TableInfo,
  ) {
    this.catalog = new FileSystemCatalog(warehouse);
  }

  async create(): Promise<void> {
    const schema = newLakeSchema(this.info);
    const location = this.catalog.tableLocation('db', 't');
    await this.catalog.createTable('db', 't', newTableMetadata({ location, schema, spec: lakePartitionSpec(this.info, schema), sortOrder: lakeSortOrder(schema) }));
  }

  private async lakeSchema(): Promise<IcebergSchema> {
    return currentSchema((await this.catalog.loadTable('db', 't')).metadata);
  }

  /** Writes one Parquet file of `rows` (bucket `bucket`, partition tuple `partition`), in the order given. */
  async dataFile(bucket: number, partition: PartitionValue[], rows: LakeRow[]): Promise<DataFile> {
    const schema = toArrowSchema(this.info.schema);
    const children = schema.fields.map((f) => arrow.vectorFromArray(rows.map((r) => r.row[f.name] ?? null), f.type).data[0]);
    const batch = new arrow.RecordBatch(schema, arrow.makeData({ type: new arrow.Struct(schema.fields), length: rows.length, nullCount: 0, children }));
    const lakeSchema = await this.lakeSchema();
    const lake = toLakeBatch(batch, this.info, lakeSchema, {
      bucket,
      offsets: BigInt64Array.from(rows.map((r) => r.offset)),
      timestamps: BigInt64Array.from(rows.map((r) => BigInt(r.timestamp) * 1000n)),
    });
    return this.write(FileContent.DATA, partition, lakeSchema, lake);
  }

  /** An equality delete file on the primary key: the keys of `keys` rows. */
  async equalityDeletes(partition: PartitionValue[], keys: TableRow[]): Promise<DataFile> {
    const lakeSchema = await this.lakeSchema();
    const keyFields = lakeSchema['identifier-field-ids']!.map((id) => lakeSchema.fields.find((f) => f.id === id)!);
    const schema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: keyFields };
    return this.write(FileContent.EQUALITY_DELETES, partition, schema, batchOf(schema, keyFields.map((f) => keys.map((k) => k[f.name]))));
  }

  async positionDeletes(partition: PartitionValue[], deletes: { file: DataFile; pos: bigint }[]): Promise<DataFile> {
    return this.write(FileContent.POSITION_DELETES, partition, POSITION_DELETE_SCHEMA, batchOf(POSITION_DELETE_SCHEMA, [deletes.map((d) => d.file.filePath), deletes.map((d) => d.pos)]));
  }

  private async write(content: FileContent, partition: PartitionValue[], schema: IcebergSchema, batch: arrow.RecordBatch): Promise<DataFile> {
    const file = path.join(this.catalog.tableLocation('db', 't'), 'data', `p${partition.join('-')}`, `f${this.fileNo++}.parquet`);
    return writeContentFile(content, file, partition, schema, batch);
  }
}

/** Everything a part yields, batch by batch. */
async function drain(part: LakePart): Promise<ScanBatch[]> {
  const out: ScanBatch[] = [];
  for (let batches = await part.next(); batches; batches = await part.next()) {
    assert.ok(batches.length > 0, 'a part never yields an empty step');
    out.push(...batches);
  }
  return out;
}

/** The records of batches: offset, timestamp, change type byte (0 without change types) and row. */
function records(batches: ScanBatch[], info: TableInfo): { offset: bigint; timestamp: number; changeType: number; row: TableRow }[] {
  return batches.flatMap((b) =>
    recordBatchRows(b.batch, info.schema).map((row, i) => ({ offset: b.baseOffset + BigInt(i), timestamp: b.timestamp, changeType: b.changeTypes?.[i] ?? 0, row })),
  );
}

const T0 = Date.UTC(2024, 0, 1);

describe('lake backfill reader', () => {
  let warehouse: string;

  beforeEach(() => {
    warehouse = fs.mkdtempSync(path.join(os.tmpdir(), 'lake-backfill-'));
  });

  afterEach(() => {
    fs.rmSync(warehouse, { recursive: true, force: true });
  });

  describe('log table', () => {
    const info = tableInfo([
      { name: 'id', type: 'BIGINT', nullable: false },
      { name: 'note', type: 'STRING' },
      { name: 'small', type: 'SMALLINT' },
    ]);
    /** Rows of bucket b: offsets 0..n-1, in log batches of `perBatch` rows sharing a commit time. */
    const rowsOf = (bucket: number, n: number, perBatch: number): LakeRow[] =>
      Array.from({ length: n }, (_, i) => ({
        row: { id: BigInt(bucket * 1000 + i), note: i % 4 === 0 ? null : `n${bucket}-${i}`, small: i - 50 },
        offset: BigInt(i),
        timestamp: T0 + Math.floor(i / perBatch) * 10,
      }));

    it('yields a bucket’s rows in offset order, in runs of one commit time, from an offset up to the end offset', async () => {
      const lake = new TestLake(warehouse, info);
      await lake.create();
      const rows0 = rowsOf(0, 100, 7);
      const rows1 = rowsOf(1, 30, 7);
      // Two rounds: bucket 0 in two files, bucket 1 in one.
      const first = await commitAppend(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], rows0.slice(0, 60)), await lake.dataFile(1, [1], rows1)] });
      const snapshot = await commitAppend(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], rows0.slice(60))] });
      const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), info, () => toArrowSchema(info.schema));

      const all = records(await drain(await reader.read(snapshot, { bucket: 0 }, 0n, 100n)), info);
      assert.deepEqual(all, rows0.map((r) => ({ offset: r.offset, timestamp: r.timestamp, changeType: 0, row: r.row })));

      // From the middle of a log batch up to an end offset inside the second file.
      const part = await reader.read(snapshot, { bucket: 0 }, 17n, 75n);
      assert.equal(part.endOffset, 75n);
      const batches = await drain(part);
      assert.deepEqual(records(batches, info).map((r) => r.offset), rows0.slice(17, 75).map((r) => r.offset));
      // Runs break where the commit time changes and where one file ends, as the log batches did.
      assert.deepEqual(batches.map((b) => [b.baseOffset, b.batch.numRows]), [[17n, 4], [21n, 7], [28n, 7], [35n, 7], [42n, 7], [49n, 7], [56n, 4], [60n, 3], [63n, 7], [70n, 5]]);

      // The first snapshot holds only what it held then; bucket 1 sees only its own rows.
      assert.deepEqual(records(await drain(await reader.read(first, { bucket: 0 }, 0n, 100n)), info).length, 60);
      assert.deepEqual(records(await drain(await reader.read(snapshot, { bucket: 1 }, 25n, 30n)), info).map((r) => r.row), rows1.slice(25).map((r) => r.row));
      assert.equal((await reader.read(snapshot, { bucket: 1 }, 30n, 30n).then(drain)).length, 0);
    });

    it('orders rows of files whose offset ranges overlap, and of files not sorted by offset', async () => {
      const lake = new TestLake(warehouse, info);
      await lake.create();
      const rows = rowsOf(0, 40, 1);
      const shuffled = [...rows.slice(0, 20)].reverse();
      const interleaved = rows.slice(20).filter((_, i) => i % 2 === 0);
      const rest = rows.slice(20).filter((_, i) => i % 2 === 1);
      const snapshot = await commitAppend(lake.catalog, 'db', 't', {
        dataFiles: [await lake.dataFile(0, [0], [...shuffled, ...interleaved]), await lake.dataFile(0, [0], rest)],
      });
      const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), info, () => toArrowSchema(info.schema));
      const got = records(await drain(await reader.read(snapshot, { bucket: 0 }, 5n, 40n)), info);
      assert.deepEqual(got.map((r) => r.offset), rows.slice(5).map((r) => r.offset));
      assert.deepEqual(got.map((r) => r.row), rows.slice(5).map((r) => r.row));
    });

    it('presents rows in the reader’s columns: projected, reordered, and null where the lake lacks a column', async () => {
      const lake = new TestLake(warehouse, info);
      await lake.create();
      const rows = rowsOf(0, 10, 5);
      const snapshot = await commitAppend(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], rows)] });
      // The table gained a column the lake does not have yet.
      const evolved: TableInfo = { ...info, schemaId: 2, schema: addColumns(info.schema, [{ name: 'extra', type: 'INT' }]) };
      const projection = [3, 2, 0]; // extra, small, id
      const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), evolved, () => toArrowSchema(evolved.schema, projection));
      const got = records(await drain(await reader.read(snapshot, { bucket: 0 }, 0n, 10n)), evolved);
      assert.deepEqual(got.map((r) => r.row), rows.map((r) => ({ extra: null, small: r.row.small, id: r.row.id })));
      assert.deepEqual(Object.keys(got[0].row), ['extra', 'small', 'id']);
    });

    it('starts at the first row committed at or after a timestamp', async () => {
      const lake = new TestLake(warehouse, info);
      await lake.create();
      const rows = rowsOf(0, 30, 10); // commit times T0, T0+10, T0+20
      const snapshot = await commitAppend(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], rows)] });
      const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), info, () => toArrowSchema(info.schema));
      const from = async (ms: number) => records(await drain(await reader.read(snapshot, { bucket: 0 }, 0n, 30n, ms)), info).map((r) => r.offset);
      assert.deepEqual(await from(T0 + 5), rows.slice(10).map((r) => r.offset));
      assert.deepEqual(await from(T0 + 10), rows.slice(10).map((r) => r.offset));
      assert.deepEqual(await from(T0 + 21), []);
    });
  });

  it('partitioned table: reads only the files of the partition and bucket (bucket[N] of the key)', async () => {
    const info = tableInfo(
      [
        { name: 'region', type: 'STRING', nullable: false },
        { name: 'id', type: 'BIGINT', nullable: false },
      ],
      { partitionKeys: ['region'], bucketKeys: ['id'], bucketCount: 3 },
    );
    const lake = new TestLake(warehouse, info);
    await lake.create();
    const spec = partitionSpecById((await lake.catalog.loadTable('db', 't')).metadata, 0);
    assert.deepEqual(spec.fields.map((f) => f.transform), ['identity', 'bucket[3]']);
    const rows = (region: string, bucket: number): LakeRow[] =>
      Array.from({ length: 5 }, (_, i) => ({ row: { region, id: BigInt(bucket * 100 + i) }, offset: BigInt(i), timestamp: T0 }));
    const files: DataFile[] = [];
    for (const region of ['eu', 'us']) for (const bucket of [0, 1, 2]) files.push(await lake.dataFile(bucket, [region, bucket], rows(region, bucket)));
    const snapshot = await commitAppend(lake.catalog, 'db', 't', { dataFiles: files });
    const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), info, () => toArrowSchema(info.schema));
    const batches = await drain(await reader.read(snapshot, { bucket: 1, partition: 'us' }, 0n, 5n));
    assert.ok(batches.every((b) => b.bucket === 1 && b.partition === 'us'));
    assert.deepEqual(records(batches, info).map((r) => r.row), rows('us', 1).map((r) => r.row));
  });

  it('primary-key table: the lake’s state as +I, with equality deletes of later commits and position deletes applied', async () => {
    const info = tableInfo(
      [
        { name: 'k', type: 'INT' },
        { name: 'v', type: 'STRING' },
      ],
      { primaryKey: ['k'], bucketCount: 1 },
    );
    const lake = new TestLake(warehouse, info);
    await lake.create();
    const at = (k: number, v: string, offset: number): LakeRow => ({ row: { k, v }, offset: BigInt(offset), timestamp: T0 + offset });
    // Round 1: keys 1..4 at offsets 0..3.
    await commitAppend(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], [at(1, 'a', 0), at(2, 'b', 1), at(3, 'c', 2), at(4, 'd', 3)])] });
    // Round 2: key 2 updated (offset 5), key 3 deleted (offset 6), key 5 inserted twice in one file
    // (offsets 7 and 8), its first row removed by a position delete. The round's equality delete
    // does not touch its own rows (same sequence number).
    const round2 = await lake.dataFile(0, [0], [at(2, 'b2', 5), at(5, 'stale', 7), at(5, 'e', 8)]);
    const snapshot = await commitRowDelta(lake.catalog, 'db', 't', {
      dataFiles: [round2],
      deleteFiles: [await lake.equalityDeletes([0], [{ k: 2 }, { k: 3 }, { k: 5 }]), await lake.positionDeletes([0], [{ file: round2, pos: 1n }])],
    });
    const reader = new LakeReader(new IcebergFormat().open(lake.catalog.warehouse), info, () => toArrowSchema(info.schema));
    const got = records(await drain(await reader.read(snapshot, { bucket: 0 }, 0n, 9n)), info);
    assert.deepEqual(
      got.map((r) => [r.offset, r.row.k, r.row.v, r.changeType]),
      [
        [0n, 1, 'a', 1],
        [3n, 4, 'd', 1],
        [5n, 2, 'b2', 1],
        [8n, 5, 'e', 1],
      ],
    );
    assert.deepEqual(got.map((r) => r.timestamp), [T0, T0 + 3, T0 + 5, T0 + 8]);
    // From an offset: the keys whose last change is at or after it.
    assert.deepEqual(records(await drain(await reader.read(snapshot, { bucket: 0 }, 4n, 9n)), info).map((r) => r.row.k), [2, 5]);

    // Round 3: key 5 deleted (offset 9), key 6 inserted (offset 10). Its delete reaches round 2's
    // file, whose own key 2 (deleted only by round 2's delete file, of the same sequence number) stays.
    const round3 = await commitRowDelta(lake.catalog, 'db', 't', { dataFiles: [await lake.dataFile(0, [0], [at(6, 'f', 10)])], deleteFiles: [await lake.equalityDeletes([0], [{ k: 5 }])] });
    assert.deepEqual(records(await drain(await reader.read(round3, { bucket: 0 }, 0n, 11n)), info).map((r) => [r.offset, r.row.k]), [
      [0n, 1],
      [3n, 4],
      [5n, 2],
      [10n, 6],
    ]);
    assert.equal(records(await drain(await reader.read(snapshot, { bucket: 0 }, 0n, 9n)), info).length, 4, 'an older snapshot reads as it was');
  });
});
