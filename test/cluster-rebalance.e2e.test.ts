/**
 * Rebalance on a cluster on ZooKeeper, with real processes: two coordinators, three tablet servers
 * and then a fourth, replication factor 3 and a min ISR of 2, at most two buckets moving at once.
 * - a fourth server added, REPLICA_DISTRIBUTION moves replicas onto it while an acks=all writer
 *   runs: the replica counts even out and every acknowledged row is read back exactly once;
 * - a server tagged PERMANENT_OFFLINE is drained to no replica, then stops with no bucket under-replicated;
 * - the active coordinator killed with kill -9 while replicas move (their new server frozen, so
 *   none can be in sync yet): the standby carries the same task on to COMPLETED.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { RebalanceProgress } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { useCluster, until } from './support/cluster.js';

const cluster = useCluster(
  {
    zooKeeper: { coordinators: 2, tabletServers: 3 },
    settings: { 'default.replication.factor': '3', 'log.replica.min-in-sync-replicas-number': '2', 'coordinator.rebalance.max-concurrent-moves': '2' },
    sql: 'ops',
  },
  async (c) => void (await c.sql.execute("CREATE TABLE moving (id BIGINT, v STRING) WITH ('bucket.num' = '4')")),
);
const path: TablePath = { database: 'ops', table: 'moving' };
/** Rows the first test wrote and had acknowledged: the table holds these, and no others, after it. */
let written = 0;

async function query(sql: string): Promise<Record<string, unknown>[]> {
  const { result } = await cluster.sql.execute(sql);
  assert.ok(result, `${sql} returns rows`);
  return result.rows.map((values) => Object.fromEntries(result.columns.map((c, i) => [c.name, values[i]])));
}

const finished = (id: string): Promise<RebalanceProgress> =>
  until(`rebalance ${id} finishes`, async () => {
    const p = await cluster.conn.getAdmin().listRebalanceProgress(id);
    return p.status === 'REBALANCING' ? undefined : p;
  });

/** Replicas per live tablet server, by id. */
async function replicaCounts(): Promise<Record<number, number>> {
  const servers = await cluster.conn.getAdmin().listTabletServers();
  return Object.fromEntries(servers.filter((s) => s.alive).map((s) => [s.nodeId, s.replicaCount]));
}

async function assertInSync(): Promise<void> {
  for (const b of await cluster.conn.getAdmin().listBuckets(path)) {
    assert.equal(b.replicas.length, 3, `bucket ${b.bucket} has three replicas`);
    assert.deepEqual([...b.isr].sort(), [...b.replicas].sort(), `bucket ${b.bucket} has all of them in sync`);
    assert.ok(b.replicas.includes(b.leader), `bucket ${b.bucket} is led by one of them`);
  }
}

/** The ids in the table, in any order: polled until `expected` have come, then once more for any beyond them. */
async function readAll(expected: number): Promise<bigint[]> {
  const scanner = (await cluster.conn.getTable(path)).newScan().createLogScanner();
  for (let b = 0; b < 4; b++) await scanner.subscribe(b, 'earliest');
  const ids: bigint[] = [];
  for (let i = 0; i < 200 && ids.length < expected; i++) ids.push(...(await scanner.poll(200)).map((r) => r.row.id as bigint));
  ids.push(...(await scanner.poll(500)).map((r) => r.row.id as bigint));
  scanner.close();
  return ids;
}

