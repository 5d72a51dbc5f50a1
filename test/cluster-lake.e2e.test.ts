/**
 * Lake tiering and the coordinator's services on a cluster on ZooKeeper, with real processes: two
 * coordinators, three tablet servers, replication factor 3, small log segments and a quick
 * retention check, without a remote log (remote-log.e2e.test.ts has the remote log of a cluster).
 * - retention of a lake-enabled table deletes, on every replica, the segments the lake holds and
 *   keeps the ones it does not; the union read stays complete;
 * - the coordinator's HTTP API lists the tablet servers and a table's buckets;
 * - the active coordinator killed with kill -9: CREATE TABLE, ALTER TABLE and CREATE PARTITION
 *   succeed through the client without the caller retrying, and tiering goes on to new rows.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import type { Connection } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { useCluster, until } from './support/cluster.js';
import type { ServerProcess } from './support/server-process.js';

const cluster = useCluster({
  zooKeeper: { coordinators: 2, tabletServers: 3 },
  settings: { 'default.replication.factor': '3', 'log.segment.file-size': '4kb', 'log.retention.check-interval': '200ms', 'remote.log.task-interval-duration': '0' },
  sql: 'shop',
});

/** Appends rows with ids [from, from + count) in batches of 50, acknowledged by every in-sync replica. */
async function write(conn: Connection, table: TablePath, from: number, count: number): Promise<void> {
  const writer = await (await conn.getTable(table)).newAppend().createWriter();
  try {
    for (let id = from; id < from + count; id++) {
      // Payloads that compress little, so that the log rolls several segments.
      await writer.append({ id: BigInt(id), payload: `row-${id}-${Math.random().toString(36)}${Math.random().toString(36)}` });
      if ((id + 1) % 50 === 0) await writer.flush();
    }
    await writer.flush();
  } finally {
    await writer.close();
  }
}

/** Waits until the lake holds bucket 0 of `table` up to at least `offset`; returns its lake end offset. */
async function tieredTo(table: TablePath, offset: bigint): Promise<bigint> {
  return until(`the lake holds ${table.table} up to ${offset}`, async () => {
    const status = await cluster.conn.getAdmin().getLakeTieringStatus(table);
    const end = status.buckets.find((b) => b.bucket === 0)?.lakeEndOffset ?? 0n;
    return end >= offset ? end : undefined;
  });
}

/** Base offsets of the log segments of bucket 0 of table `tableId` in a tablet server's data dir. */
function segmentsOn(server: ServerProcess, table: TablePath, tableId: number): bigint[] {
  const dir = path.join(server.dataDir, 'log', table.database, `${table.table}-${tableId}`, 'log-0');
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.log'))
    .map((f) => BigInt(f.slice(0, -'.log'.length)))
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

const lakeTable = (table: string, properties: Record<string, string> = {}) => ({
  columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }],
  properties: { 'bucket.num': '1', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '500ms', ...properties },
});

test('lake-enabled table, RF=3, short TTL: every replica deletes the segments the lake holds and keeps the rest; the union read is complete', async () => {
  const table = { database: 'shop', table: 'retained' };
  const admin = cluster.conn.getAdmin();
  await admin.createTable(table, lakeTable('retained', { 'table.log.ttl': '1s' }));
  const { tableId } = (await cluster.conn.getTable(table)).info;
  const servers = [0, 1, 2].map((id) => cluster.tabletServer(id));
  const worker = await cluster.startTiering();
  await write(cluster.conn, table, 0, 2000);
  const lakeEnd = await tieredTo(table, 2000n);
  assert.equal(await worker.stop(), 0);
  // Not tiered: these stay on every replica however old they get.
  await write(cluster.conn, table, 2000, 2000);
  const untieredEnd = 4000n;
  for (const s of servers) assert.ok(segmentsOn(s, table, tableId).length > 4, `server ${s.bootstrap} has rolled several segments`);

  await until('every replica deleted the segments the lake holds', async () =>
    servers.every((s) => segmentsOn(s, table, tableId)[0] > 0n) ? true : undefined,
  );
  // Past the TTL of every segment, and several retention checks later.
  await new Promise((r) => setTimeout(r, 2000));
  for (const s of servers) {
    const segments = segmentsOn(s, table, tableId);
    assert.ok(segments[0] > 0n && segments[0] <= lakeEnd, `server ${s.bootstrap}: its log starts at ${segments[0]}, within what the lake holds (${lakeEnd})`);
    assert.ok(segments.filter((base) => base >= lakeEnd).length > 1, `server ${s.bootstrap} keeps the segments after ${lakeEnd}, which the lake does not hold`);
  }
  const earliest = await admin.listOffsets(table, [0], 'earliest');
  assert.ok(earliest.get(0)! > 0n, 'the leader log starts after offset 0');

  const { result } = await cluster.sql.execute('SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi FROM retained');
  assert.deepEqual(result!.rows[0].map(Number), [Number(untieredEnd), Number(untieredEnd), 0, Number(untieredEnd) - 1], 'the union read holds every row once');
});

