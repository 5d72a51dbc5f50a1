import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LeaderState } from './leader-state.js';

test('the high watermark is the lowest log end of the ISR; a member that has not fetched holds it', () => {
  const leader = new LeaderState(1, 10n, [1, 2, 3], 0);
  assert.equal(leader.highWatermark([1, 2, 3], 50n), -1n);
  leader.followerFetched(2, 40n, 50n, 1);
  leader.followerFetched(3, 30n, 50n, 1);
  assert.equal(leader.highWatermark([1, 2, 3], 50n), 30n);
  assert.equal(leader.highWatermark([1, 2], 50n), 40n, 'a follower outside the ISR does not count');
  assert.equal(leader.highWatermark([1], 50n), 50n, 'alone, the leader durable end');
  leader.followerFetched(2, 50n, 60n, 2);
  assert.equal(leader.highWatermark([1, 2], 45n), 45n, 'never above the leader durable end');
});

test('a follower is caught up when it fetches from the durable end of then, or of its previous fetch', () => {
  const maxLag = 100;
  const leader = new LeaderState(1, 0n, [1, 2], 0);
  leader.followerFetched(2, 10n, 20n, 50);
  assert.deepEqual(leader.laggingFollowers([1, 2], 150, maxLag), [2], 'behind since it became a follower at 0');
  // Under a steady stream it reaches where the leader was at its previous fetch: caught up as of then (50 ms).
  leader.followerFetched(2, 20n, 30n, 140);
  assert.deepEqual(leader.laggingFollowers([1, 2], 150, maxLag), []);
  assert.deepEqual(leader.laggingFollowers([1, 2], 151, maxLag), [2]);
  leader.followerFetched(2, 30n, 30n, 200);
  assert.deepEqual(leader.laggingFollowers([1, 2], 300, maxLag), []);
  assert.deepEqual(leader.laggingFollowers([1, 2], 301, maxLag), [2]);
  assert.deepEqual(leader.laggingFollowers([1], 301, maxLag), [], 'only ISR members leave it');
});

test('a follower outside the ISR may join once its log end reaches the high watermark and the epoch start', () => {
  const leader = new LeaderState(1, 100n, [1, 2, 3], 0);
  leader.followerFetched(3, 90n, 120n, 1);
  assert.equal(leader.canJoin(3, [1, 2], 80n), false, 'below the start of this epoch');
  leader.followerFetched(3, 110n, 120n, 2);
  assert.equal(leader.canJoin(3, [1, 2], 115n), false, 'below the high watermark');
  assert.equal(leader.canJoin(3, [1, 2], 110n), true);
  assert.equal(leader.canJoin(3, [1, 2, 3], 110n), false, 'already in');
  assert.equal(leader.canJoin(4, [1, 2], 0n), false, 'not a replica');
});

test('a changed replica set keeps the progress of the followers that stay', () => {
  const leader = new LeaderState(1, 0n, [1, 2], 0);
  leader.followerFetched(2, 40n, 40n, 1);
  leader.setReplicas([1, 2, 3], 2);
  assert.equal(leader.followerLogEnd(2), 40n);
  assert.equal(leader.followerLogEnd(3), -1n);
  leader.setReplicas([1, 3], 3);
  assert.equal(leader.isFollower(2), false);
  assert.equal(leader.isFollower(3), true);
});

test('ending the leadership aborts its signal', () => {
  const leader = new LeaderState(1, 0n, [1], 0);
  assert.equal(leader.deposed.aborted, false);
  leader.end();
  assert.equal(leader.deposed.aborted, true);
});

test('each follower\'s lag behind the leader\'s log end and time since caught up; none known before its first fetch', () => {
  const state = new LeaderState(1, 0n, [1, 2, 3], 1000);
  state.followerFetched(2, 10n, 10n, 2000);
  state.followerFetched(2, 10n, 40n, 5000);
  assert.deepEqual(state.followerLags(40n, 6000), [
    { follower: 2, lagRecords: 30n, sinceCaughtUpMs: 4000 },
    { follower: 3, sinceCaughtUpMs: 5000 },
  ]);
});
