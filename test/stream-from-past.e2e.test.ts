/**
 * Streaming from the past, end to end with a real server and its embedded tiering worker: once
 * retention has dropped the log segments the lake holds, a LogScanner from `earliest` (or from an
 * offset inside the lake part) yields every row exactly once, in offset order per bucket, reading
 * the lake and then the log; `tributary tail --from earliest` prints the same records, and a
 * streaming query's first result holds them too. A primary-key table reads as the lake's state
 * (+I, equality deletes applied) followed by the changelog, which folded is the current state.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import type { BucketRef, ScanRecord, TablePath } from '../src/client/index.js';
import { startCluster } from './support/cluster.js';
import { CLI_ARGS } from './support/server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const LAKE_OPTIONS = { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '500ms', 'table.log.ttl': '1s' };
const EVENTS: TablePath = { database: 'tributary', table: 'events' };
const CLICKS: TablePath = { database: 'tributary', table: 'clicks' };
const BUCKETS = [0, 1];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `<partition>/<bucket>` or `<bucket>`, as LogScanner.positions() names buckets. */
const label = (partition: string | undefined, bucket: number) => (partition === undefined ? String(bucket) : `${partition}/${bucket}`);

/** Polls until every ref's position reaches its end; returns the records by bucket label. */
async function readUntil(scanner: { poll(ms: number): Promise<ScanRecord[]>; positions(): Map<string, bigint> }, ends: Map<string, bigint>): Promise<Map<string, ScanRecord[]>> {
  const got = new Map<string, ScanRecord[]>([...ends.keys()].map((k) => [k, []]));
  const deadline = Date.now() + 120_000;
  while ([...scanner.positions()].some(([k, p]) => p < ends.get(k)!)) {
    assert.ok(Date.now() < deadline, 'the scanner reaches the high watermark');
    for (const r of await scanner.poll(1000)) got.get(label(r.partition, r.bucket))!.push(r);
  }
  return got;
}

