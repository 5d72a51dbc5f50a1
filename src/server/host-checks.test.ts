import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { testTempDir } from '../common/fixtures/temp-dirs.js';
import { DAMON_ADMIN_DIR, memoryMonitors, warnOfMemoryMonitors } from './host-checks.js';

/** A DAMON admin tree laid out as the kernel's sysfs lays it out, one monitor per entry. */
function damonTree(monitors: { state: string; pid: number; sampleUs: number[] }[]): string {
  const dir = testTempDir('damon');
  fs.writeFileSync(path.join(dir, 'nr_kdamonds'), `${monitors.length}\n`);
  monitors.forEach((m, k) => {
    const root = path.join(dir, String(k));
    fs.mkdirSync(path.join(root, 'contexts'), { recursive: true });
    fs.writeFileSync(path.join(root, 'state'), `${m.state}\n`);
    fs.writeFileSync(path.join(root, 'pid'), `${m.pid}\n`);
    fs.writeFileSync(path.join(root, 'contexts', 'nr_contexts'), `${m.sampleUs.length}\n`);
    m.sampleUs.forEach((us, c) => {
      const intervals = path.join(root, 'contexts', String(c), 'monitoring_attrs', 'intervals');
      fs.mkdirSync(intervals, { recursive: true });
      fs.writeFileSync(path.join(intervals, 'sample_us'), `${us}\n`);
      fs.writeFileSync(path.join(intervals, 'aggr_us'), `${us * 10}\n`);
    });
  });
  return dir;
}

describe('host checks: DAMON memory monitors', () => {
  it('lists the running monitors with their shortest sample interval, and skips stopped ones', () => {
    const dir = damonTree([
      { state: 'on', pid: 84, sampleUs: [500_000] },
      { state: 'off', pid: -1, sampleUs: [5_000] },
      { state: 'on', pid: 91, sampleUs: [100_000, 20_000] },
    ]);
    assert.deepEqual(memoryMonitors(dir), [
      { pid: 84, sampleMs: 500 },
      { pid: 91, sampleMs: 20 },
    ]);
  });

  it('finds none where the kernel has no DAMON, and none in a monitor without contexts', () => {
    assert.deepEqual(memoryMonitors(path.join(testTempDir('damon'), 'absent')), []);
    assert.deepEqual(memoryMonitors(damonTree([{ state: 'on', pid: 7, sampleUs: [] }])), []);
  });

  it('warns once per running monitor, naming its thread and interval', () => {
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => lines.push(JSON.parse(line)) });
    warnOfMemoryMonitors(log, damonTree([{ state: 'on', pid: 84, sampleUs: [500_000] }, { state: 'off', pid: -1, sampleUs: [500_000] }]));
    assert.equal(lines.length, 1);
    assert.equal(lines[0].level, 40);
    assert.equal(lines[0].kdamondPid, 84);
    assert.equal(lines[0].sampleMs, 500);
    assert.match(String(lines[0].msg), /DAMON memory monitor/);
  });

  it('reads this host the same way when it has DAMON', () => {
    // Every monitor found on a real host names a live kernel thread.
    for (const m of memoryMonitors(DAMON_ADMIN_DIR)) {
      assert.ok(m.sampleMs > 0);
      assert.match(fs.readFileSync(`/proc/${m.pid}/comm`, 'utf8'), /^kdamond/);
    }
  });
});
