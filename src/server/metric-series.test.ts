import assert from 'node:assert/strict';
import { test } from 'node:test';
import { seriesFamily, writeSeries } from './metric-series.js';

interface Bucket {
  table: string;
  bucket: number;
  size?: number;
}

const family = (items: Bucket[], value: (b: Bucket) => number | undefined = (b) => b.size) =>
  seriesFamily<null, Bucket>({
    name: 'log_size_bytes',
    help: 'Bytes of a bucket\'s log \\ on disk.',
    labelNames: ['table', 'bucket'],
    items: () => items,
    labels: (b) => [b.table, String(b.bucket)],
    value,
  });

test('series are written in the text format: escaped label values, no line for an undefined value, special numbers', async () => {
  const items: Bucket[] = [
    { table: 'a"b', bucket: 0, size: 10 },
    { table: 'c\\d\ne', bucket: 1, size: 2.5 },
    { table: 'f', bucket: 2 },
    { table: 'ü', bucket: 3, size: Number.POSITIVE_INFINITY },
    { table: 'g', bucket: 4, size: Number.NaN },
  ];
  const appended = seriesFamily<null, Bucket>({ ...family([]), name: 'appended_total', help: 'Appends.', items: () => [{ table: 't', bucket: 0 }], value: () => 7 });
  const text = (await writeSeries('up 1\n', [family(items), family([]), appended], null)).toString('utf8');
  assert.equal(
    text,
    [
      'up 1',
      '# HELP log_size_bytes Bytes of a bucket\'s log \\\\ on disk.',
      '# TYPE log_size_bytes gauge',
      'log_size_bytes{table="a\\"b",bucket="0"} 10',
      'log_size_bytes{table="c\\\\d\\ne",bucket="1"} 2.5',
      'log_size_bytes{table="ü",bucket="3"} +Inf',
      'log_size_bytes{table="g",bucket="4"} NaN',
      // A family without series still says what it is.
      '# HELP log_size_bytes Bytes of a bucket\'s log \\\\ on disk.',
      '# TYPE log_size_bytes gauge',
      '# HELP appended_total Appends.',
      '# TYPE appended_total counter',
      'appended_total{table="t",bucket="0"} 7',
      '',
    ].join('\n'),
  );
});

test('a long scrape lets the event loop run between its slices', async () => {
  const items = Array.from({ length: 4000 }, (_, bucket): Bucket => ({ table: 't', bucket, size: bucket }));
  let turns = 0;
  const tick = (): void => {
    turns++;
    if (!done) setImmediate(tick);
  };
  let done = false;
  setImmediate(tick);
  // Each value takes about 5 µs: 20 ms in all, many slices of SLICE_MS.
  const busy = (b: Bucket): number => {
    const until = performance.now() + 0.005;
    while (performance.now() < until);
    return b.size!;
  };
  const text = (await writeSeries('', [family(items, busy)], null)).toString('utf8');
  done = true;
  assert.equal(text.split('\n').filter((l) => l.startsWith('log_size_bytes{')).length, 4000);
  assert.ok(turns >= 5, `the event loop turned ${turns} times while the scrape was written`);
});
