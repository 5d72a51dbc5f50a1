/**
 * What only an S3 warehouse has to prove, on a real S3-protocol server (s3rver on loopback): two
 * writer processes committing to the same lake table at once never lose a commit (the create-only
 * compare-and-set of the next metadata version, retried on the new one); and with the S3 server
 * stopped for a while, writes to the hot log go on, tiering fails and backs off, and once S3 is
 * back it resumes and the lake holds every row exactly once. And SQL sessions share the lake
 * tables they load: a new session asks S3 only whether there is a newer version (a union read of
 * the snapshot the version known holds, nothing), sees every commit, the tiering's and another
 * writer's, and a closed one holds no lake file in the cache. And a query of few columns fetches
 * only those columns' byte ranges of the lake's Parquet files, and a selective query of a compacted
 * file of several row groups only the row groups that may hold its rows, with the rows a read of
 * everything holds (a key in the last row group, one in none, a range across two).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import path from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { TablePath } from '../src/client/index.js';
import { lakeFormat } from '../src/lake/formats/index.js';
import { FileSystemCatalog } from '../src/lake/iceberg/catalog.js';
import { newTableMetadata } from '../src/lake/iceberg/table-metadata.js';
import type { IcebergSchema } from '../src/lake/iceberg/types.js';
import { readParquetFooter } from '../src/lake/parquet/projection.js';
import { rowGroupStatistics } from '../src/lake/parquet/statistics.js';
import { startS3Server } from '../src/storage/fixtures/s3-server.js';
import { SqlExecutor } from '../src/query/executor.js';
import { storageStats } from '../src/storage/storage-stats.js';
import { configureObjectStorageFrom, objectStoreFor, remoteFileCache } from '../src/storage/stores.js';
import { startCluster } from './support/cluster.js';
import type { LakeCommitJob } from './support/lake-commit-child.js';
import { readLakeTable } from './support/lake-content.js';
import { testTempDir } from '../src/common/fixtures/temp-dirs.js';
import { waitTiered } from './support/tiering-rounds.js';

const CHILD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'support', 'lake-commit-child.ts');

function runWriter(job: LakeCommitJob): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, JSON.stringify(job)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

test('two writer processes committing to one lake table on S3 at once: every commit lands', async (t) => {
  const s3 = await startS3Server();
  t.after(() => s3.stop());
  configureObjectStorageFrom(s3.options, testTempDir('lake-cache'));
  const warehouse = s3.location('warehouse');
  const catalog = new FileSystemCatalog(warehouse);
  const schema: IcebergSchema = {
    type: 'struct',
    'schema-id': 0,
    fields: [
      { id: 1, name: 'k', required: true, type: 'long' },
      { id: 2, name: 'writer', required: true, type: 'string' },
      { id: 3, name: '__bucket', required: true, type: 'int' },
    ],
  };
  const spec = { 'spec-id': 0, fields: [{ 'source-id': 3, 'field-id': 1000, name: '__bucket', transform: 'identity' }] };
  // Retries enough for every lost race of two writers committing back to back.
  const properties = { 'commit.retry.num-retries': '100', 'commit.retry.min-wait-ms': '5', 'commit.retry.max-wait-ms': '200' };
  await catalog.createTable('db', 'shared', newTableMetadata({ location: catalog.tableLocation('db', 'shared'), schema, spec, sortOrder: { 'order-id': 0, fields: [] }, properties }));

  const COMMITS = 12;
  const job = (writer: string, firstKey: number): LakeCommitJob => ({ warehouse, s3: s3.options, database: 'db', table: 'shared', schema, writer, commits: COMMITS, firstKey });
  const results = await Promise.all([runWriter(job('a', 0)), runWriter(job('b', 1000))]);
  for (const r of results) assert.equal(r.code, 0, r.stderr);

  const lake = await readLakeTable(warehouse, 'db', 'shared');
  assert.equal(lake.metadata.snapshots.length, 2 * COMMITS, 'one snapshot per commit');
  const keys = (writer: string, first: number): [string, bigint][] => Array.from({ length: COMMITS }, (_, i) => [writer, BigInt(first + i)]);
  assert.deepEqual(
    lake.rows.map((r) => [r.writer as string, r.k as bigint]).sort((x, y) => (x[1] < y[1] ? -1 : 1)),
    [...keys('a', 0), ...keys('b', 1000)],
    'the rows of every commit of both writers',
  );
});

test('the S3 server stopped for a while: hot writes go on, tiering backs off and resumes, nothing is lost', async (t) => {
  const cluster = await startCluster(t, { objectStorage: { warehouse: true }, client: { 'client.writer.batch-timeout': '2ms' }, sql: 'tributary' });
  const { conn } = cluster;
  const events: TablePath = { database: 'tributary', table: 'events' };
  await conn.getAdmin().createTable(events, {
    columns: [{ name: 'id', type: 'BIGINT' }, { name: 'note', type: 'STRING' }],
    properties: { 'bucket.num': '2', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '300ms' },
  });
  const write = async (from: number, to: number): Promise<void> => {
    const writer = await (await conn.getTable(events)).newAppend().createWriter();
    for (let id = from; id < to; id++) await writer.append({ id: BigInt(id), note: `n${id}` });
    await writer.close();
  };
  await write(0, 200);
  await waitTiered(conn, events);

  await cluster.s3.pause();
  // Writes to the hot log do not wait for the lake.
  await write(200, 400);
  const failures = async (): Promise<number> => {
    const text = await (await fetch(`http://${cluster.server.http}/metrics`)).text();
    return Number(/^tributary_lake_tiering_failures\{[^}]*table="events"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
  };
  for (let i = 0; (await failures()) === 0; i++) {
    assert.ok(i < 600, 'a tiering round fails while S3 is down');
    await sleep(200);
  }
  await write(400, 500);
  await cluster.s3.resume();

  await waitTiered(conn, events, 120_000);
  const lake = await readLakeTable(cluster.warehouse, events.database, events.table);
  assert.deepEqual(
    lake.rows.map((r) => Number(r.id)).sort((a, b) => a - b),
    Array.from({ length: 500 }, (_, i) => i),
    'every row once',
  );

  // Where the table's bytes are: the log on the local disk, no remote log, the lake's files per bucket.
  const storage = (await cluster.sql.execute('SHOW TABLE STORAGE events')).result!;
  assert.deepEqual(storage.columns.map((c) => c.name), ['partition', 'bucket', 'local_bytes', 'local_segments', 'remote_bytes', 'remote_segments', 'lake_bytes', 'lake_files']);
  const metrics = await (await fetch(`http://${cluster.server.http}/metrics`)).text();
  const files = (await cluster.sql.execute('SELECT file_size_in_bytes, partition FROM events$lake$files')).result!.rows;
  for (const [partition, bucket, localBytes, localSegments, remoteBytes, remoteSegments, lakeBytes, lakeFiles] of storage.rows) {
    assert.equal(partition, null);
    const sample = new RegExp(`^tributary_log_size_bytes\\{[^}]*table="events"[^}]*bucket="${String(bucket)}"[^}]*\\} (\\d+)`, 'm').exec(metrics);
    assert.equal(localBytes, BigInt(sample![1]), 'the bytes the metrics show');
    assert.ok((localSegments as bigint) >= 1n);
    assert.deepEqual([remoteBytes, remoteSegments], [null, null]);
    const mine = files.filter((f) => (JSON.parse(f[1] as string) as { __bucket: number }).__bucket === bucket);
    // What the lake's file listing names for the bucket, whatever rounds wrote it.
    if (mine.length === 0) assert.ok(lakeFiles === null || lakeFiles === 0n, `bucket ${String(bucket)}: no lake file listed, yet ${String(lakeFiles)} counted`);
    else assert.deepEqual([lakeBytes, lakeFiles], [mine.reduce((n, f) => n + (f[0] as bigint), 0n), BigInt(mine.length)]);
  }
  assert.equal(storage.rows.length, 2);
  assert.ok(files.length > 0, 'the lake holds files');
});

test('SQL sessions share the lake tables they load: a new one asks S3 at most for the next version, sees each new commit, and lets its files go when closed', async (t) => {
  // The test before left the lake table of a table of the same id and name, on a warehouse of the
  // same name (another S3 server's), in this process: it must not be taken for this one's.
  // A lake file cache of one byte keeps no file that no session holds.
  const cluster = await startCluster(t, { objectStorage: { warehouse: true }, client: { 'client.writer.batch-timeout': '2ms', 'datalake.cache.max-size': '1b' }, sql: 'tributary' });
  const { conn } = cluster;
  const events: TablePath = { database: 'tributary', table: 'events' };
  await conn.getAdmin().createTable(events, {
    columns: [{ name: 'id', type: 'BIGINT' }],
    properties: { 'bucket.num': '1', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '300ms' },
  });
  const write = async (from: number, to: number): Promise<void> => {
    const writer = await (await conn.getTable(events)).newAppend().createWriter();
    for (let id = from; id < to; id++) await writer.append({ id: BigInt(id) });
    await writer.close();
  };
  const session = (): SqlExecutor => new SqlExecutor(conn, cluster.duck, events.database);
  const rows = async (sql: SqlExecutor, query: string): Promise<unknown[][]> => (await sql.execute(query)).result!.rows;
  // Each query in a session of its own, as the REST API runs them.
  const query = async (text: string): Promise<unknown[][]> => {
    const sql = session();
    try {
      return await rows(sql, text);
    } finally {
      await sql.close();
    }
  };
  const LAKE_ROWS = 'SELECT count(*) FROM events$lake';
  const ALL_ROWS = 'SELECT count(*) FROM events';
  const asked = (since: ReadonlyMap<string, number>): [string, number][] => [...storageStats().requests].map(([op, n]): [string, number] => [op, n - (since.get(op) ?? 0)]).filter(([, n]) => n !== 0);
  await write(0, 100);
  await waitTiered(conn, events);
  const first = session();
  assert.deepEqual(await rows(first, LAKE_ROWS), [[100n]]);

  const second = session();
  let before = new Map(storageStats().requests);
  assert.deepEqual(await rows(second, LAKE_ROWS), [[100n]]);
  assert.deepEqual(asked(before), [['HeadObject', 1]], 'one probe for the next version: no version hint, metadata file, manifest or data file read again');
  // A union read reads the registered snapshot, which the version known holds: it asks S3 nothing.
  before = new Map(storageStats().requests);
  assert.deepEqual(await rows(second, ALL_ROWS), [[100n]]);
  assert.deepEqual(asked(before), []);

  // The sessions' planned reads hold the table's data file in the cache, over its size, until both are closed.
  assert.ok(remoteFileCache().size > 0);
  await first.close();
  assert.ok(remoteFileCache().size > 0, 'still held by the second session');
  await second.close();
  assert.equal(remoteFileCache().size, 0, 'evicted once no session holds it');

  // A commit of the tiering: the union read plans its snapshot, which only the new version holds.
  await write(100, 150);
  await waitTiered(conn, events);
  assert.deepEqual(await query(ALL_ROWS), [[150n]]);
  assert.deepEqual(await query(LAKE_ROWS), [[150n]]);

  // A commit of another writer: snapshot expiry by lake maintenance.
  const SNAPSHOTS = 'SELECT count(*) FROM events$lake$snapshots';
  const [[snapshots]] = await query(SNAPSHOTS);
  assert.ok((snapshots as bigint) > 1n, 'a snapshot per tiering round');
  const expired = await lakeFormat('iceberg').open(cluster.warehouse).expireSnapshots(events, { olderThanMs: Date.now() + 1, retainLast: 1 });
  assert.equal(BigInt(expired.expiredSnapshotIds.length), (snapshots as bigint) - 1n);
  assert.deepEqual(await query(SNAPSHOTS), [[1n]]);
  assert.deepEqual(await query(LAKE_ROWS), [[150n]]);
  assert.equal(remoteFileCache().size, 0);
});

test('a query of few columns of a lake on S3 fetches only those columns of its Parquet files, and reads the same rows as one of every column', async (t) => {
  const cluster = await startCluster(t, { objectStorage: { warehouse: true }, client: { 'client.writer.batch-timeout': '2ms' }, sql: 'tributary' });
  const { conn } = cluster;
  const wide: TablePath = { database: 'tributary', table: 'wide' };
  await conn.getAdmin().createTable(wide, {
    columns: [{ name: 'id', type: 'BIGINT' }, { name: 'payload', type: 'STRING' }, { name: 'other', type: 'STRING' }],
    properties: { 'bucket.num': '1', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '300ms' },
  });
  const ROWS = 3000;
  // Strings that do not compress, so the data file is mostly their columns.
  const noise = (i: number, salt: string): string => crypto.createHash('sha512').update(`${salt}${i}`).digest('hex');
  const writer = await (await conn.getTable(wide)).newAppend().createWriter();
  for (let id = 0; id < ROWS; id++) await writer.append({ id: BigInt(id), payload: noise(id, 'p'), other: noise(id, 'o') });
  await writer.close();
  await waitTiered(conn, wide);

  const fetched = (): number => storageStats().cacheFetchedBytes;
  const lakeBytes = (await cluster.sql.execute('SELECT sum(file_size_in_bytes) FROM wide$lake$files')).result!.rows[0][0] as bigint;
  let before = fetched();
  const ids = (await cluster.sql.execute('SELECT id FROM wide ORDER BY id')).result!.rows;
  const idBytes = fetched() - before;
  assert.deepEqual(ids, Array.from({ length: ROWS }, (_, i) => [BigInt(i)]));
  assert.ok(idBytes > 0 && idBytes * 4 < Number(lakeBytes), `the id column alone: fetched ${idBytes} of ${lakeBytes} bytes`);

  before = fetched();
  const all = (await cluster.sql.execute('SELECT id, payload, other FROM wide ORDER BY id')).result!.rows;
  assert.ok(fetched() - before >= Number(lakeBytes), 'every column: the whole files');
  assert.deepEqual(all.map((r) => [r[0]]), ids);
  assert.deepEqual(all[7], [7n, noise(7, 'p'), noise(7, 'o')]);
  // Two columns of three, and the whole files in the cache serve it: nothing is fetched.
  before = fetched();
  const two = (await cluster.sql.execute("SELECT id, payload FROM wide WHERE id % 1000 = 7 ORDER BY id")).result!.rows;
  assert.deepEqual(two, [7, 1007, 2007].map((i) => [BigInt(i), noise(i, 'p')]));
  assert.equal(fetched() - before, 0);
});

test('a selective query of a compacted lake file of several row groups on S3 fetches only the row groups it may need, and reads the rows a read of everything holds', async (t) => {
  // Tiering by a worker process of its own: its copies of the files it writes are not in this
  // process's lake file cache, and once it stops the rows written last stay in the log only.
  const cluster = await startCluster(t, { args: ['--no-tiering'], objectStorage: { warehouse: true }, client: { 'client.writer.batch-timeout': '2ms' }, sql: 'tributary' });
  const { conn } = cluster;
  const tiering = await cluster.startTiering();
  const keyed: TablePath = { database: 'tributary', table: 'keyed' };
  // DuckDB, which compacts, cuts row groups at whole vectors of 2048 rows.
  const GROUP_ROWS = 2048;
  const GROUPS = 10;
  await conn.getAdmin().createTable(keyed, {
    columns: [{ name: 'id', type: 'BIGINT' }, { name: 'note', type: 'STRING' }],
    properties: {
      'bucket.num': '1',
      'table.datalake.enabled': 'true',
      'table.datalake.freshness': '100ms',
      'table.datalake.auto-compaction': 'true',
      'iceberg.write.parquet.row-group-row-limit': String(GROUP_ROWS),
    },
  });
  // Even ids in the order of the log, so that each row group holds a range of them; notes that do not compress.
  const noise = (i: number): string => crypto.createHash('sha512').update(`n${i}`).digest('hex');
  const write = async (from: number, to: number): Promise<void> => {
    const writer = await (await conn.getTable(keyed)).newAppend().createWriter();
    for (let i = from; i < to; i++) await writer.append({ id: BigInt(2 * i), note: noise(i) });
    await writer.close();
  };
  const ROWS = GROUP_ROWS * GROUPS;
  // Two rounds at least: auto-compaction after the last rewrites the bucket's files into one, row
  // groups sorted by __offset. Stopping the worker waits for the round in flight, its compaction included.
  await write(0, ROWS / 2);
  await waitTiered(conn, keyed);
  await write(ROWS / 2, ROWS);
  await waitTiered(conn, keyed);
  assert.equal(await tiering.stop(), 0);
  const files = (await cluster.sql.execute('SELECT file_path, file_size_in_bytes, record_count FROM keyed$lake$files')).result!.rows;
  assert.equal(files.length, 1, 'compacted into one file');
  assert.equal(files[0][2], BigInt(ROWS));
  const [location, size] = [files[0][0] as string, Number(files[0][1])];
  const footer = await readParquetFooter(async (offset, length) => (await objectStoreFor(location).get(location, { offset, length }))!, size);
  assert.deepEqual(rowGroupStatistics(footer!.metadata)?.map((g) => g.rows), Array(GROUPS).fill(GROUP_ROWS), 'the row group row limit of the lake table');

  const fetched = (): number => storageStats().cacheFetchedBytes;
  const selected = async (where: string): Promise<{ rows: unknown[][]; bytes: number }> => {
    const before = fetched();
    const rows = (await cluster.sql.execute(`SELECT id, note FROM keyed WHERE ${where} ORDER BY id`)).result!.rows;
    return { rows, bytes: fetched() - before };
  };
  // Cold, each before the read of everything, which copies the whole file into the cache.
  const last = await selected(`id = ${2 * (ROWS - 5)}`);
  const absent = await selected(`id IN (${2 * 3 * GROUP_ROWS + 1}, ${2 * ROWS})`);
  const across = await selected(`id BETWEEN ${2 * (5 * GROUP_ROWS - 10)} AND ${2 * (5 * GROUP_ROWS + 10)}`);
  let before = fetched();
  const everything = (await cluster.sql.execute('SELECT id, note FROM keyed ORDER BY id')).result!.rows;
  const wholeBytes = fetched() - before;
  assert.equal(everything.length, ROWS);
  assert.ok(wholeBytes >= size, `a read of every row: the whole file, ${wholeBytes} of ${size} bytes`);
  const where = (keep: (id: number) => boolean): unknown[][] => everything.filter((r) => keep(Number(r[0])));
  assert.deepEqual(last.rows, where((id) => id === 2 * (ROWS - 5)), 'a row of the last row group');
  assert.equal(last.rows.length, 1);
  assert.deepEqual(absent.rows, [], 'a key inside a row group\'s range that no row holds, and one past every row group');
  assert.deepEqual(across.rows, where((id) => id >= 2 * (5 * GROUP_ROWS - 10) && id <= 2 * (5 * GROUP_ROWS + 10)), 'a range across two row groups');
  assert.equal(across.rows.length, 21);
  assert.ok(last.bytes > 0 && last.bytes * 4 < wholeBytes, `one row group of ${GROUPS} (and the footer): fetched ${last.bytes} of ${wholeBytes} bytes`);
  assert.ok(absent.bytes > 0 && absent.bytes * 4 < wholeBytes, `the one row group whose range holds the key: fetched ${absent.bytes} of ${wholeBytes} bytes`);
  assert.ok(across.bytes > 0 && across.bytes * 3 < wholeBytes, `two row groups of ${GROUPS}: fetched ${across.bytes} of ${wholeBytes} bytes`);

  // A union read: rows the log holds and the lake not, with the same filter, come too.
  await write(ROWS, ROWS + 3);
  assert.deepEqual(
    (await cluster.sql.execute(`SELECT id, note FROM keyed WHERE id >= ${2 * (ROWS - 2)} ORDER BY id`)).result!.rows,
    [ROWS - 2, ROWS - 1, ROWS, ROWS + 1, ROWS + 2].map((i) => [BigInt(2 * i), noise(i)]),
  );
  assert.deepEqual((await cluster.sql.execute('SELECT count(*) FROM keyed$lake')).result!.rows, [[BigInt(ROWS)]], 'the last rows are in the log only');
});
