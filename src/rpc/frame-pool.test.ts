import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FramePool, MIN_POOLED_FRAME, PoolLease } from './frame-pool.js';

test('a frame buffer given back is lent again for a frame of the same size class', () => {
  const pool = new FramePool(1 << 20);
  const first = pool.take(100_000);
  assert.equal(first.length, 100_000);
  assert.equal(first.buffer.byteLength, 131_072, 'sizes are powers of two');
  pool.give(first.subarray(10, 20)); // any view gives back the whole buffer
  assert.equal(pool.idleBytes, 131_072);
  const second = pool.take(70_000);
  assert.equal(second.buffer, first.buffer);
  assert.equal(pool.idleBytes, 0);
  const third = pool.take(70_000);
  assert.notEqual(third.buffer, first.buffer, 'a buffer still lent is not lent twice');
  assert.notEqual(pool.take(300_000).buffer.byteLength, 131_072);
});

test('the pool ignores what it did not lend, a buffer given twice, small frames and buffers over its idle limit', () => {
  const pool = new FramePool(200_000);
  pool.give(Buffer.allocUnsafeSlow(131_072));
  const small = pool.take(MIN_POOLED_FRAME - 1);
  assert.equal(small.length, MIN_POOLED_FRAME - 1);
  pool.give(small);
  assert.equal(pool.idleBytes, 0);

  const a = pool.take(MIN_POOLED_FRAME + 1);
  const b = pool.take(MIN_POOLED_FRAME + 1);
  pool.give(a);
  pool.give(a);
  assert.equal(pool.idleBytes, 131_072, 'given twice, counted once');
  pool.give(b);
  assert.equal(pool.idleBytes, 131_072, 'beyond the idle limit a buffer is left to the garbage collector');
  assert.equal(pool.take(MIN_POOLED_FRAME + 1).buffer, a.buffer);
  assert.notEqual(pool.take(MIN_POOLED_FRAME + 1).buffer, b.buffer);
});

test('a lease gives back every buffer it took at once, and none before', () => {
  const pool = new FramePool(1 << 20, 4096);
  const lease = new PoolLease(pool);
  const a = lease.take(5000);
  const b = lease.take(5000);
  lease.take(4095); // below the pool's smallest size: allocated as it is, not given back
  assert.equal(a.buffer.byteLength, 8192, 'pooled from the pool\'s smallest size');
  assert.notEqual(pool.take(5000).buffer, a.buffer, 'taken by a lease, not lent again before it gives back');
  lease.giveBack();
  assert.equal(pool.idleBytes, 16_384);
  const again = [pool.take(6000).buffer, pool.take(6000).buffer];
  assert.ok(again.includes(a.buffer) && again.includes(b.buffer));
  lease.giveBack();
  assert.equal(pool.idleBytes, 0, 'a lease gives back only what it took since');
});
