/**
 * ALTER TABLE ... ADD COLUMN end to end on a real server (fluss.md §2.7): rows written before the
 * change, rows from writers made after it and rows from writers made before it (still writing the
 * old schema id) all read back through LogScanner, BatchScanner, Lookuper and SQL, the added column
 * NULL where a row was written without it; again after a kill -9. For a lake-enabled table the
 * Iceberg schema gains the column before the system columns, and `t$lake` shows old rows with NULL
 * and new rows with values once tiered.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { TributaryError } from '../src/client/index.js';
import type { ScanRecord } from '../src/client/index.js';
import type { Table } from '../src/client/table.js';
import type { Row } from '../src/common/values.js';
import { FileSystemCatalog } from '../src/lake/iceberg/catalog.js';
import { currentSchema } from '../src/lake/iceberg/table-metadata.js';
import { useCluster } from './support/cluster.js';

const DB = 'evolve';
const EVENTS = { database: DB, table: 'events' };
const USERS = { database: DB, table: 'users' };
/** Tiering rounds are seconds apart; a slow machine may need many of them. */
const CATCH_UP_MS = 120_000;

const cluster = useCluster({ client: { 'client.writer.batch-timeout': '2ms' }, sql: DB });

const byId = (a: Row, b: Row): number => (a.id! < b.id! ? -1 : a.id! > b.id! ? 1 : 0);

/** Every record of a table's log, from the earliest offset of each bucket. */
async function logRecords(table: Table, expected: number, project?: string[]): Promise<ScanRecord[]> {
  const scan = table.newScan();
  if (project) scan.project(project);
  const scanner = scan.createLogScanner();
  for (let b = 0; b < table.info.bucketCount; b++) await scanner.subscribe(b, 'earliest');
  const out: ScanRecord[] = [];
  for (let i = 0; i < 100 && out.length < expected; i++) out.push(...(await scanner.poll(200)));
  scanner.close();
  assert.equal(out.length, expected, 'records read');
  return out;
}

async function rowsOf(statement: string): Promise<unknown[][]> {
  const out = await cluster.sql.execute(statement);
  assert.ok(out.result, `${statement}: returns rows`);
  return out.result.rows;
}

/** What every reader must see of the two tables once both writers wrote (see the test). */
async function assertReadsAfterAddColumn(): Promise<void> {
  const events = await cluster.conn.getTable(EVENTS);
  const users = await cluster.conn.getTable(USERS);
  assert.equal(events.info.schemaId, 1);
  assert.equal(users.info.schemaId, 1);

  // Log table: old rows and the old writer's rows have no tag.
  const expectedEvents = [
    { id: 1n, name: 'a', tag: null },
    { id: 2n, name: 'b', tag: null },
    { id: 3n, name: 'c', tag: 't3' },
    { id: 4n, name: 'd', tag: null },
    { id: 5n, name: null, tag: 't5' },
  ];
  assert.deepEqual((await logRecords(events, 5)).map((r) => r.row).sort(byId), expectedEvents);
  // Server-side projection names columns of the current schema; older batches hold only some of them.
  assert.deepEqual(
    (await logRecords(events, 5, ['tag', 'id'])).map((r) => r.row).sort(byId),
    expectedEvents.map((r) => ({ tag: r.tag, id: r.id })),
  );
  assert.deepEqual((await logRecords(events, 5, ['tag'])).map((r) => r.row.tag).sort(), [null, null, null, 't3', 't5']);
  assert.deepEqual(await rowsOf('SELECT id, name, tag FROM events ORDER BY id'), expectedEvents.map((r) => [r.id, r.name, r.tag]));
  assert.deepEqual(await rowsOf('SELECT count(*), count(tag) FROM events'), [[5n, 2n]]);

  // Primary-key table: stored values of the old schema, the old writer's full rows (level null)
  // and partial updates (level kept).
  const expectedUsers = [
    { id: 1n, name: 'ann', score: 11, level: 7, note: 'n1' },
    { id: 2n, name: 'bob', score: 20, level: null, note: null },
    { id: 3n, name: 'cy', score: 30, level: 3, note: null },
    { id: 4n, name: 'dee', score: 40, level: null, note: null },
    { id: 5n, name: 'eve', score: 52, level: 5, note: 'n5' },
  ];
  assert.deepEqual((await users.newScan().createBatchScanner().readAll()).sort(byId), expectedUsers);
  assert.deepEqual(
    (await users.newScan().project(['level', 'id']).createBatchScanner().readAll()).sort(byId),
    expectedUsers.map((r) => ({ level: r.level, id: r.id })),
  );
  const lookuper = users.newLookup().createLookuper();
  for (const row of expectedUsers) assert.deepEqual(await lookuper.lookup({ id: row.id }), row);
  assert.deepEqual(
    await rowsOf('SELECT id, name, score, level, note FROM users ORDER BY id'),
    expectedUsers.map((r) => [r.id, r.name, r.score, r.level, r.note]),
  );
  assert.deepEqual(await rowsOf('SELECT level FROM users WHERE id = 2'), [[null]]);
  // The changelog: each change in the schema of the reader, whatever schema it was written with.
  const changes = (await logRecords(users, 17)).filter((r) => r.row.id === 1n).map((r) => `${r.changeType} ${r.row.score} ${r.row.level}`);
  assert.deepEqual(changes, ['+I 10 null', '-U 10 null', '+U 10 7', '-U 10 7', '+U 11 7']);
}

