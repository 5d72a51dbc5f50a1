/** The deadlines both listeners close connections by, as a sweep sees them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DeadlineWatch, sweepIntervalMs } from './connection-deadlines.js';

const LIMITS = { frameTimeoutMs: 1000, idleTimeoutMs: 5000 };
const idle = { framesRead: 0, partialBytes: 0, heldBytes: 0 };

test('a frame under way is timed from the first sweep that sees it; a later frame starts its own clock', () => {
  const watch = new DeadlineWatch();
  const t0 = Date.now();
  assert.equal(watch.check(t0, { framesRead: 0, partialBytes: 10, heldBytes: 10 }, LIMITS), undefined);
  assert.equal(watch.check(t0 + 999, { framesRead: 0, partialBytes: 500, heldBytes: 500 }, LIMITS), undefined, 'bytes arriving do not extend a frame');
  // The frame completed and the next one is under way: a new clock.
  assert.equal(watch.check(t0 + 1500, { framesRead: 1, partialBytes: 20, heldBytes: 520 }, LIMITS), undefined);
  assert.equal(watch.check(t0 + 2400, { framesRead: 1, partialBytes: 20, heldBytes: 520 }, LIMITS), undefined);
  assert.deepEqual(watch.check(t0 + 2500, { framesRead: 1, partialBytes: 20, heldBytes: 520 }, LIMITS), {
    deadline: 'frame-timeout',
    reason: 'request frame incomplete after 1000 ms, 20 bytes received',
  });
});

test('idle: nothing heard and nothing held for the idle timeout; held bytes (a request waiting for its answer) or activity keep it open', () => {
  const watch = new DeadlineWatch();
  const t0 = Date.now();
  assert.equal(watch.check(t0 + 4999, idle, LIMITS), undefined);
  assert.equal(watch.check(t0 + 6000, { ...idle, heldBytes: 100 }, LIMITS), undefined, 'a long poll holds its bytes');
  watch.touch();
  assert.equal(watch.check(t0 + 7000, idle, LIMITS), undefined, 'heard since the last sweep: active now');
  assert.equal(watch.check(t0 + 11_999, idle, LIMITS), undefined);
  assert.deepEqual(watch.check(t0 + 12_000, idle, LIMITS), { deadline: 'idle', reason: 'no request for 5000 ms' });
});

test('the sweep runs four times per shortest deadline, at most once a second and at least every millisecond', () => {
  assert.equal(sweepIntervalMs({ frameTimeoutMs: 30_000, idleTimeoutMs: 600_000 }), 1000);
  assert.equal(sweepIntervalMs({ frameTimeoutMs: 300, idleTimeoutMs: 600_000 }), 75);
  assert.equal(sweepIntervalMs({ frameTimeoutMs: 2, idleTimeoutMs: 1 }), 1);
});
