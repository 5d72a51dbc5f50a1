import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TributaryError } from '../../common/errors.js';
import { ConsumerGroup, type GroupLimits, type GroupTimers, type JoinRequest, type JoinResult } from './group.js';

/** Timers on a clock the test turns by hand: `advance(ms)` runs what falls due, in order. */
class ManualClock implements GroupTimers {
  private now = 0;
  private seq = 0;
  private readonly due = new Map<number, { at: number; fn: () => void }>();
  after(ms: number, fn: () => void): () => void {
    const id = this.seq++;
    this.due.set(id, { at: this.now + ms, fn });
    return () => this.due.delete(id);
  }
  advance(ms: number): void {
    const until = this.now + ms;
    for (;;) {
      const next = [...this.due].filter(([, t]) => t.at <= until).sort(([a, x], [b, y]) => x.at - y.at || a - b)[0];
      if (!next) break;
      this.due.delete(next[0]);
      this.now = next[1].at;
      next[1].fn();
    }
    this.now = until;
  }
}

const LIMITS: GroupLimits = { minSessionTimeoutMs: 1000, maxSessionTimeoutMs: 60_000, initialRebalanceDelayMs: 0, maxMembers: 3, maxMetadataBytes: 64 };

function setup(limits: Partial<GroupLimits> = {}): { clock: ManualClock; group: ConsumerGroup } {
  const clock = new ManualClock();
  return { clock, group: new ConsumerGroup('g', { ...LIMITS, ...limits }, clock) };
}

const join = (over: Partial<JoinRequest> = {}): JoinRequest => ({
  memberId: '',
  clientId: 'c',
  clientHost: '/127.0.0.1',
  sessionTimeoutMs: 3000,
  rebalanceTimeoutMs: 10_000,
  protocolType: 'consumer',
  protocols: [{ name: 'range', metadata: Buffer.from('m') }],
  ...over,
});

/** Whether a promise has settled (after the microtasks queued so far). */
async function settled<T>(p: Promise<T>): Promise<T | undefined> {
  let value: T | undefined;
  void p.then((v) => (value = v));
  await new Promise((r) => setImmediate(r));
  return value;
}

/** Joins two members and syncs them to Stable: [leader, follower]. */
async function stableWithTwo(group: ConsumerGroup): Promise<[JoinResult, JoinResult]> {
  const a = await group.join(join());
  const bJoin = group.join(join({ clientId: 'b' }));
  assert.equal(await settled(bJoin), undefined, 'the join phase waits for the first member to join again');
  const [ra, rb] = await Promise.all([group.join(join({ memberId: a.memberId })), bJoin]);
  const leader = ra.leader === ra.memberId ? ra : rb;
  const follower = leader === ra ? rb : ra;
  const followerSync = group.sync(follower.memberId, follower.generationId, []);
  const leaderSync = group.sync(leader.memberId, leader.generationId, [
    { memberId: leader.memberId, assignment: Buffer.from('L') },
    { memberId: follower.memberId, assignment: Buffer.from('F') },
  ]);
  assert.deepEqual((await followerSync).assignment, Buffer.from('F'));
  assert.deepEqual((await leaderSync).assignment, Buffer.from('L'));
  assert.equal(group.state, 'Stable');
  return [leader, follower];
}

test('a first member joins an empty group: generation 1, it leads, and its SyncGroup makes the group Stable', async () => {
  const { group } = setup();
  assert.equal(group.state, 'Empty');
  const r = await group.join(join());
  assert.equal(r.errorCode, 'NONE');
  assert.equal(r.generationId, 1);
  assert.equal(r.leader, r.memberId);
  assert.equal(r.protocolName, 'range');
  assert.deepEqual(r.members, [{ memberId: r.memberId, metadata: Buffer.from('m') }]);
  assert.equal(group.state, 'CompletingRebalance');
  const s = await group.sync(r.memberId, 1, [{ memberId: r.memberId, assignment: Buffer.from('all') }]);
  assert.deepEqual(s, { errorCode: 'NONE', assignment: Buffer.from('all') });
  assert.equal(group.state, 'Stable');
  assert.equal(group.heartbeat(r.memberId, 1), 'NONE');
});

