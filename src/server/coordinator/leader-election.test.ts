import assert from 'node:assert/strict';
import { test } from 'node:test';
import { electLeader, NO_LEADER } from './leader-election.js';

const live = (...ids: number[]) => (id: number) => ids.includes(id);

test('the first replica in assignment order that is live and in the ISR leads', () => {
  assert.equal(electLeader([1, 2, 3], [3, 2, 1], live(1, 2, 3)), 1);
  assert.equal(electLeader([1, 2, 3], [3, 2], live(1, 2, 3)), 2, 'a replica outside the ISR never leads');
  assert.equal(electLeader([1, 2, 3], [1, 2, 3], live(3, 2)), 2, 'a dead replica never leads');
});

test('with no live ISR member the bucket has no leader, even if a replica outside the ISR is live', () => {
  assert.equal(electLeader([1, 2, 3], [1], live(2, 3)), NO_LEADER);
  assert.equal(electLeader([1, 2], [], live(1, 2)), NO_LEADER);
});

test('a controlled shutdown elects without the stopping server', () => {
  assert.equal(electLeader([1, 2, 3], [1, 2, 3], live(1, 2, 3), 1), 2);
  assert.equal(electLeader([1, 2], [1], live(1, 2), 1), NO_LEADER);
});
