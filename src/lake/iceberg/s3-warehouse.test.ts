/**
 * The Iceberg lake on an s3:// warehouse, against a real S3-protocol server (s3rver) on loopback:
 * data files written by the tiering writer's pool (staged locally, uploaded), row-delta commits
 * with equality deletes, two writers committing at once, reads through the lake file cache,
 * compaction, expiry and orphan removal; and an independent reader that lists the bucket with the
 * AWS SDK, downloads the files the metadata names and rebuilds the table with DuckDB.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GetObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import avro from 'avsc';
import { Options } from '../../common/config.js';
import { DuckSession } from '../../query/duckdb/session.js';
import { startS3Server, type S3TestServer } from '../../storage/fixtures/s3-server.js';
import { configureObjectStorage, objectStoreFor } from '../../storage/stores.js';
import { storageStats } from '../../storage/storage-stats.js';
import { readManifest, readManifestList } from './scan.js';
import { TABLE_ID_PROPERTY } from '../lake-format.js';
import { FileSystemCatalog } from './catalog.js';
import { type DataFile, FileContent } from './data-file.js';
import { DataFileWriterPool } from './data-file-writer.js';
import { batchOf, POSITION_DELETE_SCHEMA } from './fixtures/lake-files.js';
import { computeMetrics } from './metrics.js';
import { writeParquet } from './parquet.js';
import { lakePartFilter } from '../../query/lake-pruning.js';
import { IcebergFormat } from './iceberg-format.js';
import { compactLakeTable } from './compaction.js';
import { expireSnapshots, removeOrphanFiles } from './maintenance.js';
import { commitRowDelta } from './snapshot-producer.js';
import { newTableMetadata } from './table-metadata.js';
import type { IcebergSchema } from './types.js';

const DB = 'db';
const TABLE = 'accounts';
const schema: IcebergSchema = {
  type: 'struct',
  'schema-id': 0,
  'identifier-field-ids': [1],
  fields: [
    { id: 1, name: 'k', required: true, type: 'long' },
    { id: 2, name: 'v', required: false, type: 'string' },
    { id: 3, name: '__bucket', required: true, type: 'int' },
  ],
};
const keySchema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [schema.fields[0]] };

/** The records of an Avro container file, longs as bigints (snapshot ids pass 2^53). */
function avroRecords(bytes: Uint8Array): Promise<unknown[]> {
  const long = avro.types.LongType.__with({ fromBuffer: (b: Buffer) => b.readBigInt64LE(), toBuffer: () => Buffer.alloc(8), fromJSON: BigInt, toJSON: String, isValid: (n: unknown) => typeof n === 'bigint', compare: () => 0 });
  return new Promise((resolve, reject) => {
    const records: unknown[] = [];
    const decoder = new avro.streams.BlockDecoder({ parseHook: (s: avro.Schema) => avro.Type.forSchema(s, { registry: { long } }) });
    decoder.on('data', (r: unknown) => records.push(r)).on('end', () => resolve(records)).on('error', reject);
    decoder.end(Buffer.from(bytes));
  });
}

