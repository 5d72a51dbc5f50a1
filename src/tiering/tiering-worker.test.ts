import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MAX_RETRY_MS, retryDelayMs } from './tiering-worker.js';

test('failed heartbeats are retried after the poll interval, doubling up to a bound', () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 20, 1000].map((n) => retryDelayMs(n, 100)), [100, 200, 400, 800, 1600, 3200, 6400, MAX_RETRY_MS, MAX_RETRY_MS, MAX_RETRY_MS]);
  assert.equal(retryDelayMs(0, 250), 250);
  // A poll interval above the bound is kept: backing off never makes a worker ask sooner.
  assert.deepEqual([1, 2, 9].map((n) => retryDelayMs(n, 60_000)), [60_000, 60_000, 60_000]);
});
