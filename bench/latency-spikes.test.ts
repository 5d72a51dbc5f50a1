/** The spike report of bench/latency.ts: which latencies count as separate spikes and which events are listed with them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { describeSpikes, eventsAround, tailCauses, type TimedEvent, worstSpikes } from './latency-spikes.js';

const T0 = 1_700_000_000_000;

test('worst spikes: one per stall, worst first, at least the separation apart', () => {
  const sent: number[] = [];
  const latency: number[] = [];
  // A row every ms for 2 s at 5 ms; a stall at 500 ms delays 20 rows (worst 90 ms), a smaller one at 1500 ms.
  for (let i = 0; i < 2000; i++) {
    sent.push(T0 + i);
    latency.push(i >= 500 && i < 520 ? 90 - (i - 500) : i >= 1500 && i < 1505 ? 30 : 5);
  }
  const spikes = worstSpikes(Float64Array.from(sent), Float64Array.from(latency), 3, 100);
  assert.deepEqual(spikes.slice(0, 2), [
    { sentMs: T0 + 500, latencyMs: 90 },
    { sentMs: T0 + 1500, latencyMs: 30 },
  ]);
  assert.equal(spikes.length, 3);
  assert.equal(spikes[2].latencyMs, 5, 'then the ordinary rows');
  for (const a of spikes) for (const b of spikes) if (a !== b) assert.ok(Math.abs(a.sentMs - b.sentMs) >= 100);
  // Neighbouring stretches: the second worst row sits next to the worst, in another bin.
  const close = worstSpikes(Float64Array.from([T0 + 99, T0 + 101, T0 + 400]), Float64Array.from([50, 49, 10]), 2, 100);
  assert.deepEqual(close, [
    { sentMs: T0 + 99, latencyMs: 50 },
    { sentMs: T0 + 400, latencyMs: 10 },
  ]);
  assert.deepEqual(worstSpikes(new Float64Array(0), new Float64Array(0), 5, 100), []);
});

test('events around a spike: those overlapping its flight widened by the margin, in start order', () => {
  const spike = { sentMs: T0 + 1000, latencyMs: 100 };
  const events: TimedEvent[] = [
    { who: 'server', what: 'task log-checkpoint', startMs: T0 + 1120, ms: 5 }, // within the margin after arrival
    { who: 'server', what: 'gc major', startMs: T0 + 1010, ms: 60 },
    { who: 'consumer', what: 'stall', startMs: T0 + 900, ms: 60 }, // ends 40 ms before the send: inside the margin
    { who: 'producer', what: 'gc minor', startMs: T0 + 800, ms: 10 }, // long before
    { who: 'server', what: 'fsync', startMs: T0 + 1151, ms: 3 }, // after arrival + margin
  ];
  assert.deepEqual(
    eventsAround(spike, events, 50).map((e) => e.what),
    ['stall', 'gc major', 'task log-checkpoint'],
  );
  assert.deepEqual(describeSpikes([spike], events, 50, T0, 3), [
    '+1.000 s  100.0 ms: consumer stall 60.0 ms at -100.0 ms; server gc major 60.0 ms at +10.0 ms; server task log-checkpoint 5.0 ms at +120.0 ms',
  ]);
  assert.deepEqual(describeSpikes([spike], events, 50, T0, 2), ['+1.000 s  100.0 ms: consumer stall 60.0 ms at -100.0 ms; server gc major 60.0 ms at +10.0 ms (+1 shorter)'], 'the longest, in start order');
  assert.deepEqual(describeSpikes([{ sentMs: T0 + 5000, latencyMs: 7 }], events, 50, T0, 3), ['+5.000 s  7.0 ms: nothing recorded']);
});

test('tail causes: the rows over the threshold counted by the kinds of event their flight overlapped', () => {
  // Rows sent every ms at 5 ms; rows 100-109 at 20 ms, rows 200-204 at 30 ms, row 300 at 15 ms.
  const sent: number[] = [];
  const latency: number[] = [];
  for (let i = 0; i < 400; i++) {
    sent.push(T0 + i);
    latency.push(i >= 100 && i < 110 ? 20 : i >= 200 && i < 205 ? 30 : i === 300 ? 15 : 5);
  }
  const events: TimedEvent[] = [
    { who: 'server', what: 'fsync', kind: 'fsync', startMs: T0 + 105, ms: 12 }, // rows 100-109 are in flight during it
    { who: 'server', what: 'fsync', kind: 'fsync', startMs: T0 + 60, ms: 80 }, // a long one, started before: rows 100-109 again
    { who: 'consumer', what: 'gc minor', kind: 'gc minor', startMs: T0 + 228, ms: 3 }, // rows 200-204 arrive at 230-234
    { who: 'server', what: 'event-loop stall (cpu 2 ms)', kind: 'stall', startMs: T0 + 203, ms: 1 }, // rows 200-204 are all in flight at 203
    { who: 'producer', what: 'gc minor', kind: 'gc minor', startMs: T0 + 50, ms: 2 }, // no slow row in flight
  ];
  const tail = tailCauses(Float64Array.from(sent), Float64Array.from(latency), 10, events);
  assert.equal(tail.rows, 16);
  assert.deepEqual(tail.causes, [
    { cause: 'server fsync', rows: 10 },
    { cause: 'consumer gc minor', rows: 5 },
    { cause: 'server stall', rows: 5 },
  ]);
  assert.equal(tail.unexplained, 1, 'row 300 overlapped nothing');
  assert.deepEqual(tailCauses(Float64Array.from(sent), Float64Array.from(latency), 100, events), { rows: 0, causes: [], unexplained: 0 });
});