describe('an Iceberg lake on an s3:// warehouse', () => {
  let server: S3TestServer;
  let cacheDir: string;
  let warehouse: string;
  let catalog: FileSystemCatalog;
  let pool: DataFileWriterPool;
  let duck: DuckSession;
  let fileNo = 0;
  /** What the table must hold: key → value. */
  const model = new Map<bigint, string>();

  before(async () => {
    server = await startS3Server();
    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'lake-cache-'));
    configureObjectStorage(new Options('server', { ...server.options, 'datalake.cache.max-size': '64mb' }), cacheDir);
    warehouse = server.location('warehouse');
    catalog = new FileSystemCatalog(warehouse);
    const location = catalog.tableLocation(DB, TABLE);
    const spec = { 'spec-id': 0, fields: [{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
    await catalog.createTable(DB, TABLE, newTableMetadata({ location, schema, spec, sortOrder: { 'order-id': 0, fields: [] }, properties: { [TABLE_ID_PROPERTY]: '7', 'commit.retry.min-wait-ms': '5' } }));
    pool = new DataFileWriterPool(1);
    duck = await DuckSession.create();
  });

  after(async () => {
    duck.close();
    await pool.close();
    await server.stop();
    fs.rmSync(cacheDir, { recursive: true, force: true });
  });

  /** Writes a data (or equality delete) file of bucket 0 through the tiering writer's pool. */
  async function write(content: FileContent, rows: [bigint, string][]): Promise<DataFile> {
    const location = `${catalog.tableLocation(DB, TABLE)}/data/__bucket=0/f${fileNo++}${content === FileContent.DATA ? '' : '-deletes'}.parquet`;
    const fileSchema = content === FileContent.DATA ? schema : keySchema;
    const columns = content === FileContent.DATA ? [rows.map((r) => r[0]), rows.map((r) => r[1]), rows.map(() => 0)] : [rows.map((r) => r[0])];
    const written = await pool.write({ batches: [batchOf(fileSchema, columns)], path: location, schema: fileSchema });
    return { ...written, content, partition: [0], ...(content === FileContent.EQUALITY_DELETES ? { equalityIds: [1] } : {}) };
  }

  /** Upserts `rows` (an equality delete for keys already there) and deletes `deletes`, in one commit. */
  async function change(rows: [bigint, string][], deletes: bigint[] = [], onCatalog = catalog): Promise<void> {
    const gone = [...rows.map((r) => r[0]), ...deletes].filter((k) => model.has(k));
    const dataFiles = rows.length > 0 ? [await write(FileContent.DATA, rows)] : [];
    const deleteFiles = gone.length > 0 ? [await write(FileContent.EQUALITY_DELETES, gone.map((k) => [k, '']))] : [];
    await commitRowDelta(onCatalog, DB, TABLE, { dataFiles, deleteFiles });
    for (const k of deletes) model.delete(k);
    for (const [k, v] of rows) model.set(k, v);
  }

  /** The table's rows as the format reads them (files fetched into the lake file cache). */
  async function tableRows(): Promise<[bigint, string][]> {
    const table = await new IcebergFormat().open(warehouse).loadTable({ database: DB, table: TABLE });
    const plan = await table.planRead();
    try {
      const result = await duck.run(`SELECT k, v FROM (${await plan.rowsSql(plan.splits)}) ORDER BY k`);
      return result.rows.map((r) => [r[0] as bigint, r[1] as string]);
    } finally {
      plan.release();
    }
  }

  const expected = (): [bigint, string][] => [...model].sort((a, b) => (a[0] < b[0] ? -1 : 1));

  it('commits data and equality deletes to S3, names s3:// locations, and reads them back through the cache', async () => {
    await change([[1n, 'a'], [2n, 'b'], [3n, 'c']]);
    await change([[2n, 'b2']], [3n]);
    assert.deepEqual(await tableRows(), expected());
    const loaded = await catalog.loadTable(DB, TABLE);
    assert.match(loaded.metadataLocation, /^s3:\/\/tributary-test\/warehouse\/db\/accounts\/metadata\/v3\.metadata\.json$/);
    assert.ok(loaded.metadata.snapshots.every((s) => s.manifestList.startsWith('s3://')));
    assert.ok(!fs.readdirSync(cacheDir).some((n) => n.endsWith('.tmp')), 'no staging file is left');
  });

  it('two writers committing to the table at once both land: the loser retries on the new version', async () => {
    const other = new FileSystemCatalog(warehouse);
    const before = (await catalog.loadTable(DB, TABLE)).version;
    await Promise.all([change([[10n, 'x']], [], catalog), change([[11n, 'y']], [], other), change([[12n, 'z']], [], other)]);
    const after = await catalog.loadTable(DB, TABLE);
    assert.equal(after.version, before + 3);
    assert.deepEqual(await tableRows(), expected());
  });

  it('compaction, expiry and orphan removal work on the S3 warehouse and keep every row', async () => {
    const lake = new IcebergFormat().open(warehouse);
    const compacted = await lake.compact({ database: DB, table: TABLE }, () => DuckSession.create());
    assert.ok(compacted && compacted.partitions.length === 1 && compacted.partitions[0].added?.path.startsWith('s3://'));
    assert.deepEqual(await tableRows(), expected());
    const expired = await expireSnapshots(catalog, DB, TABLE, { olderThanMs: Date.now() + 1, retainLast: 1 });
    assert.ok(expired.expiredSnapshotIds.length > 0 && expired.deletedFiles.every((f) => f.startsWith('s3://')));
    assert.deepEqual(await tableRows(), expected());
    const orphan = `${catalog.tableLocation(DB, TABLE)}/data/__bucket=0/orphan.parquet`;
    await objectStoreFor(orphan).put(orphan, 'left by a writer that died');
    assert.deepEqual((await removeOrphanFiles(catalog, DB, TABLE, { olderThanMs: Date.now() + 1000 })).deletedFiles, [orphan]);
    assert.deepEqual(await tableRows(), expected());
    assert.ok(await compactLakeTable(catalog, DB, TABLE, () => DuckSession.create()) === undefined, 'one file without deletes needs no compaction');
  });

  it('an independent reader rebuilds the table from the bucket: AWS SDK listing, downloads, DuckDB', async () => {
    const s3 = new S3Client({ endpoint: server.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' } });
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await s3.send(new ListObjectsV2Command({ Bucket: server.bucket, Prefix: 'warehouse/db/accounts/', ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((o) => o.Key!));
      token = page.NextContinuationToken;
    } while (token);
    const versions = keys.map((k) => /metadata\/v(\d+)\.metadata\.json$/.exec(k)?.[1]).filter((v) => v !== undefined).map(Number);
    const latest = `warehouse/db/accounts/metadata/v${Math.max(...versions)}.metadata.json`;
    const download = async (key: string): Promise<Uint8Array> => (await s3.send(new GetObjectCommand({ Bucket: server.bucket, Key: key }))).Body!.transformToByteArray();
    const metadata = JSON.parse(Buffer.from(await download(latest)).toString('utf8'));
    const current = metadata.snapshots.find((s: { 'snapshot-id': number }) => BigInt(s['snapshot-id']) === BigInt(metadata['current-snapshot-id']));
    const keyOf = (location: string): string => location.replace(`s3://${server.bucket}/`, '');
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'independent-'));
    try {
      // The manifest list and manifests are Avro container files, read with avsc's own decoder.
      const manifests = (await avroRecords(await download(keyOf(current['manifest-list'])))) as { manifest_path: string }[];
      const dataFiles = new Set<string>();
      for (const m of manifests) {
        for (const e of (await avroRecords(await download(keyOf(m.manifest_path)))) as { status: number; data_file: { file_path: string; content: number } }[]) {
          if (e.status !== 2 && e.data_file.content === 0) dataFiles.add(e.data_file.file_path);
        }
      }
      assert.equal(dataFiles.size, 1, 'after compaction one data file holds the table');
      const local: string[] = [];
      for (const f of dataFiles) {
        assert.ok(keys.includes(keyOf(f)), `${f} is in the bucket`);
        const file = path.join(dir, path.basename(f));
        fs.writeFileSync(file, await download(keyOf(f)));
        local.push(file);
      }
      const rows = await duck.run(`SELECT k, v FROM read_parquet([${local.map((f) => `'${f}'`).join(', ')}]) ORDER BY k`);
      assert.deepEqual(rows.rows.map((r) => [r[0], r[1]]), expected());
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the REST document of an S3 table names its metadata location and the FileIO settings, never the credentials', async () => {
    const lake = new IcebergFormat().open(warehouse);
    const doc = JSON.parse(await (await lake.restCatalog!.loadTable({ database: DB, table: TABLE }))!.document());
    assert.match(doc['metadata-location'], /^s3:\/\//);
    assert.deepEqual(doc.config, { 's3.endpoint': server.endpoint, 's3.path-style-access': 'true', 'client.region': 'us-east-1' });
  });

  it('manifests and manifest lists read from S3 are kept in memory: planning again sends no GET for them', async () => {
    const loaded = await catalog.loadTable(DB, TABLE);
    const current = loaded.metadata.snapshots.find((x) => x.snapshotId === loaded.metadata.currentSnapshotId)!;
    const gets = (): number => storageStats().requests.get('GetObject') ?? 0;
    const first = await readManifestList(current.manifestList);
    for (const m of first) await readManifest(m);
    const before = gets();
    assert.deepEqual(await readManifestList(current.manifestList), first);
    for (const m of first) await readManifest(m);
    assert.ok(first.length > 0);
    assert.equal(gets() - before, 0, 'read again from memory');
  });
  it('a read of some columns copies only their chunks, with the keys its equality deletes need, and reads the same rows', async () => {
    // Values that do not compress make v most of the file; k and __bucket are a small part of it.
    const rows = Array.from({ length: 3000 }, (_, i): [bigint, string] => [BigInt(100_000 + i), crypto.createHash('sha512').update(String(i)).digest('hex')]);
    await change(rows);
    await change([], rows.slice(0, 1000).map((r) => r[0]));
    // A cache of its own: the writer left whole copies of the files it wrote in the other one.
    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'lake-cache-'));
    configureObjectStorage(new Options('server', server.options), fresh);
    try {
      const table = await new IcebergFormat().open(warehouse).loadTable({ database: DB, table: TABLE });
      const plan = await table.planRead();
      try {
        const before = storageStats().cacheFetchedBytes;
        const counted = await duck.run(`SELECT count(*), min(__bucket) FROM (${await plan.rowsSql(plan.splits, ['__bucket'])})`);
        assert.deepEqual(counted.rows, [[BigInt(model.size), 0]], 'the equality deletes applied: their key column was copied');
        const fetched = storageStats().cacheFetchedBytes - before;
        const largest = Math.max(...(await Promise.all(plan.splits.map(async (x) => (await objectStoreFor(x.path).head(x.path))!.size))));
        assert.ok(fetched < largest / 2, `fetched ${fetched} bytes; the largest data file is ${largest}`);
      } finally {
        plan.release();
      }
      assert.deepEqual(await tableRows(), expected());
    } finally {
      fs.rmSync(fresh, { recursive: true, force: true });
    }
  });

  it('a read with a selective filter copies only the row groups that may hold its rows, and a position delete keeps them all', async () => {
    const table = 'events';
    const eventSchema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [schema.fields[0], schema.fields[1]] };
    await catalog.createTable(DB, table, newTableMetadata({ location: catalog.tableLocation(DB, table), schema: eventSchema, spec: { 'spec-id': 0, fields: [] }, sortOrder: { 'order-id': 0, fields: [] }, properties: { [TABLE_ID_PROPERTY]: '8' } }));
    /** Writes `batch` as a Parquet file of row groups of 2000 rows on S3. */
    const put = async (name: string, content: FileContent, fileSchema: IcebergSchema, batch: ReturnType<typeof batchOf>): Promise<DataFile> => {
      const location = `${catalog.tableLocation(DB, table)}/data/${name}.parquet`;
      const bytes = writeParquet([batch], { maxRowGroupRows: 2000 });
      await objectStoreFor(location).put(location, bytes);
      const m = computeMetrics([batch], fileSchema);
      return { content, filePath: location, fileFormat: 'PARQUET', partition: [], recordCount: m.recordCount, fileSizeInBytes: bytes.length, valueCounts: m.valueCounts, nullValueCounts: m.nullValueCounts, lowerBounds: m.lowerBounds, upperBounds: m.upperBounds };
    };
    const n = 20_000;
    const data = await put('events', FileContent.DATA, eventSchema, batchOf(eventSchema, [Array.from({ length: n }, (_, i) => BigInt(i)), Array.from({ length: n }, (_, i) => crypto.createHash('sha512').update(String(i)).digest('hex'))]));
    await commitRowDelta(catalog, DB, table, { dataFiles: [data], deleteFiles: [] });
    const fresh = fs.mkdtempSync(path.join(os.tmpdir(), 'lake-cache-'));
    const gets = (): number => storageStats().requests.get('GetObject') ?? 0;
    /** Rows of a read of k and v with the filter k = 12345 (pruning row groups with `prune`), the bytes and GETs it took, and the rows of the copy read without the filter. */
    const read = async (prune: boolean): Promise<{ rows: unknown[][]; copied: bigint; fetched: number; requests: number }> => {
      const plan = await (await new IcebergFormat().open(warehouse).loadTable({ database: DB, table })).planRead();
      try {
        const [bytes, requests] = [storageStats().cacheFetchedBytes, gets()];
        const filter = prune ? lakePartFilter(duck, plan.columns, [{ column: 'k', op: '=', literals: ['12345'] }]) : undefined;
        const sql = await plan.rowsSql(plan.splits, ['k', 'v'], filter);
        const fetched = storageStats().cacheFetchedBytes - bytes;
        const requestsMade = gets() - requests;
        const rows = (await duck.run(`SELECT k, v FROM (${sql}) WHERE k = 12345`)).rows;
        const copied = (await duck.run(`SELECT count(*) FROM (${sql})`)).rows[0][0] as bigint;
        return { rows, copied, fetched, requests: requestsMade };
      } finally {
        plan.release();
      }
    };
    try {
      configureObjectStorage(new Options('server', server.options), fresh);
      const pruned = await read(true);
      const warm = await read(true);
      configureObjectStorage(new Options('server', server.options), fresh);
      const whole = await read(false);
      assert.equal(whole.copied, BigInt(n));
      assert.deepEqual(pruned.rows, whole.rows);
      assert.equal(pruned.rows.length, 1);
      assert.equal(pruned.copied, 2000n, 'one row group of ten copied');
      assert.ok(pruned.fetched < data.fileSizeInBytes / 5, `fetched ${pruned.fetched} of ${data.fileSizeInBytes} bytes`);
      assert.deepEqual([warm.rows, warm.fetched, warm.requests], [whole.rows, 0, 0], 'a warm read sends no request');

      // A position delete of the data file: its positions count over every row group, so all stay.
      const deletes = await put('events-deletes', FileContent.POSITION_DELETES, POSITION_DELETE_SCHEMA, batchOf(POSITION_DELETE_SCHEMA, [[data.filePath, data.filePath], [3n, 12_346n]]));
      await commitRowDelta(catalog, DB, table, { dataFiles: [], deleteFiles: [deletes] });
      configureObjectStorage(new Options('server', server.options), fresh);
      const deleted = await read(true);
      assert.deepEqual(deleted.rows, whole.rows);
      assert.equal(deleted.copied, BigInt(n - 2), 'every row group copied, two rows deleted');
    } finally {
      fs.rmSync(fresh, { recursive: true, force: true });
    }
  });
});