test('a scanner from earliest reads the lake, then the log: every row once, in offset order per bucket', { timeout: 300_000 }, async (t) => {
  const { server, conn, sql } = await startCluster(t, { settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms' }, sql: 'tributary' });
  const admin = conn.getAdmin();
  // A keyless log table (lake partitions by __bucket) and a partitioned one bucketed by key (bucket[2]).
  await admin.createTable(EVENTS, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'note', type: 'STRING' }, { name: 'small', type: 'SMALLINT' }], bucketCount: 2, properties: LAKE_OPTIONS });
  await admin.createTable(CLICKS, {
    columns: [{ name: 'region', type: 'STRING', nullable: false }, { name: 'id', type: 'BIGINT', nullable: false }, { name: 'payload', type: 'STRING' }],
    partitionKeys: ['region'],
    bucketCount: 2,
    bucketKeys: ['id'],
    properties: LAKE_OPTIONS,
  });
  const events = await (await conn.getTable(EVENTS)).newAppend().createWriter();
  const clicks = await (await conn.getTable(CLICKS)).newAppend().createWriter();
  let id = 0n;
  const write = async (batches: number): Promise<void> => {
    for (let batch = 0; batch < batches; batch++) {
      for (let i = 0; i < 25; i++, id++) {
        await events.append({ id, note: `note-${id}`, small: Number(id % 300n) - 150 });
        await clicks.append({ region: id % 3n === 0n ? 'eu' : 'us', id, payload: 'p'.repeat(30) });
      }
      await events.flush();
      await clicks.flush();
    }
  };
  await write(16);

  // Wait until retention has dropped segments the lake holds, in every bucket of every table.
  const logStarts = async (p: TablePath, partition?: string) => [...(await admin.listOffsets(p, BUCKETS, 'earliest', partition)).values()];
  const deadline = Date.now() + 120_000;
  while (!(await logStarts(EVENTS)).every((o) => o > 0n) || !(await logStarts(CLICKS, 'eu')).every((o) => o > 0n) || !(await logStarts(CLICKS, 'us')).every((o) => o > 0n)) {
    assert.ok(Date.now() < deadline, `retention drops tiered segments: ${server.stderr}`);
    await sleep(200);
  }
  // More rows after that: some only in the log when they are read.
  await write(4);
  const total = id;

  // --- events: from earliest, every bucket -----------------------------------------------
  const eventStarts = await logStarts(EVENTS);
  const eventEnds = await admin.listOffsets(EVENTS, BUCKETS, 'latest');
  const scanner = (await conn.getTable(EVENTS)).newScan().createLogScanner();
  for (const b of BUCKETS) await scanner.subscribe(b, 'earliest');
  const got = await readUntil(scanner, new Map(BUCKETS.map((b) => [String(b), eventEnds.get(b)!])));
  scanner.close();
  const ids: bigint[] = [];
  for (const b of BUCKETS) {
    const records = got.get(String(b))!;
    // A log table has one row per offset: 0, 1, ..., high watermark - 1, none twice, none missing.
    assert.deepEqual(records.map((r) => r.offset), Array.from({ length: Number(eventEnds.get(b)!) }, (_, i) => BigInt(i)), `bucket ${b} offsets`);
    assert.ok(records.some((r) => r.offset < eventStarts[b]), `bucket ${b} read rows below the log start ${eventStarts[b]}, from the lake`);
    for (const r of records) {
      assert.equal(r.changeType, '+A');
      assert.equal(r.row.note, `note-${r.row.id}`);
      assert.equal(r.row.small, Number((r.row.id as bigint) % 300n) - 150);
      assert.ok(r.timestamp > 0);
      ids.push(r.row.id as bigint);
    }
  }
  assert.deepEqual(ids.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), Array.from({ length: Number(total) }, (_, i) => BigInt(i)), 'every row once');
  // Within a bucket rows come in the order they were written.
  for (const b of BUCKETS) {
    const bucketIds = got.get(String(b))!.map((r) => r.row.id as bigint);
    assert.ok(bucketIds.every((x, i) => i === 0 || x > bucketIds[i - 1]), `bucket ${b} in write order`);
  }

  // --- events: from an offset in the middle of the lake part ---------------------------------
  const middle = eventStarts[0] / 2n;
  const fromMiddle = (await conn.getTable(EVENTS)).newScan().project(['id']).createLogScanner();
  await fromMiddle.subscribe(0, middle);
  const tailOf0 = (await readUntil(fromMiddle, new Map([['0', eventEnds.get(0)!]]))).get('0')!;
  fromMiddle.close();
  assert.deepEqual(tailOf0.map((r) => r.offset), got.get('0')!.slice(Number(middle)).map((r) => r.offset));
  assert.deepEqual(tailOf0.map((r) => r.row), got.get('0')!.slice(Number(middle)).map((r) => ({ id: r.row.id })));

  // A log-only scanner still refuses offsets below the log start.
  const logOnly = (await conn.getTable(EVENTS)).newScan().logOnly().createLogScanner();
  await logOnly.subscribe(0, 0n);
  await assert.rejects(logOnly.poll(5000), { errorName: 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION' });
  logOnly.close();

  // --- clicks: partitioned, every partition and bucket from earliest --------------------------
  const clickEnds = new Map<string, bigint>();
  const clickScanner = (await conn.getTable(CLICKS)).newScan().createLogScanner();
  for (const region of ['eu', 'us']) {
    for (const [b, end] of await admin.listOffsets(CLICKS, BUCKETS, 'latest', region)) clickEnds.set(label(region, b), end);
    for (const b of BUCKETS) await clickScanner.subscribe({ partition: region, bucket: b } satisfies BucketRef, 'earliest');
  }
  const clicked = await readUntil(clickScanner, clickEnds);
  clickScanner.close();
  const clickIds: bigint[] = [];
  for (const [key, records] of clicked) {
    assert.deepEqual(records.map((r) => r.offset), Array.from({ length: Number(clickEnds.get(key)!) }, (_, i) => BigInt(i)), `${key} offsets`);
    for (const r of records) {
      assert.equal(r.row.region, key.split('/')[0]);
      clickIds.push(r.row.id as bigint);
    }
  }
  assert.deepEqual(clickIds.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), Array.from({ length: Number(total) }, (_, i) => BigInt(i)), 'every click once');

  // --- tributary tail --from earliest ----------------------------------------------------------
  const child = spawn(process.execPath, [...CLI_ARGS, 'tail', 'events', '--from', 'earliest', '--format', 'json', '--bootstrap', server.bootstrap], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines: { op: string; bucket: number; offset: number; timestamp: string; row: { id: number; note: string } }[] = [];
  const reader = readline.createInterface({ input: child.stdout! });
  const tailDeadline = Date.now() + 120_000;
  for await (const line of reader) {
    lines.push(JSON.parse(line));
    if (lines.length === Number(total)) break;
    assert.ok(Date.now() < tailDeadline, `tail prints every record: ${stderr}`);
  }
  child.kill('SIGINT');
  assert.equal(await exited, 0, `tail stops cleanly on Ctrl-C: ${stderr}`);
  for (const b of BUCKETS) {
    const printed = lines.filter((l) => l.bucket === b);
    assert.deepEqual(printed.map((l) => BigInt(l.offset)), got.get(String(b))!.map((r) => r.offset), `tail bucket ${b}`);
    assert.deepEqual(printed.map((l) => BigInt(l.row.id)), got.get(String(b))!.map((r) => r.row.id));
    assert.ok(printed.every((l) => l.op === '+A' && !Number.isNaN(Date.parse(l.timestamp))));
  }

  // --- a streaming query's first result reads the lake too --------------------------------
  const out = await sql.execute('SELECT id FROM events WHERE id % 2 = 0 EMIT CHANGES');
  const evens = out.result!.rows.map((r) => r[0] as bigint).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  assert.deepEqual(evens, Array.from({ length: Number(total) }, (_, i) => BigInt(i)).filter((i) => i % 2n === 0n));
  await out.changes![Symbol.asyncIterator]().return?.();
});

