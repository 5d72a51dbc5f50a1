/**
 * Dropping lake-enabled tables on a real server: a plain DROP TABLE keeps the lake table, which then
 * blocks a lake-enabled table of the same name; SHOW LAKE TABLES lists it as not owned and DROP LAKE
 * TABLE removes it. DROP TABLE … PURGE deletes the lake table with the table (its directory, gone
 * from the Iceberg REST catalog too), so the same name tiers into a fresh lake table; it never
 * deletes the lake table of a namesake.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { TributaryError } from '../src/client/index.js';
import { useCluster } from './support/cluster.js';

const DB = 'purge';
/** Tiering rounds are seconds apart; a slow machine may need many of them. */
const CATCH_UP_MS = 120_000;
const LAKE = "'bucket.num' = '1', 'table.datalake.enabled' = 'true', 'table.datalake.freshness' = '1s'";

const cluster = useCluster({ sql: DB });

async function rowsOf(statement: string): Promise<unknown[][]> {
  const out = await cluster.sql.execute(statement);
  assert.ok(out.result, `${statement}: returns rows`);
  return out.result.rows;
}

const failsWith = (name: string, fragment?: RegExp) => (e: unknown) => e instanceof TributaryError && e.errorName === name && (!fragment || fragment.test(e.message));

/** Waits until the lake holds every record below each bucket's high watermark. */
async function caughtUp(table: string): Promise<void> {
  const deadline = Date.now() + CATCH_UP_MS;
  for (;;) {
    const status = await cluster.conn.getAdmin().getLakeTieringStatus({ database: DB, table });
    if (status.snapshotId !== undefined && status.buckets.every((b) => b.recordsBehind === 0n)) return;
    if (Date.now() > deadline) assert.fail(`tiering of ${table} did not catch up\n${cluster.server.stderr}`);
    await sleep(200);
  }
}

/** SHOW LAKE TABLES of this test's database: [table, table_id, owned]. */
async function lakeTables(): Promise<unknown[][]> {
  return (await rowsOf('SHOW LAKE TABLES')).filter((r) => r[0] === DB).map((r) => [r[1], r[2], r[3]]);
}

async function restCatalogTables(): Promise<string[]> {
  const resp = await fetch(`http://${cluster.server.http}/iceberg/v1/namespaces/${DB}/tables`);
  assert.equal(resp.status, 200);
  return ((await resp.json()) as { identifiers: { name: string }[] }).identifiers.map((i) => i.name);
}

async function tableId(table: string): Promise<bigint> {
  return BigInt((await cluster.conn.getAdmin().getTableInfo({ database: DB, table })).tableId);
}

test('a plain drop leaves the lake table, listed as not owned and dropped with DROP LAKE TABLE; PURGE drops it with the table', { timeout: CATCH_UP_MS * 4 }, async () => {
  await cluster.sql.execute(`CREATE TABLE events (id BIGINT, name STRING) WITH (${LAKE})`);
  await cluster.sql.execute("INSERT INTO events VALUES (1, 'a'), (2, 'b')");
  await caughtUp('events');
  const firstId = await tableId('events');
  const { warehouse } = await cluster.conn.getAdmin().getLakeTieringStatus({ database: DB, table: 'events' });
  const location = path.join(warehouse, DB, 'events');
  assert.deepEqual(await lakeTables(), [['events', firstId, true]]);

  // A plain drop keeps the lake table: the name is blocked for a lake-enabled table, and the error says the way out.
  await cluster.sql.execute('DROP TABLE events');
  assert.ok(fs.existsSync(path.join(location, 'metadata')), 'the lake table stays');
  await assert.rejects(cluster.sql.execute(`CREATE TABLE events (id BIGINT, name STRING) WITH (${LAKE})`), failsWith('LAKE_TABLE_ALREADY_EXIST', /DROP LAKE TABLE purge\.events/));
  assert.deepEqual(await lakeTables(), [['events', firstId, false]]);
  assert.deepEqual(await restCatalogTables(), []);

  // A table of the same name that is not lake-enabled can be made; its PURGE leaves the namesake's lake table alone.
  await cluster.sql.execute('CREATE TABLE events (id BIGINT)');
  await cluster.sql.execute('DROP TABLE events PURGE');
  assert.deepEqual(await lakeTables(), [['events', firstId, false]]);

  await cluster.sql.execute('DROP LAKE TABLE events');
  assert.equal(fs.existsSync(location), false, "the lake table's directory is gone");
  assert.ok(fs.existsSync(path.join(warehouse, DB)), 'nothing above it is touched');
  assert.deepEqual(await lakeTables(), []);
  await assert.rejects(cluster.sql.execute('DROP LAKE TABLE events'), failsWith('LAKE_TABLE_NOT_EXIST'));
  await cluster.sql.execute('DROP LAKE TABLE IF EXISTS events');

  // The name is free again; a lake table a live table owns cannot be dropped on its own.
  await cluster.sql.execute(`CREATE TABLE events (id BIGINT, name STRING) WITH (${LAKE})`);
  await cluster.sql.execute("INSERT INTO events VALUES (3, 'c')");
  await caughtUp('events');
  const secondId = await tableId('events');
  assert.deepEqual(await lakeTables(), [['events', secondId, true]]);
  assert.deepEqual(await restCatalogTables(), ['events']);
  await assert.rejects(cluster.sql.execute('DROP LAKE TABLE events'), failsWith('LAKE_TABLE_IN_USE', /PURGE/));
  assert.deepEqual(await rowsOf('SELECT id FROM "events$lake" ORDER BY id'), [[3n]]);

  // PURGE: the lake table goes with the table, and the same name tiers into a fresh lake table.
  const out = await cluster.sql.execute('DROP TABLE events PURGE');
  assert.match(out.message!, /dropped, with its lake table/);
  assert.equal(fs.existsSync(location), false, "the lake table's directory is gone");
  assert.deepEqual(await lakeTables(), []);
  assert.equal((await fetch(`http://${cluster.server.http}/iceberg/v1/namespaces/${DB}/tables/events`, { method: 'HEAD' })).status, 404);
  await cluster.sql.execute(`CREATE TABLE events (id BIGINT, name STRING) WITH (${LAKE})`);
  await cluster.sql.execute("INSERT INTO events VALUES (4, 'd')");
  await caughtUp('events');
  assert.deepEqual(await rowsOf('SELECT id, name FROM "events$lake" ORDER BY id'), [[4n, 'd']]);
  assert.deepEqual(await lakeTables(), [['events', await tableId('events'), true]]);
  assert.deepEqual(await restCatalogTables(), ['events']);
});

test('the client Admin: dropTable with purge, listLakeTables and dropLakeTable', { timeout: CATCH_UP_MS * 2 }, async () => {
  const admin = cluster.conn.getAdmin();
  const orders = { database: DB, table: 'orders' };
  await cluster.sql.execute(`CREATE TABLE orders (id BIGINT) WITH (${LAKE})`);
  await cluster.sql.execute('INSERT INTO orders VALUES (1)');
  await caughtUp('orders');
  await admin.dropTable(orders);
  const left = (await admin.listLakeTables()).tables.find((t) => t.path.database === DB && t.path.table === 'orders');
  assert.equal(left?.owned, false);
  await admin.dropLakeTable(orders);
  await cluster.sql.execute(`CREATE TABLE orders (id BIGINT) WITH (${LAKE})`);
  await admin.dropTable(orders, { purge: true });
  assert.equal((await admin.listLakeTables()).tables.some((t) => t.path.database === DB && t.path.table === 'orders'), false);
});
