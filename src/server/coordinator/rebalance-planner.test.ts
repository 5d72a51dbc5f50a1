import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { type PlanBucket, type PlanServer, planRebalance } from './rebalance-planner.js';
import { assignReplicas } from './replica-assignment.js';

/** Buckets placed as a new table's are, all in sync and led by their first replica. */
function placed(servers: PlanServer[], bucketCount: number, factor: number): PlanBucket[] {
  return assignReplicas(servers, bucketCount, factor, 7).map((replicas) => ({ replicas, leader: replicas[0], isr: replicas }));
}

/** The replicas and leaders after applying a plan. */
function apply(buckets: PlanBucket[], servers: PlanServer[], goals: Parameters<typeof planRebalance>[2]): PlanBucket[] {
  const moves = new Map(planRebalance(buckets, servers, goals).map((m) => [m.bucket, m]));
  return buckets.map((b) => {
    const m = moves.get(b);
    return m ? { replicas: m.replicas, leader: m.leader, isr: m.replicas } : b;
  });
}

const counts = (buckets: PlanBucket[], of: (b: PlanBucket) => readonly number[]): Map<number, number> => {
  const n = new Map<number, number>();
  for (const b of buckets) for (const id of of(b)) n.set(id, (n.get(id) ?? 0) + 1);
  return n;
};

const servers = (n: number, racks?: string[]): PlanServer[] => Array.from({ length: n }, (_, id) => ({ id, live: true, ...(racks ? { rack: racks[id] } : {}) }));

test('REPLICA_DISTRIBUTION onto an added server: replica counts even out, each bucket keeps distinct servers, leaders follow the moved first replicas', () => {
  const before = placed(servers(3), 8, 3);
  const four = servers(4);
  const after = apply(before, four, ['REPLICA_DISTRIBUTION']);
  assert.deepEqual([...counts(after, (b) => b.replicas)].sort(([a], [b]) => a - b), [[0, 6], [1, 6], [2, 6], [3, 6]]);
  for (const b of after) {
    assert.equal(new Set(b.replicas).size, 3, 'three different servers');
    assert.ok(b.replicas.includes(b.leader), 'the leader is one of the replicas');
  }
  assert.ok((counts(after, (b) => [b.replicas[0]]).get(3) ?? 0) >= 1, 'the new server is the preferred leader of some buckets');
  const moved = before.filter((b, i) => b.replicas.join() !== after[i].replicas.join());
  assert.equal(moved.length, 6, 'only as many replicas move as the new server takes');
  assert.deepEqual(planRebalance(after, four, ['REPLICA_DISTRIBUTION']), [], 'a balanced cluster has nothing to move');
});

test('a PERMANENT_OFFLINE server is drained to no replica, a TEMPORARY_OFFLINE one keeps its replicas and takes none', () => {
  const four = servers(4);
  const before = placed(four, 8, 2);
  const tagged: PlanServer[] = four.map((s) => (s.id === 1 ? { ...s, tag: 'PERMANENT_OFFLINE' } : s.id === 2 ? { ...s, tag: 'TEMPORARY_OFFLINE' } : s));
  const after = apply(before, tagged, ['REPLICA_DISTRIBUTION']);
  const replicas = counts(after, (b) => b.replicas);
  assert.equal(replicas.get(1) ?? 0, 0, 'drained');
  assert.equal(replicas.get(2), counts(before, (b) => b.replicas).get(2), 'the temporarily offline server keeps what it had');
  assert.ok(after.every((b) => b.leader !== 1), 'the drained server leads nothing');
  assert.ok(Math.abs((replicas.get(0) ?? 0) - (replicas.get(3) ?? 0)) <= 1, 'the others share the drained replicas evenly');
});

test('a drain with nowhere to go is REBALANCE_FAILURE_EXCEPTION', () => {
  const three = servers(3);
  const tagged = three.map((s) => (s.id === 0 ? { ...s, tag: 'PERMANENT_OFFLINE' as const } : s));
  assert.throws(
    () => planRebalance(placed(three, 3, 3), tagged, ['REPLICA_DISTRIBUTION']),
    (err: unknown) => err instanceof TributaryError && err.errorName === 'REBALANCE_FAILURE_EXCEPTION',
  );
});

test('the replicas of a bucket stay spread over racks: a drained replica goes to the rack the bucket lacks', () => {
  const racked: PlanServer[] = [
    { id: 0, rack: 'a', live: true },
    { id: 1, rack: 'b', live: true },
    { id: 2, rack: 'a', live: true, tag: 'PERMANENT_OFFLINE' },
    { id: 3, rack: 'b', live: true },
    { id: 4, rack: 'a', live: true },
  ];
  const before: PlanBucket[] = [
    { replicas: [2, 1], leader: 2, isr: [2, 1] },
    { replicas: [1, 2], leader: 1, isr: [1, 2] },
    { replicas: [3, 0], leader: 3, isr: [3, 0] },
  ];
  const after = apply(before, racked, ['REPLICA_DISTRIBUTION']);
  const rack = (id: number): string => racked.find((s) => s.id === id)!.rack!;
  for (const b of after) assert.equal(new Set(b.replicas.map(rack)).size, 2, `[${b.replicas}] spans both racks`);
  assert.equal(after[0].leader, after[0].replicas[0], 'the drained leader hands over to the first new replica');
  assert.ok(!after.some((b) => b.replicas.includes(2)));
});

test('LEADER_DISTRIBUTION moves leaderships back to the preferred replica, and off a TEMPORARY_OFFLINE one', () => {
  const three = servers(3);
  const buckets: PlanBucket[] = [
    { replicas: [0, 1, 2], leader: 1, isr: [0, 1, 2] }, // preferred leader 0 is back and in sync
    { replicas: [1, 2, 0], leader: 1, isr: [1, 2, 0] }, // led as preferred
    { replicas: [2, 0, 1], leader: 2, isr: [2, 0, 1] }, // preferred leader tagged: the next one leads
    { replicas: [0, 2, 1], leader: 2, isr: [2, 1] }, // preferred leader not in sync: stays
    { replicas: [0, 1, 2], leader: -1, isr: [0] }, // offline: left alone
  ];
  const tagged = three.map((s) => (s.id === 2 ? { ...s, tag: 'TEMPORARY_OFFLINE' as const } : s));
  const plan = planRebalance(buckets, tagged, ['LEADER_DISTRIBUTION']);
  assert.deepEqual(
    plan.map((m) => [buckets.indexOf(m.bucket), m.replicas, m.leader]),
    [
      [0, [0, 1, 2], 0],
      [2, [2, 0, 1], 0],
      [3, [0, 2, 1], 1],
    ],
  );
  assert.deepEqual(planRebalance(buckets.slice(0, 2), three, ['REPLICA_DISTRIBUTION']), [], 'replica goals alone move no leadership');
});
