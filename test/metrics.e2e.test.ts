/**
 * `GET /metrics` of a real server process: every line in the Prometheus text exposition format,
 * the bucket offsets, sizes and state rows equal to what was written, the tiering lag of a
 * lake-enabled table that no worker tiers, and RPC requests counted by API and error.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { TributaryError } from '../src/client/index.js';
import { useCluster } from './support/cluster.js';

const cluster = useCluster({ args: ['--no-tiering'] });

/** A sample line: name, optional {labels}, a value (the format's timestamps are not used). */
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+|NaN|[+-]Inf)$/;
const COMMENT = /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$/;

interface Scrape {
  contentType: string;
  /** Value by `name{labels}` as written. */
  samples: Map<string, number>;
  types: Map<string, string>;
}

async function scrape(): Promise<Scrape> {
  const res = await fetch(`http://${cluster.server.http}/metrics`);
  assert.equal(res.status, 200);
  const text = await res.text();
  const samples = new Map<string, number>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      assert.match(line, COMMENT);
      const [, kind, name, rest] = line.split(' ');
      if (kind === 'TYPE') types.set(name, rest);
      continue;
    }
    const m = SAMPLE.exec(line);
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    samples.set(`${m[1]}${m[2] ?? ''}`, Number(m[3]));
  }
  return { contentType: res.headers.get('content-type') ?? '', samples, types };
}

/** Samples of `name`, by their label set. */
function series(s: Scrape, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [key, value] of s.samples) if (key === name || key.startsWith(`${name}{`)) out.set(key.slice(name.length), value);
  return out;
}

const sum = (m: Map<string, number>, labelPart: string): number => [...m].filter(([k]) => k.includes(labelPart)).reduce((n, [, v]) => n + v, 0);

