import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { ServerActivity } from './activity.js';
import { createLogger } from './logger.js';

async function until(condition: () => boolean): Promise<void> {
  while (!condition()) await sleep(1);
}

/** Two tasks due every 2 ms, the first one's first run held until released; what each did. */
async function twoTasks(lane: string | undefined): Promise<{ log: string[]; bDuringA: number; aRuns: number; release: () => Promise<void> }> {
  const activity = new ServerActivity(createLogger('silent'));
  const log: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let aRuns = 0;
  let bRuns = 0;
  const timers = [
    activity.every('a', 2, async () => {
      aRuns++;
      log.push('a start');
      if (aRuns === 1) await held;
      log.push('a end');
    }, lane),
    activity.every('b', 2, () => {
      bRuns++;
      log.push('b start', 'b end');
    }, lane),
  ];
  await until(() => aRuns === 1);
  // Many turns of both come due while a's first run is held.
  await sleep(40);
  const bDuringA = bRuns;
  const aWhileHeld = aRuns;
  return {
    log,
    bDuringA,
    aRuns: aWhileHeld,
    release: async () => {
      release();
      await until(() => bRuns > bDuringA && aRuns > 1);
      timers.forEach(clearInterval);
      activity.close();
    },
  };
}

test('tasks of one lane run one at a time, and a task whose run is still due skips its turn', async () => {
  const run = await twoTasks('disk');
  assert.equal(run.bDuringA, 0, 'b waits while a runs');
  assert.equal(run.aRuns, 1, 'a does not start again while its run is held');
  await run.release();
  // Every start is followed by its own end before anything else starts.
  for (let i = 0; i < run.log.length; i += 2) assert.equal(run.log[i + 1], run.log[i].replace('start', 'end'), run.log.join(', '));
});

test('tasks without a lane run beside each other', async () => {
  const run = await twoTasks(undefined);
  assert.ok(run.bDuringA > 0, 'b ran while a was held');
  assert.ok(run.aRuns > 1, 'a started again while its first run was held');
  await run.release();
});