test('primary-key table: the lake’s state as +I, then the changelog: folded, the current state', { timeout: 300_000 }, async (t) => {
  const { server, conn } = await startCluster(t, { settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms', 'kv.snapshot.interval': '500ms' } });
  const admin = conn.getAdmin();
  const ACCOUNTS: TablePath = { database: 'tributary', table: 'accounts' };
  await admin.createTable(ACCOUNTS, { columns: [{ name: 'k', type: 'INT' }, { name: 'v', type: 'STRING' }], primaryKey: ['k'], bucketCount: 2, properties: { ...LAKE_OPTIONS, 'table.datalake.freshness': '2s' } });
  const writer = await (await conn.getTable(ACCOUNTS)).newUpsert().createWriter();
  const state = new Map<number, string>();
  let step = 0;
  const write = async (rounds: number): Promise<void> => {
    // Keys 0..149, upserted and deleted in turn.
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < 40; i++, step++) {
        const k = (step * 37) % 150;
        if (step % 7 === 6) {
          await writer.delete({ k });
          state.delete(k);
        } else {
          await writer.upsert({ k, v: `v${step}-${'x'.repeat(20)}` });
          state.set(k, `v${step}-${'x'.repeat(20)}`);
        }
      }
      await writer.flush();
    }
  };
  await write(15);
  const deadline = Date.now() + 120_000;
  const caughtUp = async () => (await admin.getLakeTieringStatus(ACCOUNTS)).buckets.every((b) => b.recordsBehind === 0n);
  while (!(await caughtUp())) {
    assert.ok(Date.now() < deadline, `tiering catches up: ${server.stderr}`);
    await sleep(200);
  }
  // In a later round: keys whose last change is a delete, and updates (equality deletes in the lake).
  for (let k = 0; k < 30; k++) {
    await writer.delete({ k });
    state.delete(k);
    await writer.upsert({ k: k + 30, v: `last${k}` });
    state.set(k + 30, `last${k}`);
  }
  await writer.flush();
  while (![...(await admin.listOffsets(ACCOUNTS, BUCKETS, 'earliest')).values()].every((o) => o > 0n) || !(await caughtUp())) {
    assert.ok(Date.now() < deadline, `retention drops tiered changelog segments: ${server.stderr}`);
    await sleep(200);
  }
  // Then changes only in the log, of other keys.
  for (let k = 100; k < 150; k++) {
    await writer.upsert({ k, v: `log${k}` });
    state.set(k, `log${k}`);
  }
  await writer.flush();
  const logStarts = await admin.listOffsets(ACCOUNTS, BUCKETS, 'earliest');
  const ends = await admin.listOffsets(ACCOUNTS, BUCKETS, 'latest');
  const scanner = (await conn.getTable(ACCOUNTS)).newScan().createLogScanner();
  for (const b of BUCKETS) await scanner.subscribe(b, 'earliest');
  const got = await readUntil(scanner, new Map(BUCKETS.map((b) => [String(b), ends.get(b)!])));
  scanner.close();
  const folded = new Map<number, string>();
  for (const b of BUCKETS) {
    const records = got.get(String(b))!;
    assert.ok(records.every((r, i) => i === 0 || r.offset > records[i - 1].offset), `bucket ${b}: offsets increase`);
    const fromLake = records.filter((r) => r.offset < logStarts.get(b)!);
    assert.ok(fromLake.length > 0 && fromLake.every((r) => r.changeType === '+I'), `bucket ${b}: the lake part is state, as +I`);
    for (const r of records) {
      if (r.changeType === '+I' || r.changeType === '+U') folded.set(r.row.k as number, r.row.v as string);
      else if (r.changeType === '-D') folded.delete(r.row.k as number);
    }
  }
  assert.deepEqual(new Map([...folded].sort((a, b) => a[0] - b[0])), new Map([...state].sort((a, b) => a[0] - b[0])));
});