test('metrics: bucket offsets, sizes, state rows, tiering lag and RPC counts', async () => {
  const admin = cluster.conn.getAdmin();
  const events = { database: 'tributary', table: 'events' };
  await admin.createTable(events, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'day', type: 'STRING' }],
    partitionKeys: ['day'],
    properties: { 'bucket.num': '2', 'bucket.key': 'id' },
  });
  const writer = await (await cluster.conn.getTable(events)).newAppend().createWriter();
  for (let i = 0; i < 30; i++) await writer.append({ id: BigInt(i), day: i < 10 ? 'mon' : 'tue' });
  await writer.flush();
  await writer.close();

  const users = { database: 'tributary', table: 'users' };
  await admin.createTable(users, {
    columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }],
    primaryKey: ['id'],
    properties: { 'table.datalake.enabled': 'true' },
  });
  const upserts = await (await cluster.conn.getTable(users)).newUpsert().createWriter();
  for (let i = 0; i < 5; i++) await upserts.upsert({ id: BigInt(i), name: `u${i}` });
  await upserts.flush();
  await upserts.upsert({ id: 0n, name: 'again' });
  await upserts.delete({ id: 4n });
  await upserts.flush();
  await upserts.close();
  await assert.rejects(admin.getTableInfo({ database: 'tributary', table: 'missing' }), (e: TributaryError) => e.errorName === 'TABLE_NOT_EXIST');

  const s = await scrape();
  assert.match(s.contentType, /^text\/plain; version=0\.0\.4/);
  assert.equal(s.samples.get('tributary_tables'), 2);
  assert.equal(s.samples.get('tributary_partitions'), 2);

  const end = series(s, 'tributary_log_end_offset');
  const hw = series(s, 'tributary_log_high_watermark');
  assert.equal(sum(end, 'table="events",partition="mon"'), 10, 'every row appended to monday is counted once');
  assert.equal(sum(end, 'table="events",partition="tue"'), 20);
  // The changelog: 5 × +I, then -U +U for the update and -D for the delete.
  assert.equal(sum(end, 'table="users"'), 8);
  assert.deepEqual(hw, end, 'everything acknowledged is below the high watermark');
  assert.equal(sum(series(s, 'tributary_log_start_offset'), ''), 0);
  for (const [labels, bytes] of series(s, 'tributary_log_size_bytes')) assert.equal(bytes > 0, (end.get(labels) ?? 0) > 0, labels);
  assert.deepEqual([...series(s, 'tributary_kv_rows')], [['{database="tributary",table="users",partition="",bucket="0"}', 4]]);

  assert.deepEqual([...series(s, 'tributary_lake_tiering_lag_records')], [['{database="tributary",table="users"}', 8]], 'no worker tiers: the whole changelog is behind');
  assert.ok(s.samples.get('tributary_lake_tiering_lag_seconds{database="tributary",table="users"}')! > 0);
  assert.equal(s.samples.has('tributary_lake_snapshot_timestamp_seconds{database="tributary",table="users"}'), false, 'no snapshot yet');

  assert.ok(s.samples.get('tributary_rpc_requests_total{api="ProduceLog"}')! >= 1);
  assert.ok(s.samples.get('tributary_rpc_requests_total{api="PutKv"}')! >= 2);
  assert.equal(s.samples.get('tributary_rpc_request_errors_total{api="GetTableInfo",error="TABLE_NOT_EXIST"}'), 1);
  assert.equal(s.types.get('tributary_rpc_request_duration_seconds'), 'histogram');
  // Every count of ours since the start is typed a counter, whoever writes it.
  const totals = [...s.types].filter(([name]) => name.startsWith('tributary_') && name.endsWith('_total'));
  assert.ok(totals.length > 10);
  for (const [name, type] of totals) assert.equal(type, 'counter', `${name} is a ${type}`);
  assert.ok(s.samples.get('tributary_rpc_request_duration_seconds_count{api="ProduceLog"}')! >= 1);
  assert.ok(s.samples.get('tributary_rpc_connections')! >= 1);
  assert.ok(s.samples.has('process_cpu_user_seconds_total'), "the process's own metrics");

  // Runtime pauses and the log's fsyncs: quantiles in order, counts and sums that only grow.
  const quantilesInOrder = (name: string, labels = ''): void => {
    const q = (quantile: string): number => s.samples.get(`${name}{${labels}${labels ? ',' : ''}quantile="${quantile}"}`)!;
    const values = ['0.5', '0.99', '0.999', '1'].map(q);
    assert.ok(values.every((v) => Number.isFinite(v) && v >= 0), `${name}{${labels}}: ${values}`);
    assert.deepEqual([...values].sort((a, b) => a - b), values, `${name}{${labels}} quantiles ascend`);
  };
  quantilesInOrder('tributary_event_loop_delay_seconds');
  assert.ok(s.samples.get('tributary_event_loop_delay_seconds{quantile="1"}')! > 0, 'the event loop is sampled');
  quantilesInOrder('tributary_log_flush_seconds');
  assert.ok(s.samples.get('tributary_log_flush_seconds_count')! >= 1, 'acknowledged writes were fsynced');
  assert.ok(s.samples.get('tributary_log_flush_seconds_sum')! > 0);
  for (const kind of ['minor', 'major', 'incremental', 'weakcb']) {
    quantilesInOrder('tributary_gc_pause_seconds', `kind="${kind}"`);
    assert.ok(s.samples.get(`tributary_gc_pause_seconds_count{kind="${kind}"}`)! >= 0, kind);
  }
  for (const labels of series(s, 'tributary_background_task_seconds_count').keys()) quantilesInOrder('tributary_background_task_seconds', labels.slice(1, -1));

  // A scrape starts a new window: counters keep counting, the next window's quantiles cover only it.
  const flushes = s.samples.get('tributary_log_flush_seconds_count')!;
  await (await cluster.conn.getTable(events)).newAppend().createWriter().then(async (w) => {
    await w.append({ id: 100n, day: 'mon' });
    await w.close();
  });
  const next = await scrape();
  assert.ok(next.samples.get('tributary_log_flush_seconds_count')! > flushes);
});