test('the initial rebalance delay gathers members that start together into one generation', async () => {
  const { clock, group } = setup({ initialRebalanceDelayMs: 500 });
  const a = group.join(join({ clientId: 'a' }));
  const b = group.join(join({ clientId: 'b' }));
  assert.equal(await settled(a), undefined, 'the join phase waits for the delay');
  assert.equal(group.state, 'PreparingRebalance');
  clock.advance(500);
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(ra.generationId, 1);
  assert.equal(rb.generationId, 1);
  assert.equal(ra.leader, rb.leader);
  const leader = ra.leader === ra.memberId ? ra : rb;
  assert.equal(leader.members.length, 2);
  assert.equal((ra === leader ? rb : ra).members.length, 0, 'only the leader gets the members');
});

test('a new member rebalances a Stable group: heartbeats say REBALANCE_IN_PROGRESS until everyone rejoined', async () => {
  const { group } = setup();
  const [leader, follower] = await stableWithTwo(group);
  const c = group.join(join({ clientId: 'c' }));
  assert.equal(group.state, 'PreparingRebalance');
  assert.equal(group.heartbeat(follower.memberId, leader.generationId), 'REBALANCE_IN_PROGRESS');
  assert.equal((await group.sync(leader.memberId, leader.generationId, [])).errorCode, 'REBALANCE_IN_PROGRESS');
  const l2 = group.join(join({ memberId: leader.memberId }));
  assert.equal(await settled(c), undefined);
  const f2 = group.join(join({ memberId: follower.memberId }));
  const results = await Promise.all([l2, f2, c]);
  for (const r of results) assert.equal(r.generationId, leader.generationId + 1);
  assert.equal(results[0].leader, leader.memberId, 'the leader stays the leader');
  assert.equal(results[0].members.length, 3);
  assert.equal(group.state, 'CompletingRebalance');
  // A commit of the old generation is refused, one of the new generation is not until Stable.
  assert.equal(group.checkCommit(follower.memberId, leader.generationId), 'ILLEGAL_GENERATION');
  assert.equal(group.checkCommit(follower.memberId, leader.generationId + 1), 'REBALANCE_IN_PROGRESS');
});

test('a member without heartbeats for its session timeout is removed and the others rebalance', async () => {
  const { clock, group } = setup();
  const [leader, follower] = await stableWithTwo(group);
  clock.advance(2000);
  assert.equal(group.heartbeat(leader.memberId, leader.generationId), 'NONE');
  clock.advance(1500); // the follower's 3 s session has passed, the leader's has not
  assert.equal(group.memberCount, 1);
  assert.equal(group.state, 'PreparingRebalance');
  assert.equal(group.heartbeat(follower.memberId, follower.generationId), 'UNKNOWN_MEMBER_ID');
  assert.equal(group.heartbeat(leader.memberId, leader.generationId), 'REBALANCE_IN_PROGRESS');
  const r = await group.join(join({ memberId: leader.memberId }));
  assert.equal(r.generationId, leader.generationId + 1);
  assert.deepEqual(r.members.map((m) => m.memberId), [leader.memberId]);
});

test('a member that does not rejoin within the rebalance timeout is dropped from the new generation', async () => {
  const { clock, group } = setup();
  const [leader, follower] = await stableWithTwo(group);
  const l2 = group.join(join({ memberId: leader.memberId, protocols: [{ name: 'range', metadata: Buffer.from('changed') }] }));
  assert.equal(group.state, 'PreparingRebalance');
  // The follower keeps heartbeating but never joins again.
  for (let t = 0; t < 10_000; t += 1000) {
    clock.advance(1000);
    if (group.state === 'PreparingRebalance') assert.equal(group.heartbeat(follower.memberId, follower.generationId), 'REBALANCE_IN_PROGRESS');
  }
  const r = await l2;
  assert.equal(r.errorCode, 'NONE');
  assert.deepEqual(r.members.map((m) => m.memberId), [leader.memberId]);
  assert.equal(group.heartbeat(follower.memberId, r.generationId), 'UNKNOWN_MEMBER_ID');
});

