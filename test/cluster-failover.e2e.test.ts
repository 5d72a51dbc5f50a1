/**
 * A cluster on ZooKeeper under crashes, with real processes: one coordinator, three tablet servers,
 * replication factor 3. Writers with acks=all run while the leader of a bucket is killed with
 * kill -9 again and again and brought back: every acknowledged row is read back exactly once and in
 * order per bucket, and every acknowledged upsert is the state of its key on whichever replica leads
 * afterwards. The ISR grows back to all three once the killed servers return.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Connection, ScanRecord } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { useCluster } from './support/cluster.js';
import { WriterChild } from './support/writer-child.js';

const cluster = useCluster({ zooKeeper: { tabletServers: 3 }, settings: { 'default.replication.factor': '3' } });

/** Long enough for a new leader to be elected after a kill (the session timeout, then the election). */
const WRITER_TIMEOUT = '30s';

async function leaderOf(conn: Connection, path: TablePath, bucket: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const leader = (await conn.getAdmin().listBuckets(path)).find((b) => b.bucket === bucket)?.leader ?? -1;
    if (leader >= 0) return leader;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`bucket ${bucket} of ${path.table} has no leader`);
}

/** Waits until every bucket of the table has all its replicas in sync again. */
async function fullIsr(conn: Connection, path: TablePath): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const buckets = await conn.getAdmin().listBuckets(path);
    if (buckets.every((b) => b.isr.length === b.replicas.length && b.leader >= 0)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  assert.fail(`the ISR of ${path.table} did not grow back: ${JSON.stringify(await conn.getAdmin().listBuckets(path), (_k, v) => (typeof v === 'bigint' ? String(v) : v))}`);
}

/** Kills the leader of bucket `round % buckets` with kill -9 once `writer` acknowledged `atLeast`, and starts it again. */
async function killLeaders(path: TablePath, writer: WriterChild, buckets: number, ackedBeforeKill: (round: number) => number): Promise<void> {
  for (let round = 0; round < 3; round++) {
    await writer.waitForAcks(ackedBeforeKill(round));
    const victim = cluster.tabletServer(await leaderOf(cluster.conn, path, round % buckets));
    await victim.kill();
    // The writer goes on at the new leader before the old one is back.
    const before = writer.acked;
    await writer.waitForAcks(before + 1);
    await cluster.restart(victim);
  }
}

test('log table, RF=3, acks=all: leaders killed with kill -9 three times; every acknowledged row is read exactly once, in order per bucket', async () => {
  const path = { database: 'tributary', table: 'replicated_log' };
  await cluster.conn.getAdmin().createTable(path, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }],
    properties: { 'bucket.num': '3', 'bucket.key': 'id' },
  });
  const total = 12_000;
  const writer = WriterChild.start('crash-writer-child.ts', [cluster.bootstrap, 'tributary.replicated_log', String(total), WRITER_TIMEOUT]);
  await killLeaders(path, writer, 3, (round) => (round + 1) * 2000);
  assert.equal(await writer.exit(), 0, `producer failed: ${writer.stderr}`);
  assert.equal(writer.acked, total - 1);

  const table = await cluster.conn.getTable(path);
  const scanner = table.newScan().createLogScanner();
  for (let b = 0; b < 3; b++) await scanner.subscribe(b, 'earliest');
  const records: ScanRecord[] = [];
  for (let i = 0; i < 400 && records.length < total; i++) records.push(...(await scanner.poll(200)));
  // Nothing more arrives: no duplicate is waiting behind the last acknowledged row.
  records.push(...(await scanner.poll(500)));
  scanner.close();
  const ids = records.map((r) => Number(r.row.id));
  assert.equal(new Set(ids).size, ids.length, 'no row appears twice');
  assert.equal(ids.length, total, 'every acknowledged row is present');
  for (let b = 0; b < 3; b++) {
    const inBucket = records.filter((r) => r.bucket === b);
    const offsets = inBucket.map((r) => r.offset);
    assert.deepEqual(offsets, offsets.map((_, i) => BigInt(i)), `bucket ${b}: offsets 0.. with no gap`);
    const bucketIds = inBucket.map((r) => Number(r.row.id));
    assert.deepEqual(bucketIds, [...bucketIds].sort((x, y) => x - y), `bucket ${b} holds ids in write order`);
  }
  await fullIsr(cluster.conn, path);
});

test('primary-key table, RF=3: leaders killed with kill -9 during upserts; the new leaders hold the last acknowledged value of every key', async () => {
  const path = { database: 'tributary', table: 'replicated_kv' };
  await cluster.conn.getAdmin().createTable(path, {
    columns: [{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'INT' }],
    primaryKey: ['k'],
    properties: { 'bucket.num': '2' },
  });
  const keys = 200;
  const rounds = 30;
  const writer = WriterChild.start('pk-writer-child.ts', [cluster.bootstrap, 'tributary.replicated_kv', String(keys), String(rounds), WRITER_TIMEOUT]);
  await killLeaders(path, writer, 2, (round) => (round + 1) * 6);
  assert.equal(await writer.exit(), 0, `writer failed: ${writer.stderr}`);
  assert.equal(writer.acked, rounds - 1);

  const table = await cluster.conn.getTable(path);
  const lookuper = table.newLookup().createLookuper();
  const looked = await Promise.all([...Array(keys).keys()].map((k) => lookuper.lookup({ k: BigInt(k) })));
  assert.deepEqual(looked.map((r) => r?.v), Array(keys).fill(rounds - 1), 'every key holds the last acknowledged value');
  const scanned = await table.newScan().createBatchScanner().readAll();
  assert.equal(scanned.length, keys);
  assert.equal((await cluster.conn.getAdmin().getTableStats(path)).rowCount, BigInt(keys));
  await fullIsr(cluster.conn, path);
});