test('the coordinator HTTP API lists the tablet servers and where the buckets of a table live', async () => {
  await cluster.sql.execute("CREATE TABLE placed (id BIGINT) WITH ('bucket.num' = '2')");
  await cluster.sql.execute('INSERT INTO placed VALUES (1), (2), (3)');
  const http = `http://${cluster.coordinators[0].http}/api/v1`;
  const get = async (url: string): Promise<Record<string, unknown>> => {
    const response = await fetch(`${http}${url}`);
    assert.equal(response.status, 200, url);
    return (await response.json()) as Record<string, unknown>;
  };
  const { tablet_servers: servers } = (await get('/cluster/tablet-servers')) as { tablet_servers: Record<string, unknown>[] };
  assert.deepEqual(servers.map((s) => [s.server_id, s.alive]), [[0, true], [1, true], [2, true]]);
  for (const s of servers) assert.equal(`${s.host}:${s.port}`, cluster.tabletServer(s.server_id as number).bootstrap);
  const shown = (await cluster.sql.execute('SHOW TABLET SERVERS')).result!;
  const names = shown.columns.map((c) => c.name);
  assert.deepEqual(Object.keys(servers[0]), names, 'the columns of SHOW TABLET SERVERS');
  assert.deepEqual(servers.map((s) => names.map((n) => s[n])), shown.rows.map((r) => names.map((n, i) => (n === 'alive' ? r[i] : r[i] ?? null))), 'the same as SHOW TABLET SERVERS');

  const { buckets } = (await get('/databases/shop/tables/placed/buckets')) as { buckets: Record<string, unknown>[] };
  const listed = await cluster.conn.getAdmin().listBuckets({ database: 'shop', table: 'placed' });
  assert.deepEqual(
    buckets,
    listed.map((b) => ({ partition: null, bucket: b.bucket, leader: b.leader, replicas: b.replicas, isr: b.isr, leader_epoch: b.leaderEpoch, high_watermark: String(b.highWatermark), log_end_offset: String(b.logEndOffset) })),
  );
  assert.equal(buckets.reduce((n, b) => n + Number(b.high_watermark), 0), 3, 'high watermarks as strings, summing to the rows written');
  const missing = await fetch(`${http}/databases/shop/tables/nowhere/buckets`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { error: { name: string } }).error.name, 'TABLE_NOT_EXIST');
});

test('the active coordinator killed with kill -9: CREATE TABLE, ALTER TABLE and CREATE PARTITION succeed without the caller retrying, and tiering goes on to new rows', async () => {
  const tiered = { database: 'shop', table: 'tiered_across' };
  const admin = cluster.conn.getAdmin();
  await admin.createTable(tiered, lakeTable('tiered_across'));
  await cluster.startTiering();
  await write(cluster.conn, tiered, 0, 200);
  await tieredTo(tiered, 200n);

  const [active, standby] = cluster.coordinators;
  assert.ok(standby, 'two coordinators');
  await active.kill();
  // Each call waits for the standby to take over by itself.
  const events = { database: 'shop', table: 'events_after' };
  await admin.createTable(events, { columns: [{ name: 'day', type: 'STRING' }, { name: 'id', type: 'BIGINT' }], partitionKeys: ['day'], properties: { 'bucket.num': '1' } });
  await admin.alterTable(events, { set: { 'table.log.ttl': '2d' } });
  await admin.createPartition(events, { day: '2026-05-01' });
  assert.equal((await admin.getTableInfo(events)).properties['table.log.ttl'], '2d');
  assert.deepEqual((await admin.listPartitionInfos(events)).map((p) => p.partitionName), ['2026-05-01']);

  await write(cluster.conn, tiered, 200, 200);
  await tieredTo(tiered, 400n);
  const { result } = await cluster.sql.execute('SELECT count(*) AS n, count(DISTINCT id) AS ids FROM tiered_across$lake');
  assert.deepEqual(result!.rows[0].map(Number), [400, 400], 'the lake holds every row once, the new ones tiered under the new coordinator');
  assert.equal((await admin.listTabletServers()).filter((s) => s.alive).length, 3, 'the new coordinator knows every tablet server');
  await cluster.restart(active);
});