test('LeaveGroup: the last member leaving empties the group; commits from outside group management are taken only then', async () => {
  const { group } = setup();
  const [leader, follower] = await stableWithTwo(group);
  assert.equal(group.checkCommit('', -1), 'UNKNOWN_MEMBER_ID');
  assert.equal(group.leave(follower.memberId), 'NONE');
  assert.equal(group.leave(follower.memberId), 'UNKNOWN_MEMBER_ID');
  assert.equal(group.state, 'PreparingRebalance');
  assert.equal(group.leave(leader.memberId), 'NONE');
  assert.equal(group.state, 'Empty');
  assert.equal(group.generationId, leader.generationId + 1, 'the join phase that ends with no member still counts');
  assert.equal(group.checkCommit('', -1), 'NONE');
});

test('protocols: the one every member supports that most prefer; a member sharing none is refused', async () => {
  const { clock, group } = setup({ initialRebalanceDelayMs: 100 });
  const p = (...names: string[]) => names.map((name) => ({ name, metadata: Buffer.from(name) }));
  const a = group.join(join({ protocols: p('cooperative-sticky', 'range') }));
  const b = group.join(join({ protocols: p('range', 'cooperative-sticky') }));
  const c = group.join(join({ protocols: p('range', 'roundrobin') }));
  assert.equal((await group.join(join({ protocols: p('roundrobin') }))).errorCode, 'INCONSISTENT_GROUP_PROTOCOL');
  assert.equal((await group.join(join({ protocolType: 'connect' }))).errorCode, 'INCONSISTENT_GROUP_PROTOCOL');
  clock.advance(100);
  const results = await Promise.all([a, b, c]);
  assert.ok(results.every((r) => r.protocolName === 'range'));
  const leader = results.find((r) => r.members.length > 0)!;
  assert.deepEqual(new Set(leader.members.map((m) => m.metadata.toString())), new Set(['range']), 'the leader gets the metadata of the chosen protocol');
});

test('limits and bad joins: session timeout bounds, unknown member ids, max members, metadata size', async () => {
  const { clock, group } = setup({ initialRebalanceDelayMs: 100 });
  assert.equal((await group.join(join({ sessionTimeoutMs: 999 }))).errorCode, 'INVALID_SESSION_TIMEOUT');
  assert.equal((await group.join(join({ sessionTimeoutMs: 60_001 }))).errorCode, 'INVALID_SESSION_TIMEOUT');
  assert.equal((await group.join(join({ memberId: 'nobody' }))).errorCode, 'UNKNOWN_MEMBER_ID');
  assert.equal((await group.sync('nobody', 0, [])).errorCode, 'UNKNOWN_MEMBER_ID');
  assert.throws(() => group.join(join({ protocols: [{ name: 'range', metadata: Buffer.alloc(65) }] })), (e: unknown) => e instanceof TributaryError && e.errorName === 'GROUP_METADATA_TOO_LARGE');
  const joins = [group.join(join()), group.join(join()), group.join(join())];
  assert.throws(() => group.join(join()), (e: unknown) => e instanceof TributaryError && e.errorName === 'GROUP_MAX_SIZE_REACHED');
  clock.advance(100);
  assert.deepEqual((await Promise.all(joins)).map((r) => r.generationId), [1, 1, 1]);
});

test('a member joining again with nothing changed while the leader has not synced gets the same generation', async () => {
  const { group } = setup();
  const r = await group.join(join());
  const again = await group.join(join({ memberId: r.memberId }));
  assert.equal(again.generationId, r.generationId);
  assert.equal(group.state, 'CompletingRebalance');
});

test('close: waiting requests end with NOT_COORDINATOR and the group is Dead', async () => {
  const { clock, group } = setup({ initialRebalanceDelayMs: 1000 });
  const waiting = group.join(join());
  group.close();
  assert.equal((await waiting).errorCode, 'NOT_COORDINATOR');
  assert.equal(group.state, 'Dead');
  assert.equal(group.heartbeat('x', 0), 'NOT_COORDINATOR');
  clock.advance(5000);
  assert.equal(group.state, 'Dead');
});
