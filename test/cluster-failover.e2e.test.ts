/**
 * A cluster on ZooKeeper under crashes, with real processes: one coordinator, three tablet servers,
 * replication factor 3. Writers with acks=all run while the leader of a bucket is killed with
 * kill -9 again and again and brought back: every acknowledged row is read back exactly once and in
 * order per bucket (also by a consumer polling all along, and of a partitioned table), and every
 * acknowledged upsert is the state of its key on whichever replica leads afterwards; a lake-enabled
 * table tiered meanwhile holds each offset exactly once. The ISR grows back to all three once the
 * killed servers return.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Connection, type LogScanner, type ScanRecord } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { useCluster } from './support/cluster.js';
import { WriterChild } from './support/writer-child.js';

const cluster = useCluster({ zooKeeper: { tabletServers: 3 }, settings: { 'default.replication.factor': '3' }, sql: 'tributary' });

/** Long enough for a new leader to be elected after a kill (the session timeout, then the election). */
const WRITER_TIMEOUT = '30s';

/** A bucket of a table, of one of its partitions when `partition` is set. */
interface Bucket {
  partition?: string;
  bucket: number;
}

async function leaderOf(conn: Connection, path: TablePath, { partition, bucket }: Bucket): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const leader = (await conn.getAdmin().listBuckets(path)).find((b) => b.bucket === bucket && b.partition === partition)?.leader ?? -1;
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

/** Kills the leader of bucket `round % buckets.length` with kill -9 once `writer` acknowledged `atLeast`, and starts it again. */
async function killLeaders(path: TablePath, writer: WriterChild, buckets: Bucket[], ackedBeforeKill: (round: number) => number, rounds = 3): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    await writer.waitForAcks(ackedBeforeKill(round));
    const victim = cluster.tabletServer(await leaderOf(cluster.conn, path, buckets[round % buckets.length]));
    await victim.kill();
    // The writer goes on at the new leader before the old one is back.
    const before = writer.acked;
    await writer.waitForAcks(before + 1);
    await cluster.restart(victim);
  }
}

const numbered = (count: number): Bucket[] => Array.from({ length: count }, (_, bucket) => ({ bucket }));
const subscription = (b: Bucket) => (b.partition === undefined ? b.bucket : { partition: b.partition, bucket: b.bucket });

/** Polls until `total` records came (or 400 polls), then once more: no duplicate waits behind the last acknowledged row. */
async function readAll(scanner: LogScanner, total: number): Promise<ScanRecord[]> {
  const records: ScanRecord[] = [];
  for (let i = 0; i < 400 && records.length < total; i++) records.push(...(await scanner.poll(200)));
  records.push(...(await scanner.poll(500)));
  return records;
}

/** Every id 0..total-1 once; per bucket offsets 0.. with no gap, in offset order, ids in write order. */
function assertExactlyOnce(records: ScanRecord[], total: number, buckets: Bucket[], who: string): void {
  const ids = records.map((r) => Number(r.row.id));
  assert.equal(new Set(ids).size, ids.length, `${who}: no row appears twice`);
  assert.equal(ids.length, total, `${who}: every acknowledged row is present`);
  for (const { partition, bucket } of buckets) {
    const inBucket = records.filter((r) => r.bucket === bucket && r.partition === partition);
    const offsets = inBucket.map((r) => r.offset);
    const where = `${who}, bucket ${partition === undefined ? '' : `${partition}/`}${bucket}`;
    assert.deepEqual(offsets, offsets.map((_, i) => BigInt(i)), `${where}: offsets 0.. in order, with no gap`);
    const bucketIds = inBucket.map((r) => Number(r.row.id));
    assert.deepEqual(bucketIds, [...bucketIds].sort((x, y) => x - y), `${where} holds ids in write order`);
  }
}