describe('ADD COLUMN', () => {
  test('log and primary-key tables: old rows, new writers and old writers, read every way, also after kill -9', { timeout: 180_000 }, async () => {
    const admin = cluster.conn.getAdmin();
    await admin.createTable(EVENTS, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], properties: { 'bucket.num': '2' } });
    await cluster.sql.execute("CREATE TABLE users (id BIGINT PRIMARY KEY NOT ENFORCED, name STRING, score INT) WITH ('bucket.num' = '2')");
    const eventsBefore = await cluster.conn.getTable(EVENTS);
    const usersBefore = await cluster.conn.getTable(USERS);
    const append = await eventsBefore.newAppend().createWriter();
    await append.append({ id: 1n, name: 'a' });
    await append.append({ id: 2n, name: 'b' });
    await append.flush();
    const upsert = await usersBefore.newUpsert().createWriter();
    await upsert.upsert({ id: 1n, name: 'ann', score: 10 });
    await upsert.upsert({ id: 2n, name: 'bob', score: 20 });
    await upsert.upsert({ id: 5n, name: 'eve', score: 50 });
    await upsert.flush();
    const partial = await usersBefore.newUpsert().partialUpdate(['id', 'score']).createWriter();

    await admin.alterTable(EVENTS, { addColumns: [{ name: 'tag', type: 'STRING', comment: 'added later' }] });
    const altered = await cluster.sql.execute("ALTER TABLE users ADD COLUMN level INT COMMENT 'lvl', ADD note STRING");
    assert.match(altered.message!, /2 column\(s\) added/);
    for (const [statement, name] of [
      ['ALTER TABLE users ADD COLUMN rank INT NOT NULL', 'INVALID_ALTER_TABLE_EXCEPTION'],
      ['ALTER TABLE users ADD COLUMN id2 BIGINT PRIMARY KEY NOT ENFORCED', 'INVALID_ALTER_TABLE_EXCEPTION'],
      ['ALTER TABLE users ADD COLUMN Name STRING', 'DUPLICATE_COLUMN'],
      ['ALTER TABLE users ADD COLUMN __bucket INT', 'INVALID_ALTER_TABLE_EXCEPTION'],
    ]) {
      await assert.rejects(cluster.sql.execute(statement), (e: unknown) => e instanceof TributaryError && e.errorName === name, statement);
    }
    assert.deepEqual(
      (await rowsOf('DESCRIBE users')).map((r) => r.slice(0, 3).concat(r[4])),
      [['id', 'BIGINT', 'NO', ''], ['name', 'STRING', 'YES', ''], ['score', 'INT', 'YES', ''], ['level', 'INT', 'YES', 'lvl'], ['note', 'STRING', 'YES', '']],
    );
    assert.match(String((await rowsOf('SHOW CREATE TABLE events'))[0][0]), /`name` STRING,\n {2}`tag` STRING COMMENT 'added later'\n\)/);
    assert.equal((await admin.getTableSchema(EVENTS, 0)).schema.columns.length, 2, 'schema 0 stays as it was');

    // Writers made now write the new schema.
    const events = await cluster.conn.getTable(EVENTS);
    const users = await cluster.conn.getTable(USERS);
    const newAppend = await events.newAppend().createWriter();
    await newAppend.append({ id: 3n, name: 'c', tag: 't3' });
    await newAppend.append({ id: 5n, name: null, tag: 't5' });
    await newAppend.flush();
    const newUpsert = await users.newUpsert().createWriter();
    await newUpsert.upsert({ id: 1n, name: 'ann', score: 10, level: 7, note: 'n1' });
    await newUpsert.upsert({ id: 2n, name: 'bob', score: 20, level: 9 });
    await newUpsert.upsert({ id: 3n, name: 'cy', score: 30, level: 3 });
    await newUpsert.upsert({ id: 5n, name: 'eve', score: 50, level: 5, note: 'n5' });
    await newUpsert.flush();
    assert.equal((await users.newLookup().createLookuper().lookup({ id: 2n }))?.level, 9);
    // Writers made before go on with schema 0: the server takes their batches.
    await append.append({ id: 4n, name: 'd' });
    await append.flush();
    await upsert.upsert({ id: 2n, name: 'bob', score: 20 }); // a full row: level and note become null
    await upsert.upsert({ id: 4n, name: 'dee', score: 40 });
    await upsert.flush();
    await partial.upsert({ id: 1n, score: 11 }); // a partial update: level and note are kept
    await partial.upsert({ id: 5n, score: 52 });
    await partial.flush();
    // A lookuper made before the change keeps its schema; a log scanner made before (without a
    // projection) takes on the new one when it meets rows written with it, so no value is dropped.
    assert.deepEqual(await usersBefore.newLookup().createLookuper().lookup({ id: 1n }), { id: 1n, name: 'ann', score: 11 });
    assert.deepEqual((await logRecords(eventsBefore, 5)).map((r) => r.row).sort(byId).map((r) => r.tag), [null, null, 't3', null, 't5']);
    assert.deepEqual((await logRecords(eventsBefore, 5, ['id', 'name'])).map((r) => Object.keys(r.row)), Array(5).fill(['id', 'name']));
    for (const w of [append, upsert, partial, newAppend, newUpsert]) await w.close();

    await assertReadsAfterAddColumn();

    // A crash: logs, KV state (replayed from changelogs of both schemas) and metadata come back.
    await cluster.server.kill();
    await cluster.restart();
    await assertReadsAfterAddColumn();
  });

  test('a lake-enabled table: the Iceberg schema gains the column before the system columns, and t$lake shows it', { timeout: CATCH_UP_MS * 3 }, async () => {
    const lake = "'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '1s'";
    await cluster.sql.execute(`CREATE TABLE lk (id BIGINT, name STRING) WITH ('bucket.num' = '2', ${lake})`);
    await cluster.sql.execute(`CREATE TABLE lkpk (id BIGINT PRIMARY KEY NOT ENFORCED, name STRING) WITH ('bucket.num' = '2', ${lake})`);
    await cluster.sql.execute("INSERT INTO lk VALUES (1, 'a'), (2, 'b')");
    await cluster.sql.execute("INSERT INTO lkpk VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    // Old rows reach the lake before the change, so older Parquet files lack the column.
    await caughtUp('lk');
    await caughtUp('lkpk');
    const oldWriter = await (await cluster.conn.getTable({ database: DB, table: 'lk' })).newAppend().createWriter();

    await cluster.sql.execute("ALTER TABLE lk ADD COLUMN tag STRING COMMENT 'added'");
    await cluster.sql.execute('ALTER TABLE lkpk ADD COLUMN tag STRING');
    const { warehouse } = await cluster.conn.getAdmin().getLakeTieringStatus({ database: DB, table: 'lk' });
    for (const table of ['lk', 'lkpk']) {
      const metadata = (await new FileSystemCatalog(warehouse).loadTable(DB, table)).metadata;
      assert.deepEqual(
        currentSchema(metadata).fields.map((f) => [f.name, f.required]),
        [['id', table === 'lkpk'], ['name', false], ['tag', false], ['__bucket', true], ['__offset', true], ['__timestamp', true]],
        table,
      );
    }

    await cluster.sql.execute("INSERT INTO lk VALUES (3, 'c', 't3')");
    await oldWriter.append({ id: 4n, name: 'd' });
    await oldWriter.flush();
    await oldWriter.close();
    // An update of an old key, an old key left alone and a new key.
    await cluster.sql.execute("INSERT INTO lkpk VALUES (2, 'b2', 't2'), (4, 'd', 't4')");
    await caughtUp('lk');
    await caughtUp('lkpk');
    assert.deepEqual(await rowsOf('SELECT id, name, tag FROM "lk$lake" ORDER BY id'), [
      [1n, 'a', null],
      [2n, 'b', null],
      [3n, 'c', 't3'],
      [4n, 'd', null],
    ]);
    assert.deepEqual(await rowsOf('SELECT id, name, tag FROM lkpk$lake ORDER BY id'), [
      [1n, 'a', null],
      [2n, 'b2', 't2'],
      [3n, 'c', null],
      [4n, 'd', 't4'],
    ]);
  });
});

/** Waits until the lake holds every record below each bucket's high watermark. */
async function caughtUp(table: string): Promise<void> {
  const deadline = Date.now() + CATCH_UP_MS;
  for (;;) {
    const status = await cluster.conn.getAdmin().getLakeTieringStatus({ database: DB, table });
    if (status.snapshotId !== undefined && status.buckets.every((b) => b.recordsBehind === 0n)) return;
    if (Date.now() > deadline) assert.fail(`tiering of ${table} did not catch up: ${JSON.stringify(status, (_, v) => (typeof v === 'bigint' ? String(v) : v))}\n${cluster.server.stderr}`);
    await sleep(200);
  }
}
