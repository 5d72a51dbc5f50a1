/**
 * The tiering worker that `tributary start` runs beside its node yields the CPU to it: its threads
 * run at datalake.tiering.embedded.nice (Linux keeps a nice value per thread), the node's at its own.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import { test } from 'node:test';
import { ServerProcess } from './support/server-process.js';

/** The nice value of each thread of process `pid`, by thread id (/proc/PID/task/TID/stat, field 19). */
function threadNices(pid: number): Map<number, number> {
  const nices = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces: state is field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    nices.set(Number(tid), Number(fields[19 - 3]));
  }
  return nices;
}

// Nice values are per thread on Linux only; a suite started niced would start its servers niced too.
const skip = process.platform !== 'linux' ? 'nice values are per thread on Linux only' : os.getPriority() !== 0 ? 'the suite runs at a nice value of its own' : false;

for (const nice of [undefined, 15, 0]) {
  const expected = nice ?? 10;
  test(`the embedded tiering thread runs at nice ${expected}${nice === undefined ? ' (the default)' : ''}, the node's main thread at 0`, { skip, timeout: 60_000 }, async () => {
    const server = await ServerProcess.start(nice === undefined ? {} : { settings: { 'datalake.tiering.embedded.nice': String(nice) } });
    try {
      const pid = server.child.pid!;
      const nices = threadNices(pid);
      assert.equal(nices.get(pid), 0, 'the main thread keeps its priority');
      const lowered = [...nices.values()].filter((n) => n !== 0);
      if (expected === 0) assert.deepEqual(lowered, []);
      else assert.ok(lowered.length >= 1 && lowered.every((n) => n === expected), `thread nices: ${JSON.stringify([...nices])}`);
    } finally {
      await server.stopAndRemove();
    }
  });
}

test('a nice value outside 0–19 fails the start with a named error', { timeout: 60_000 }, async () => {
  await assert.rejects(ServerProcess.start({ settings: { 'datalake.tiering.embedded.nice': '20' } }), /INVALID_CONFIG_EXCEPTION: .*datalake.tiering.embedded.nice.*at most 19/);
});
