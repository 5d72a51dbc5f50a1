import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LeaderAndIsr } from './leader-election.js';
import { completedState, ledBy, movingReplicas, revertedState } from './reassignment.js';

const live = (...ids: number[]) => (id: number): boolean => ids.includes(id);
const state = (leader: number, isr: number[], standbyReplicas: number[] = []): LeaderAndIsr => ({ leader, leaderEpoch: 4, isr, coordinatorEpoch: 1, bucketEpoch: 9, standbyReplicas });

test('a move from [0, 1, 2] to [3, 1, 2] whose leader leaves: it waits for replica 3 in the ISR, then the first new replica leads and the ISR is the target', () => {
  const move = { origin: [0, 1, 2], target: [3, 1, 2], leader: 3 };
  assert.deepEqual(movingReplicas(move), [3, 1, 2, 0]);
  assert.equal(completedState(state(0, [0, 1, 2]), move, live(0, 1, 2, 3), 2), undefined, 'replica 3 is not in sync yet');
  assert.deepEqual(completedState(state(0, [0, 1, 2, 3]), move, live(0, 1, 2, 3), 2), { leader: 3, leaderEpoch: 5, isr: [1, 2, 3], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [] });
});

test('a leader that stays keeps leading at its epoch; a wanted leader not live leaves it to the next in sync', () => {
  const move = { origin: [0, 1, 2], target: [1, 2, 3], leader: 1 };
  assert.deepEqual(completedState(state(1, [0, 1, 2, 3]), move, live(0, 1, 2, 3), 2), { leader: 1, leaderEpoch: 4, isr: [1, 2, 3], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [] });
  assert.deepEqual(completedState(state(2, [0, 2, 3, 1]), { ...move, leader: 3 }, live(0, 2, 1), 2)?.leader, 2);
  assert.equal(completedState(state(-1, [1, 2, 3]), move, live(0, 1, 2, 3), 2), undefined, 'an offline bucket waits for a leader');
});

test('reverted, a move goes back to its origin: the added replicas leave the ISR and a leader among them hands back', () => {
  const move = { origin: [0, 1, 2], target: [3, 1, 2], leader: 3 };
  assert.deepEqual(revertedState(state(0, [0, 1, 2, 3]), move, live(0, 1, 2, 3), 2), { leader: 0, leaderEpoch: 4, isr: [0, 1, 2], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [] });
  assert.deepEqual(revertedState(state(3, [3, 1]), move, live(1, 3), 2), { leader: 1, leaderEpoch: 5, isr: [1], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [] });
  assert.equal(revertedState(state(3, [3]), move, live(3), 2), undefined, 'no replica of the origin can lead');
});

test('a leadership move needs its new leader live and in sync', () => {
  const s = state(1, [0, 1]);
  assert.equal(ledBy(s, 1, live(0, 1), 2), s);
  assert.deepEqual(ledBy(s, 0, live(0, 1), 2), { leader: 0, leaderEpoch: 5, isr: [0, 1], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [] });
  assert.equal(ledBy(s, 2, live(0, 1, 2), 2), undefined);
  assert.equal(ledBy(s, 0, live(1), 2), undefined);
});

test('a primary-key bucket keeping a standby names one again in each state a move or a leadership move makes', () => {
  const move = { origin: [0, 1, 2], target: [3, 1, 2], leader: 3 };
  // The standby on server 0 goes with the move; the first in-sync target replica that does not lead stands by.
  assert.deepEqual(completedState(state(0, [0, 1, 2, 3], [0]), move, live(0, 1, 2, 3), 2, true)?.standbyReplicas, [1]);
  assert.deepEqual(completedState(state(0, [0, 1, 2, 3], [2]), move, live(0, 1, 2, 3), 2, true)?.standbyReplicas, [2], 'a standby that stays stays');
  assert.deepEqual(revertedState(state(3, [3, 1, 2], [3]), move, live(1, 2, 3), 2, true), { leader: 1, leaderEpoch: 5, isr: [1, 2], coordinatorEpoch: 2, bucketEpoch: 10, standbyReplicas: [2] });
  assert.deepEqual(ledBy(state(1, [0, 1], [0]), 0, live(0, 1), 2, true)?.standbyReplicas, [1], 'the standby made leader hands standing by to the old leader');
});
