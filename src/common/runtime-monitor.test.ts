import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DurationWindow, type Pause, RuntimeMonitor } from './runtime-monitor.js';

test('duration window: count, sum, quantiles and maximum of what was recorded, then a new window', () => {
  const w = new DurationWindow();
  for (let i = 1; i <= 1000; i++) w.record(i / 10); // 0.1 ms … 100 ms
  const s = w.take();
  assert.equal(s.count, 1000);
  assert.ok(Math.abs(s.totalMs - 50_050) < 1e-6, String(s.totalMs));
  // The histogram keeps 3 significant digits.
  assert.ok(Math.abs(s.p50Ms - 50) < 0.1, String(s.p50Ms));
  assert.ok(Math.abs(s.p99Ms - 99) < 0.1, String(s.p99Ms));
  assert.ok(Math.abs(s.maxMs - 100) < 0.1, String(s.maxMs));
  assert.deepEqual(w.take(), { count: 0, totalMs: 0, p50Ms: 0, p99Ms: 0, p999Ms: 0, maxMs: 0 });
  w.record(0.0001);
  assert.equal(w.take().maxMs, 0.001, 'shorter than a microsecond counts as one');
});

test('runtime monitor: a synchronous stretch is reported as a stall starting where it began, with CPU used; GC pauses by kind', async () => {
  const pauses: Pause[] = [];
  const monitor = new RuntimeMonitor({ pauseThresholdMs: 30, onPause: (p) => pauses.push(p) });
  try {
    await new Promise((r) => setTimeout(r, 50));
    const blockedAt = performance.timeOrigin + performance.now();
    const until = performance.now() + 80;
    let garbage: object[] = [];
    while (performance.now() < until) {
      garbage.push({ at: performance.now() });
      if (garbage.length > 10_000) garbage = [];
    }
    await new Promise((r) => setTimeout(r, 50));
    const stalls = pauses.filter((p) => p.kind === 'stall');
    const stall = stalls.find((s) => s.ms >= 60 && s.startMs <= blockedAt + 10 && s.startMs >= blockedAt - 20);
    assert.ok(stall, JSON.stringify(pauses));
    assert.ok(stall.cpuMs! > 0, 'the process was busy meanwhile');
    const window = monitor.take();
    assert.ok(window.loopDelay.maxMs >= 60, `the loop delay saw it: ${JSON.stringify(window.loopDelay)}`);
    assert.ok(window.gc.minor.count >= 1, 'the garbage was collected');
    assert.equal(monitor.take().gc.minor.count, 0, 'a new window');
  } finally {
    monitor.close();
  }
});
