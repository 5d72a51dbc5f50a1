import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type ProgressOutput, ProgressLine } from './progress.js';

/** A terminal (or not) that keeps what is written to it, and a clock the test moves. */
function setup(isTTY: boolean, enabled?: boolean) {
  const written: string[] = [];
  const out: ProgressOutput = { isTTY, columns: 60, write: (text: string) => written.push(text) };
  let now = 0;
  const line = new ProgressLine(out, { ...(enabled !== undefined ? { enabled } : {}), now: () => now });
  return { line, written, advance: (ms: number) => (now += ms) };
}

test('on a terminal: rows, rate and elapsed time once the work runs past the delay, at most 4 times a second, erased at the end', () => {
  const { line, written, advance } = setup(true);
  line.start();
  advance(400);
  line.update('reading db.s', 500);
  advance(100);
  line.update('writing db.t', 1000, 3000);
  assert.deepEqual(written, [], 'quick work shows nothing');
  advance(500);
  line.update('writing db.t', 2000, 3000);
  // The rate counts from the write's first report, half a second ago.
  assert.deepEqual(written, ['\r\x1b[Kwriting db.t: 2,000 of 3,000 rows, 4,000 rows/s, 1.0 s']);
  advance(100);
  line.update('writing db.t', 2100, 3000);
  assert.equal(written.length, 1, 'throttled');
  advance(150);
  line.update('reading db.u', 2500);
  assert.equal(written[1], '\r\x1b[Kreading db.u: 2,500 rows, 1.3 s', 'no rate at the first report of new work');
  line.end();
  assert.equal(written[2], '\r\x1b[K');
  line.end();
  assert.equal(written.length, 3, 'erased once');
});

test('a line longer than the terminal is cut to its width', () => {
  const { line, written, advance } = setup(true);
  advance(2000);
  line.update(`reading ${'x'.repeat(100)}`, 1);
  assert.equal(written[0].length, '\r\x1b[K'.length + 59);
  // A terminal that reports no width gets 80 columns.
  const wide = { isTTY: true, columns: 0, text: '', write(text: string) { this.text = text; } };
  const unknown = new ProgressLine(wide, { delayMs: 0, now: () => 0 });
  unknown.update(`reading ${'x'.repeat(100)}`, 1);
  assert.equal(wide.text.length, '\r\x1b[K'.length + 79);
});

test('nothing is written when the stream is not a terminal, or with --no-progress', () => {
  for (const [isTTY, enabled] of [
    [false, undefined],
    [true, false],
  ] as const) {
    const { line, written, advance } = setup(isTTY, enabled);
    assert.equal(line.enabled, false);
    line.start();
    advance(5000);
    line.update('writing db.t', 10);
    line.end();
    assert.deepEqual(written, []);
  }
});