test('log table, RF=3, acks=all: leaders killed with kill -9 three times; every acknowledged row is read exactly once, in order per bucket, also by a consumer polling all along', async () => {
  const path = { database: 'tributary', table: 'replicated_log' };
  await cluster.conn.getAdmin().createTable(path, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }],
    properties: { 'bucket.num': '3', 'bucket.key': 'id' },
  });
  const buckets = numbered(3);
  const total = 12_000;
  // The live consumer subscribes before the first row is written and polls through every kill.
  const consumerConn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.request-timeout': WRITER_TIMEOUT });
  const live = (await consumerConn.getTable(path)).newScan().createLogScanner();
  for (const b of buckets) await live.subscribe(subscription(b), 'earliest');
  const consumed: ScanRecord[] = [];
  let writing = true;
  const consuming = (async () => {
    // Once the writer is done, at most 100 more polls to see the rest.
    for (let after = 0; writing || (consumed.length < total && after < 100); after += writing ? 0 : 1) consumed.push(...(await live.poll(200)));
  })();
  try {
    const writer = WriterChild.start('crash-writer-child.ts', [cluster.bootstrap, 'tributary.replicated_log', String(total), WRITER_TIMEOUT]);
    await killLeaders(path, writer, buckets, (round) => (round + 1) * 2000);
    assert.equal(await writer.exit(), 0, `producer failed: ${writer.stderr}`);
    assert.equal(writer.acked, total - 1);
    writing = false;
    await consuming;
    consumed.push(...(await live.poll(500)));
  } finally {
    writing = false;
    await consuming.catch(() => undefined);
    live.close();
    await consumerConn.close();
  }
  assertExactlyOnce(consumed, total, buckets, 'the live consumer');

  const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
  for (const b of buckets) await scanner.subscribe(subscription(b), 'earliest');
  const records = await readAll(scanner, total);
  scanner.close();
  assertExactlyOnce(records, total, buckets, 'a scan afterwards');
  await fullIsr(cluster.conn, path);
});

test('partitioned log table (two partitions), RF=3, acks=all: leaders killed with kill -9; every acknowledged row is read exactly once, in order per bucket', async () => {
  const path = { database: 'tributary', table: 'replicated_parts' };
  const admin = cluster.conn.getAdmin();
  await admin.createTable(path, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }, { name: 'part', type: 'STRING', nullable: false }],
    partitionKeys: ['part'],
    properties: { 'bucket.num': '2', 'bucket.key': 'id' },
  });
  const partitions = ['p0', 'p1'];
  for (const part of partitions) await admin.createPartition(path, { part });
  const buckets = partitions.flatMap((partition) => numbered(2).map((b) => ({ ...b, partition })));
  const total = 8_000;
  const writer = WriterChild.start('crash-writer-child.ts', [cluster.bootstrap, 'tributary.replicated_parts', String(total), WRITER_TIMEOUT, partitions.join(',')]);
  // Rounds 0 and 1 kill the leaders of p0/0 and p0/1, round 2 that of p1/0.
  await killLeaders(path, writer, [buckets[0], buckets[1], buckets[2]], (round) => (round + 1) * 1500);
  assert.equal(await writer.exit(), 0, `producer failed: ${writer.stderr}`);
  assert.equal(writer.acked, total - 1);

  const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
  for (const b of buckets) await scanner.subscribe(subscription(b), 'earliest');
  const records = await readAll(scanner, total);
  scanner.close();
  assertExactlyOnce(records, total, buckets, 'a scan');
  for (const partition of partitions) {
    const ids = records.filter((r) => r.partition === partition).map((r) => Number(r.row.id));
    assert.ok(ids.every((id) => partitions[id % 2] === partition), `partition ${partition} holds its own rows only`);
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
  await killLeaders(path, writer, numbered(2), (round) => (round + 1) * 6);
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

test('lake-enabled table, RF=3: a leader killed with kill -9 while rows are written and tiered; the lake holds every row exactly once', async () => {
  const path = { database: 'tributary', table: 'replicated_lake' };
  await cluster.conn.getAdmin().createTable(path, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }],
    properties: { 'bucket.num': '2', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '500ms' },
  });
  await cluster.startTiering();
  const total = 6_000;
  const writer = WriterChild.start('crash-writer-child.ts', [cluster.bootstrap, 'tributary.replicated_lake', String(total), WRITER_TIMEOUT]);
  await killLeaders(path, writer, numbered(2), (round) => (round + 1) * 1500);
  assert.equal(await writer.exit(), 0, `producer failed: ${writer.stderr}`);
  const admin = cluster.conn.getAdmin();
  for (let i = 0; i < 600; i++) {
    const status = await admin.getLakeTieringStatus(path);
    const tiered = status.buckets.reduce((n, b) => n + b.lakeEndOffset, 0n);
    if (tiered >= BigInt(total) && status.buckets.every((b) => b.recordsBehind === 0n)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const { result } = await cluster.sql.execute('SELECT count(*) AS n, count(DISTINCT id) AS ids, min(id) AS lo, max(id) AS hi FROM replicated_lake$lake');
  assert.deepEqual(result!.rows[0].map(Number), [total, total, 0, total - 1], 'the lake holds every acknowledged row once');
  const union = await cluster.sql.execute('SELECT count(*) AS n FROM replicated_lake');
  assert.equal(Number(union.result!.rows[0][0]), total);
  await fullIsr(cluster.conn, path);
});