test('a fourth tablet server: REPLICA_DISTRIBUTION moves replicas onto it while an acks=all writer runs, and every acknowledged row is read back once', async () => {
  const acknowledged: bigint[] = [];
  let writing = true;
  const writer = (async () => {
    const w = await (await cluster.conn.getTable(path)).newAppend().createWriter();
    try {
      for (let next = 0n; writing; ) {
        const batch = Array.from({ length: 50 }, () => next++);
        for (const id of batch) await w.append({ id, v: `row-${id}` });
        await w.flush();
        acknowledged.push(...batch);
      }
    } finally {
      await w.close();
    }
  })();
  await until('some rows are written', async () => (acknowledged.length > 0 ? true : undefined));
  await cluster.addTabletServer();
  await until('the coordinator sees four tablet servers', async () => ((await query('SHOW TABLET SERVERS')).filter((s) => s.alive).length === 4 ? true : undefined));
  const [{ rebalance_id: id }] = await query("CALL sys.rebalance('REPLICA_DISTRIBUTION')");
  const progress = await finished(String(id));
  writing = false;
  await writer;

  assert.equal(progress.status, 'COMPLETED', JSON.stringify(progress));
  assert.equal(progress.buckets.length, 3, 'three replicas move: one of each of three buckets');
  assert.ok(progress.buckets.every((b) => b.status === 'COMPLETED' && b.newReplicas.includes(3)));
  assert.deepEqual(await replicaCounts(), { 0: 3, 1: 3, 2: 3, 3: 3 });
  await assertInSync();
  const ids = await readAll(acknowledged.length);
  const seen = new Map<bigint, number>();
  for (const x of ids) seen.set(x, (seen.get(x) ?? 0) + 1);
  assert.deepEqual([...seen].filter(([, n]) => n > 1), [], 'no row twice');
  assert.deepEqual(acknowledged.filter((x) => !seen.has(x)), [], 'every acknowledged row is there');
  written = ids.length;
});

test('a server tagged PERMANENT_OFFLINE is drained to no replica and then stops with no bucket under-replicated', async () => {
  await cluster.sql.execute("CALL sys.add_server_tag('0', 'PERMANENT_OFFLINE')");
  const tagged = await query('SHOW TABLET SERVERS');
  assert.deepEqual(tagged.map((s) => [s.server_id, s.tags]), [[0, 'PERMANENT_OFFLINE'], [1, null], [2, null], [3, null]]);
  const [{ rebalance_id: id }] = await query("CALL sys.rebalance(priorityGoals => 'REPLICA_DISTRIBUTION')");
  const progress = await finished(String(id));
  assert.equal(progress.status, 'COMPLETED', JSON.stringify(progress));
  assert.ok(progress.buckets.every((b) => !b.newReplicas.includes(0)));
  assert.deepEqual(await replicaCounts(), { 0: 0, 1: 4, 2: 4, 3: 4 });
  const rows = await query('CALL sys.list_rebalance()');
  assert.ok(rows.every((r) => r.rebalance_id === id && r.rebalance_status === 'COMPLETED' && r.status === 'COMPLETED'));

  assert.equal(await cluster.tabletServer(0).stop(), 0, 'a clean exit');
  await assertInSync();
  const metrics = await (await fetch(`http://${cluster.coordinators[0].http}/metrics`)).text();
  const sample = (name: string): number => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(metrics)?.[1]);
  assert.equal(sample('tributary_under_replicated_buckets'), 0);
  assert.equal(sample('tributary_rebalance_buckets_moving'), 0);
});

test('the active coordinator killed with kill -9 while replicas move: the standby carries the task on to COMPLETED', async () => {
  const server0 = await cluster.restart(cluster.tabletServer(0));
  await cluster.conn.getAdmin().removeServerTag([0], 'PERMANENT_OFFLINE');
  await until('the coordinator sees server 0 again', async () => ((await cluster.conn.getAdmin().listTabletServers()).find((s) => s.nodeId === 0)?.alive ? true : undefined));
  // Frozen for less than its session: still live, but it can take no replica until it resumes.
  server0.freeze();
  const [active] = cluster.coordinators;
  let id: string;
  try {
    id = await cluster.conn.getAdmin().rebalance(['REPLICA_DISTRIBUTION', 'LEADER_DISTRIBUTION']);
    const started = await cluster.conn.getAdmin().listRebalanceProgress(id);
    assert.equal(started.status, 'REBALANCING');
    assert.ok(started.buckets.some((b) => b.status === 'REBALANCING' && b.newReplicas.includes(0)), 'a move onto server 0 runs');
    await active.kill();
  } finally {
    await sleep(500);
    server0.resume();
  }
  const progress = await finished(id);
  assert.equal(progress.rebalanceId, id, 'the same task');
  assert.equal(progress.status, 'COMPLETED', JSON.stringify(progress));
  assert.deepEqual(await replicaCounts(), { 0: 3, 1: 3, 2: 3, 3: 3 });
  await assertInSync();
  for (const b of await cluster.conn.getAdmin().listBuckets(path)) assert.equal(b.leader, b.replicas[0], `bucket ${b.bucket} is led by its preferred replica`);
  assert.equal((await readAll(written)).length, written, 'the rows are all there, once');
  await cluster.restart(active);
});
