import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chooseStandby, electLeader, type LeaderAndIsr, nextLeaderAndIsr, NO_LEADER } from './leader-election.js';

const live = (...ids: number[]) => (id: number) => ids.includes(id);
const state = (leader: number, isr: number[], leaderEpoch = 3, bucketEpoch = 7, standbyReplicas: number[] = []): LeaderAndIsr => ({ leader, leaderEpoch, isr, coordinatorEpoch: 1, bucketEpoch, standbyReplicas });

test('the first replica in assignment order that is live and in the ISR leads', () => {
  assert.equal(electLeader([1, 2, 3], [3, 2, 1], live(1, 2, 3)), 1);
  assert.equal(electLeader([1, 2, 3], [3, 2], live(1, 2, 3)), 2, 'a replica outside the ISR never leads');
  assert.equal(electLeader([1, 2, 3], [1, 2, 3], live(3, 2)), 2, 'a dead replica never leads');
});

test('with no live ISR member there is no leader, even if a replica outside the ISR is live', () => {
  assert.equal(electLeader([1, 2, 3], [1], live(2, 3)), NO_LEADER);
  assert.equal(electLeader([1, 2], [], live(1, 2)), NO_LEADER);
});

test('a dead leader hands over to the next live ISR member: leader epoch + 1, the dead one out of the ISR', () => {
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2, 3]), [1, 2, 3], live(2, 3), live(2, 3), 2), { leader: 2, leaderEpoch: 4, isr: [2, 3], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
});

test('a dead follower leaves the ISR; the leader and its epoch stay', () => {
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2, 3]), [1, 2, 3], live(1, 3), live(1, 3), 2), { leader: 1, leaderEpoch: 3, isr: [1, 3], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  assert.equal(nextLeaderAndIsr(state(1, [1, 3]), [1, 2, 3], live(1, 3), live(1, 3), 2), undefined, 'nothing changes, nothing is written');
});

test('with no live ISR member the bucket goes offline keeping its ISR, and leads again when one comes back', () => {
  const offline = nextLeaderAndIsr(state(1, [1]), [1, 2], live(2), live(2), 2)!;
  assert.deepEqual(offline, { leader: NO_LEADER, leaderEpoch: 4, isr: [1], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  assert.equal(nextLeaderAndIsr(offline, [1, 2], live(2), live(2), 2), undefined, 'still offline: no unclean election of 2');
  assert.deepEqual(nextLeaderAndIsr(offline, [1, 2], live(1, 2), live(1, 2), 3), { leader: 1, leaderEpoch: 5, isr: [1], coordinatorEpoch: 3, bucketEpoch: 9, standbyReplicas: [] });
});

test('a controlled shutdown moves leadership to another ISR member and takes the stopping server out of the ISR', () => {
  const notStopping = (id: number) => id !== 1;
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2]), [1, 2], notStopping, live(1, 2), 2), { leader: 2, leaderEpoch: 4, isr: [2], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  assert.deepEqual(nextLeaderAndIsr(state(2, [2, 1]), [1, 2], notStopping, live(1, 2), 2), { leader: 2, leaderEpoch: 3, isr: [2], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  assert.equal(nextLeaderAndIsr(state(1, [1]), [1, 2], notStopping, live(1, 2), 2), undefined, 'no other ISR member: the stopping server keeps leading');
});

test('a primary-key bucket prefers its standby when it is live and in the ISR, then chooses a new standby', () => {
  // Leader 1 dies: the standby 3 leads rather than 2, the first in assignment order; 2 becomes the standby.
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2, 3], 3, 7, [3]), [1, 2, 3], live(2, 3), live(2, 3), 2, true), { leader: 3, leaderEpoch: 4, isr: [2, 3], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [2] });
  // A standby outside the ISR, or dead, is passed over: the first live ISR member leads, as for log tables.
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2], 3, 7, [3]), [1, 2, 3], live(2, 3), live(2, 3), 2, true), { leader: 2, leaderEpoch: 4, isr: [2], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2, 3], 3, 7, [3]), [1, 2, 3], live(2), live(2), 2, true), { leader: 2, leaderEpoch: 4, isr: [2], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [] });
  // Without standbys (a log table, or the option off) the standby list is ignored.
  assert.equal(nextLeaderAndIsr(state(1, [1, 2, 3], 3, 7, []), [1, 2, 3], live(2, 3), live(2, 3), 2, false)!.leader, 2);
});

test('the standby stays while it is an eligible ISR member; a dead standby is replaced without a leader change', () => {
  assert.deepEqual(chooseStandby([1, 2, 3], [1, 2, 3], 1, [3], live(1, 2, 3)), [3]);
  assert.deepEqual(chooseStandby([1, 2, 3], [1, 2, 3], 1, [], live(1, 2, 3)), [2], 'none yet: the first follower in assignment order');
  assert.deepEqual(chooseStandby([1, 2, 3], [1, 3], 1, [2], live(1, 2, 3)), [3], 'out of the ISR: replaced');
  assert.deepEqual(chooseStandby([1, 2], [1], 1, [2], live(1, 2)), [], 'no follower in the ISR: no standby');
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2, 3], 3, 7, [2]), [1, 2, 3], live(1, 3), live(1, 3), 2, true), { leader: 1, leaderEpoch: 3, isr: [1, 3], coordinatorEpoch: 2, bucketEpoch: 8, standbyReplicas: [3] });
  assert.equal(nextLeaderAndIsr(state(1, [1, 2, 3], 3, 7, [2]), [1, 2, 3], live(1, 2, 3), live(1, 2, 3), 2, true), undefined, 'nothing changes, nothing is written');
  // A bucket placed before it had a standby gets one on the next look.
  assert.deepEqual(nextLeaderAndIsr(state(1, [1, 2], 3, 7, []), [1, 2], live(1, 2), live(1, 2), 2, true)!.standbyReplicas, [2]);
});
