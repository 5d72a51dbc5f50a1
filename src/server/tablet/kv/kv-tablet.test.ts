import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { pino } from 'pino';
import { CompactedKeyEncoder } from '../../../common/key-encoder.js';
import { TributaryError } from '../../../common/errors.js';
import { CompactedRowEncoder, KvValueDecoder, readKvValue } from '../../../common/row-encoder.js';
import { addColumns, buildSchema, type Schema, type TableInfo } from '../../../common/schema.js';
import { encodeChangelogPayload } from '../../../record/changelog.js';
import { ColumnBatchBuilder } from '../../../record/column-batch-builder.js';
import { initArrowCompression } from '../../../record/compression.js';
import { buildKvBatch } from '../../../record/kv-batch.js';
import { logBatchesOf, logBatchPayload, readLogBatchHeader, splitLogBatches } from '../../../record/log-batch.js';
import { type LogConfig, LogTablet } from '../log/log-tablet.js';
import { KvSnapshotStore } from './kv-snapshot-store.js';
import { decoder, keys, rows, schema, table } from './fixtures/kv-table.js';
import { KvTablet } from './kv-tablet.js';
import { testTempDir } from '../../../common/fixtures/temp-dirs.js';

const log = pino({ level: 'silent' });

/** One snapshot store per test dir, so that what it registered outlives a reopening (the coordinator's part). */
const stores = new Map<string, KvSnapshotStore>();
function snapshotsOf(dir: string): KvSnapshotStore {
  let store = stores.get(dir);
  if (!store) stores.set(dir, (store = new KvSnapshotStore(path.join(dir, 'snapshots'), path.join(dir, 'snapshot-staging'), 4 << 20)));
  return store;
}

/** A registration the coordinator accepts. */
const accepted = async (): Promise<void> => undefined;

function config(flushIntervalMessages: number): LogConfig {
  return { segmentBytes: 1 << 20, indexIntervalBytes: 4096, recentBytes: 1 << 20, preallocateBytes: 8192, flushIntervalMessages, flushIntervalMs: 1000, ttlMs: 0, writerIdExpirationMs: 86_400_000 };
}

function batch(seq: number, records: [bigint, string | null][]): Buffer {
  return buildKvBatch({
    schemaId: 0, writerId: 7n, batchSequence: seq,
    records: records.map(([k, v]) => ({ key: keys.encode([k, null]), row: v === null ? null : rows.encode([k, v]) })),
  });
}

/** Opens the tablet over its log (log.flush.interval-messages `flush`); `flushIntervalMs` is kv.flush.interval. */
async function openAt(dir: string, flush: number, info: TableInfo = table, flushIntervalMs = 0): Promise<{ logTablet: LogTablet; kv: KvTablet }> {
  const logTablet = await LogTablet.open(path.join(dir, 'log-0'), config(flush));
  const kv = await KvTablet.open(path.join(dir, 'kv-0'), logTablet, info, (id) => (id === 0 ? schema : undefined), snapshotsOf(dir), log, () => 0, 'leader', flushIntervalMs);
  return { logTablet, kv };
}

const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The values of `ks` in one lookup, each read while it is visited (a view valid only then). */
function valuesOf(kv: KvTablet, ks: bigint[]): (string | null | undefined)[] {
  const out: (string | null | undefined)[] = [];
  kv.lookup(
    ks.map((k) => keys.encode([k, null])),
    (v) => out.push(v === undefined ? undefined : (decoder.decode(readKvValue(v).row)[1] as string | null)),
  );
  return out;
}

function valueOf(kv: KvTablet, k: bigint): string | null | undefined {
  return valuesOf(kv, [k])[0];
}

before(() => initArrowCompression());

for (const flush of [1, 1000]) {
  test(`writes are visible once committed and survive a reopen (log.flush.interval-messages=${flush})`, async () => {
    const dir = testTempDir('kv-tablet');
    let { logTablet, kv } = await openAt(dir, flush);
    await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
    await kv.putKv([batch(1, [[1n, 'a2'], [2n, null], [3n, 'c']])], undefined, 'high-watermark');
    assert.equal(valueOf(kv, 1n), 'a2');
    assert.equal(valueOf(kv, 2n), undefined);
    assert.equal(kv.rowCount, 2);
    // A retried batch is a duplicate: it changes nothing and is not logged again.
    const end = logTablet.logEndOffset;
    await kv.putKv([batch(1, [[1n, 'other']])], undefined, 'high-watermark');
    assert.equal(logTablet.logEndOffset, end);
    assert.equal(valueOf(kv, 1n), 'a2');
    await kv.close();
    await logTablet.close();
    ({ logTablet, kv } = await openAt(dir, flush));
    assert.equal(valueOf(kv, 1n), 'a2');
    assert.equal(valueOf(kv, 3n), 'c');
    assert.equal(kv.rowCount, 2);
    await kv.close();
    await logTablet.close();
  });
}

test('lost local state comes back from the latest snapshot plus the changelog after it', async () => {
  const dir = testTempDir('kv-tablet');
  let { logTablet, kv } = await openAt(dir, 1);
  await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
  const snap = await kv.snapshot(accepted);
  assert.equal(snap.logOffset, logTablet.highWatermark);
  assert.equal(snap.rowCount, 2);
  await kv.putKv([batch(1, [[2n, null], [4n, 'd']])], undefined, 'high-watermark');
  await kv.close();
  await logTablet.close();
  fs.rmSync(path.join(dir, 'kv-0'), { recursive: true });
  ({ logTablet, kv } = await openAt(dir, 1));
  assert.deepEqual([1n, 2n, 4n].map((k) => valueOf(kv, k)), ['a', undefined, 'd']);
  assert.equal(kv.rowCount, 2);
  const scan = kv.scanAll();
  assert.equal(scan.offset, logTablet.highWatermark);
  assert.equal([...scan.values].length, 2);
  scan.done();
  await kv.close();
  await logTablet.close();
});

test('a state ahead of its log (the log lost its tail) is rebuilt from the snapshot', async () => {
  const dir = testTempDir('kv-tablet');
  let { logTablet, kv } = await openAt(dir, 1);
  await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
  await kv.snapshot(accepted);
  const segment = path.join(dir, 'log-0', fs.readdirSync(path.join(dir, 'log-0')).find((f) => f.endsWith('.log'))!);
  const sizeAtSnapshot = logTablet.sizeInBytes;
  await kv.putKv([batch(1, [[2n, null], [4n, 'd']])], undefined, 'high-watermark');
  await kv.close();
  await logTablet.close();
  // What an OS crash can leave under a lazy flush policy: the state has the delete, the log does not.
  fs.truncateSync(segment, sizeAtSnapshot);
  for (const f of fs.readdirSync(path.join(dir, 'log-0'))) if (!f.endsWith('.log')) fs.rmSync(path.join(dir, 'log-0', f));
  ({ logTablet, kv } = await openAt(dir, 1));
  assert.deepEqual([1n, 2n, 4n].map((k) => valueOf(kv, k)), ['a', 'b', undefined]);
  await kv.close();
  await logTablet.close();
});

test('only a registered snapshot is restored: a newer directory no handle names is ignored, and a refused one is removed', async () => {
  const dir = testTempDir('kv-tablet');
  let { logTablet, kv } = await openAt(dir, 1);
  await kv.putKv([batch(0, [[1n, 'a']])], undefined, 'high-watermark');
  const registered = await kv.snapshot(accepted);
  await kv.putKv([batch(1, [[1n, 'b'], [2n, 'c']])], undefined, 'high-watermark');
  // A refused registration (a deposed leader's, say) leaves no snapshot behind.
  await assert.rejects(kv.snapshot(async () => {
    throw new TributaryError('FENCED_LEADER_EPOCH_EXCEPTION', 'deposed');
  }), { errorName: 'FENCED_LEADER_EPOCH_EXCEPTION' });
  assert.deepEqual(fs.readdirSync(path.join(dir, 'snapshots')).filter((n) => n.startsWith('snap-')), [`snap-${registered.snapshotId}`]);
  // A complete copy of a later state whose registration never happened (a crash before the commit): a newer id.
  const unregistered = path.join(dir, 'snapshots', `snap-${registered.snapshotId + 5}`);
  fs.mkdirSync(unregistered);
  fs.writeFileSync(path.join(unregistered, '_METADATA'), JSON.stringify({ ...JSON.parse(fs.readFileSync(registered.metadataPath, 'utf8')), chunks: ['0'.repeat(64)] }));
  await kv.close();
  await logTablet.close();
  fs.rmSync(path.join(dir, 'kv-0'), { recursive: true });
  ({ logTablet, kv } = await openAt(dir, 1));
  assert.equal(kv.recoveredFrom, 'snapshot');
  assert.deepEqual([1n, 2n].map((k) => valueOf(kv, k)), ['b', 'c']);
  // The next snapshot takes an id above every directory.
  assert.equal((await kv.snapshot(accepted)).snapshotId, registered.snapshotId + 6);
  await kv.close();
  await logTablet.close();
});

test('a standby applies the replicated changelog up to the high watermark only, serves nothing, and opened as leader replays just the tail', async () => {
  const dir = testTempDir('kv-tablet');
  const { logTablet: leaderLog, kv: leader } = await openAt(dir, 1);
  const follower = path.join(dir, 'follower');
  const followerLog = await LogTablet.open(path.join(follower, 'log-0'), config(1), undefined, { replicated: true });
  /** Copies the leader's log to the follower from its end, as a fetch would, and gives it high watermark `hw`. */
  const replicate = async (hw: bigint): Promise<void> => {
    const { records } = await leaderLog.read(followerLog.logEndOffset, 1 << 20, 'durable-end');
    if (records.length > 0) await followerLog.appendAsFollower(splitLogBatches(records));
    followerLog.advanceHighWatermark(hw);
  };
  await leader.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
  const firstEnd = leaderLog.logEndOffset;
  await replicate(firstEnd);
  const standby = await KvTablet.open(path.join(follower, 'kv-0'), followerLog, table, (id) => (id === 0 ? schema : undefined), snapshotsOf(follower), log, () => 0, 'standby');
  assert.equal(standby.recoveredFrom, 'none');
  assert.throws(() => standby.lookup([keys.encode([1n, null])], () => undefined), { errorName: 'NOT_LEADER_OR_FOLLOWER' });
  await assert.rejects(standby.snapshot(accepted), { errorName: 'NOT_LEADER_OR_FOLLOWER' });
  // The follower holds more than its high watermark: the standby's state stops at the high watermark.
  await leader.putKv([batch(1, [[1n, null], [3n, 'c']])], undefined, 'high-watermark');
  await leader.putKv([batch(2, [[2n, 'b2']])], undefined, 'high-watermark');
  const secondEnd = firstEnd + 2n; // the second batch: -D of 1 and +I of 3
  await replicate(firstEnd);
  await replicate(secondEnd);
  for (let i = 0; standby.stateOffset < secondEnd && i < 500; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(standby.stateOffset, secondEnd);
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(standby.stateOffset, secondEnd, 'nothing above the high watermark is applied');
  await standby.close();
  // Promoted: the warm state is opened and only the tail above it replayed, to the log end.
  const promoted = await KvTablet.open(path.join(follower, 'kv-0'), followerLog, table, (id) => (id === 0 ? schema : undefined), snapshotsOf(follower), log, () => 1);
  assert.equal(promoted.recoveredFrom, 'local');
  followerLog.advanceHighWatermark(followerLog.logEndOffset);
  assert.deepEqual([1n, 2n, 3n].map((k) => valueOf(promoted, k)), [undefined, 'b2', 'c']);
  await promoted.close();
  await followerLog.close();
  await leader.close();
  await leaderLog.close();
});

for (const [image, interval] of [['FULL', 0], ['WAL', 0], ['FULL', 5]] as const) test(`every committed change is visible at once to lookups, scans, prefix lookups and the row count, while lmdb catches up; snapshots taken meanwhile restore exactly (changelog ${image}, kv.flush.interval ${interval} ms)`, async () => {
  const dir = testTempDir('kv-tablet');
  const info: TableInfo = { ...table, properties: { 'table.changelog.image': image } };
  let { logTablet, kv } = await openAt(dir, 1, info, interval);
  const bucketKey = (k: bigint): Uint8Array => CompactedKeyEncoder.forColumns(schema, ['k']).encode([k, null]);
  const allKeys = Array.from({ length: 120 }, (_, k) => BigInt(k));
  // 40 batches over 120 keys with deletes, and the state after each.
  const batches: [bigint, string | null][][] = [];
  const stateAfter: Map<bigint, string>[] = [];
  const model = new Map<bigint, string>();
  for (let seq = 0; seq < 40; seq++) {
    const records: [bigint, string | null][] = [];
    for (let i = 0; i < 50; i++) records.push([BigInt((seq * 37 + i * 11) % 120), (seq + i) % 7 === 0 ? null : `v${seq}.${i}`]);
    for (const [k, v] of records) {
      if (v === null) model.delete(k);
      else model.set(k, v);
    }
    batches.push(records);
    stateAfter.push(new Map(model));
  }
  const snapshots: bigint[] = [];
  // Batches go out without waiting for each other, so appends, high watermark moves and lmdb
  // transactions overlap. When batch `seq` is acknowledged, what reads see is the state after it
  // or after a later batch committed with it, and lookups and a scan agree on which.
  const writes = batches.map((records, seq) =>
    kv.putKv([batch(seq, records)], undefined, 'high-watermark').then(async () => {
      const scan = kv.scanAll();
      const scanned = [...scan.values].map((v) => decoder.decode(readKvValue(v).row) as [bigint, string]);
      scan.done();
      assert.equal(scan.offset, logTablet.highWatermark);
      const seen = stateAfter.findIndex((state, j) => j >= seq && isDeepStrictEqual(new Map(scanned), state));
      assert.ok(seen >= 0, `the scan after batch ${seq} matches no state from it on`);
      // One lookup of every key (some twice), its values partly buffered versions, partly lmdb's.
      const asked = [...allKeys, ...allKeys.slice(0, 30).reverse()];
      assert.deepEqual(valuesOf(kv, asked), asked.map((k) => stateAfter[seen].get(k)));
      assert.equal(kv.rowCount, stateAfter[seen].size);
      // Key order: by the encoded key bytes.
      const encoded = scanned.map(([k]) => Buffer.from(keys.encode([k, null])));
      assert.deepEqual(encoded, [...encoded].sort(Buffer.compare));
      if (seq % 10 === 5) snapshots.push((await kv.snapshot(accepted)).logOffset);
    }),
  );
  await Promise.all(writes);
  // Prefix lookups read lmdb alone, once it holds what was committed when they were asked.
  const prefixed = await kv.prefixLookup(allKeys.map(bucketKey));
  assert.deepEqual(prefixed.map((values) => (values.length === 0 ? undefined : decoder.decode(readKvValue(values[0]).row)[1])), allKeys.map((k) => model.get(k)));
  assert.equal(kv.rowCount, model.size);
  assert.equal(snapshots.length, 4);
  await kv.close();
  await logTablet.close();
  // The latest snapshot plus the changelog after it give the same state.
  fs.rmSync(path.join(dir, 'kv-0'), { recursive: true });
  ({ logTablet, kv } = await openAt(dir, 1, info));
  assert.deepEqual(allKeys.map((k) => valueOf(kv, k)), allKeys.map((k) => model.get(k)));
  assert.equal(kv.rowCount, model.size);
  await kv.close();
  await logTablet.close();
});

test('kv.flush.interval: commits are read from memory until the next lmdb transaction is due; a prefix lookup and close write them at once', async () => {
  const dir = testTempDir('kv-tablet');
  const bucketKey = (k: bigint): Uint8Array => CompactedKeyEncoder.forColumns(schema, ['k']).encode([k, null]);
  let { logTablet, kv } = await openAt(dir, 1, table, 60_000);
  // No transaction ran before: the first commit's starts at once.
  await kv.putKv([batch(0, [[1n, 'a']])], undefined, 'high-watermark');
  for (let i = 0; kv.stateOffset < logTablet.highWatermark && i < 500; i++) await pause(10);
  const first = logTablet.highWatermark;
  assert.equal(kv.stateOffset, first);
  // The next ones wait for the interval (a minute): lmdb stays where it was, reads see them.
  await kv.putKv([batch(1, [[1n, 'a2'], [2n, 'b']])], undefined, 'high-watermark');
  await kv.putKv([batch(2, [[3n, 'c'], [2n, null]])], undefined, 'high-watermark');
  await pause(50);
  assert.equal(kv.stateOffset, first);
  assert.deepEqual(valuesOf(kv, [1n, 2n, 3n]), ['a2', undefined, 'c']);
  assert.equal(kv.rowCount, 2);
  // A prefix lookup reads lmdb alone, so it writes what is committed first.
  const prefixed = await kv.prefixLookup([1n, 2n, 3n].map(bucketKey));
  assert.deepEqual(prefixed.map((values) => values.map((v) => decoder.decode(readKvValue(v).row)[1])), [['a2'], [], ['c']]);
  assert.equal(kv.stateOffset, logTablet.highWatermark);
  // Close writes the rest: the reopened state needs no replay.
  await kv.putKv([batch(3, [[4n, 'd']])], undefined, 'high-watermark');
  await kv.close();
  await logTablet.close();
  ({ logTablet, kv } = await openAt(dir, 1, table, 60_000));
  assert.equal(kv.stateOffset, logTablet.highWatermark);
  assert.equal(kv.recoveredFrom, 'local');
  assert.deepEqual(valuesOf(kv, [1n, 2n, 3n, 4n]), ['a2', undefined, 'c', 'd']);
  await kv.close();
  await logTablet.close();
});

describe('after ADD COLUMN', () => {
  const v1 = addColumns(schema, [{ name: 'n', type: 'INT' }]);
  const schemas = (id: number): Schema | undefined => [schema, v1][id];
  const rowsV1 = new CompactedRowEncoder(v1.columns.map((c) => c.type));

  /** A KV batch of the new schema from another writer. */
  function batchV1(seq: number, records: [bigint, string | null, number | null][]): Buffer {
    return buildKvBatch({ schemaId: 1, writerId: 8n, batchSequence: seq, records: records.map(([k, v, n]) => ({ key: keys.encode([k, null]), row: rowsV1.encode([k, v, n]) })) });
  }

  async function open(dir: string, info: TableInfo): Promise<{ logTablet: LogTablet; kv: KvTablet }> {
    const logTablet = await LogTablet.open(path.join(dir, 'log-0'), config(1));
    return { logTablet, kv: await KvTablet.open(path.join(dir, 'kv-0'), logTablet, info, schemas, snapshotsOf(dir), log) };
  }

  /** Key → [schema id of the stored value, its values in the new schema]. */
  function state(kv: KvTablet): Map<bigint, [number, unknown[]]> {
    const values = new KvValueDecoder(v1, 1, schemas);
    const scan = kv.scanAll();
    const out = new Map([...scan.values].map((v) => [values.decode(v)[0] as bigint, [readKvValue(v).schemaId, values.decode(v)] as [number, unknown[]]]));
    scan.done();
    return out;
  }

  test('old rows read the added column as null; old and new writers both write; the changelog replays', async () => {
    const dir = testTempDir('kv-tablet');
    const table1: TableInfo = { ...table, schemaId: 1, schema: v1 };
    let { logTablet, kv } = await open(dir, table);
    await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b'], [4n, 'd']])], undefined, 'high-watermark');
    kv.tableAltered(table1);
    await kv.putKv([batchV1(0, [[3n, 'c', 30], [1n, 'a2', 10]])], undefined, 'high-watermark');
    // The old writer goes on with schema 0: a full row sets the added column to null, a partial
    // update of its own columns leaves it alone.
    await kv.putKv([batch(1, [[2n, 'b2'], [3n, 'c2']])], undefined, 'high-watermark');
    await kv.putKv([batch(2, [[1n, 'a3']])], [0, 1], 'high-watermark');
    const expected = new Map<bigint, [number, unknown[]]>([
      [1n, [1, [1n, 'a3', 10]]],
      [2n, [1, [2n, 'b2', null]]],
      [3n, [1, [3n, 'c2', null]]],
      [4n, [0, [4n, 'd', null]]], // untouched since: still stored as written
    ]);
    assert.deepEqual(state(kv), expected);
    const changelog = await logTablet.read(0n, 1 << 20);
    assert.deepEqual([...logBatchesOf(changelog.records)].map((b) => readLogBatchHeader(b).schemaId), [0, 1, 1, 1]);
    // Batches of a schema the table does not have (yet) are refused and change nothing.
    for (const schemaId of [2, 9]) {
      const bad = buildKvBatch({ schemaId, writerId: 9n, batchSequence: schemaId, records: [{ key: keys.encode([5n, null]), row: rows.encode([5n, 'x']) }] });
      await assert.rejects(kv.putKv([bad], undefined, 'high-watermark'), (e: unknown) => e instanceof TributaryError && e.errorName === 'SCHEMA_NOT_EXIST');
    }
    // Rebuilt from the changelog alone, batch by batch in the schema each was written with.
    await kv.close();
    await logTablet.close();
    fs.rmSync(path.join(dir, 'kv-0'), { recursive: true });
    ({ logTablet, kv } = await open(dir, table1));
    assert.deepEqual(
      [...state(kv)].map(([k, [, values]]) => [k, values]),
      [...expected].map(([k, [, values]]) => [k, values]),
    );
    await kv.close();
    await logTablet.close();
  });

  test('aggregation merges a stored row without the added column as if it held null there', async () => {
    const dir = testTempDir('kv-tablet');
    const aggSchema = buildSchema([{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'STRING' }], ['k']);
    const properties = { 'table.merge-engine': 'aggregation', 'fields.v.agg': 'listagg' };
    const agg: TableInfo = { ...table, schema: aggSchema, properties };
    let { logTablet, kv } = await open(dir, agg);
    await kv.putKv([batch(0, [[1n, 'a']])], undefined, 'high-watermark');
    kv.tableAltered({ ...agg, schemaId: 1, schema: v1 });
    await kv.putKv([batchV1(0, [[1n, 'b', 7]])], undefined, 'high-watermark');
    await kv.putKv([batch(1, [[1n, 'c']])], undefined, 'high-watermark');
    // listagg joins v; n takes the default last_value_ignore_nulls, so the old writer's null keeps 7.
    assert.deepEqual(state(kv).get(1n), [1, [1n, 'a,b,c', 7]]);
    await kv.close();
    await logTablet.close();
  });
});

describe('the changelog', () => {
  // Rows of the written schema go to the changelog from their bytes where the merge never looks
  // into them; this checks the result against the changelog built from the rows' values.
  const s0 = buildSchema([{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'STRING' }, { name: 'x', type: 'DECIMAL(30, 2)' }, { name: 'ts', type: 'TIMESTAMP(3)' }], ['k']);
  const s1 = addColumns(s0, [{ name: 'n', type: 'INT' }]);
  const schemas = (id: number): Schema | undefined => [s0, s1][id];
  const encoders = [s0, s1].map((s) => new CompactedRowEncoder(s.columns.map((c) => c.type)));
  const keyOf = (k: bigint): Uint8Array => keys.encode([k, null]);
  type Write = [bigint, unknown[] | null];

  const valuesOf = (schemaId: number, k: bigint, i: number): unknown[] => {
    const values = [k, i % 4 === 0 ? null : ['', 'é', '漢字 😀', `row ${i}`][i % 3], i % 5 === 0 ? null : BigInt(i) * 10n ** 20n - 7n, BigInt(i) * 1_000_123_000n];
    return schemaId === 0 ? values : [...values, i % 3 === 0 ? null : -i];
  };

  function kvBatch(schemaId: number, seq: number, writes: Write[]): Buffer {
    return buildKvBatch({ schemaId, writerId: 3n, batchSequence: seq, records: writes.map(([k, v]) => ({ key: keyOf(k), row: v && encoders[schemaId].encode(v) })) });
  }

  const cases: Record<string, string>[] = [{}, { 'table.changelog.image': 'WAL' }, { 'table.delete.behavior': 'IGNORE' }];
  for (const properties of cases) {
    test(`is the Arrow data of the rows' values, through inserts, updates, deletes and an added column (${JSON.stringify(properties)})`, async () => {
      const dir = testTempDir('kv-tablet');
      const wal = properties['table.changelog.image'] === 'WAL';
      const ignoreDeletes = properties['table.delete.behavior'] === 'IGNORE';
      const info: TableInfo = { ...table, schema: s0, properties: { ...properties, 'table.log.arrow.compression.type': 'NONE' } };
      const logTablet = await LogTablet.open(path.join(dir, 'log-0'), config(1));
      const kv = await KvTablet.open(path.join(dir, 'kv-0'), logTablet, info, schemas, snapshotsOf(dir), log);
      const range = (from: number, to: number): bigint[] => Array.from({ length: to - from }, (_, i) => BigInt(from + i));
      // [schema id of the writer, the writes]; the table takes schema 1 before the third batch.
      const batches: [number, Write[]][] = [
        [0, [...range(1, 31).map((k): Write => [k, valuesOf(0, k, Number(k))]), [99n, null], [5n, valuesOf(0, 5n, 100)]]],
        [0, [...range(1, 11).map((k): Write => [k, valuesOf(0, k, Number(k) + 200)]), ...range(11, 16).map((k): Write => [k, null]), [12n, valuesOf(0, 12n, 300)]]],
        [1, [...range(1, 6).map((k): Write => [k, valuesOf(1, k, Number(k) + 400)]), ...range(40, 46).map((k): Write => [k, valuesOf(1, k, Number(k))]), [20n, null]]],
        [0, range(1, 4).map((k): Write => [k, valuesOf(0, k, Number(k) + 500)])], // an old writer, after the change
        [1, [...range(1, 4).map((k): Write => [k, valuesOf(1, k, Number(k) + 600)]), [40n, null], [41n, null], [41n, valuesOf(1, 41n, 700)]]],
      ];
      // The expected changelog batches, from a model of the state in the table's current schema.
      const state = new Map<bigint, unknown[]>();
      const expected: Buffer[] = [];
      for (const [seq, [schemaId, writes]] of batches.entries()) {
        const current = seq < 2 ? s0 : s1;
        if (seq === 2) {
          kv.tableAltered({ ...info, schemaId: 1, schema: s1 });
          for (const [k, values] of state) state.set(k, [...values, null]);
        }
        const builder = new ColumnBatchBuilder(current);
        const changeTypes: number[] = [];
        const change = (type: number, values: unknown[]): void => {
          changeTypes.push(type);
          builder.appendInternalRow(values);
        };
        for (const [k, written] of writes) {
          const old = state.get(k);
          if (written === null) {
            if (ignoreDeletes || old === undefined) continue;
            change(4, old); // -D
            state.delete(k);
            continue;
          }
          const row = current === s1 && schemaId === 0 ? [...written, null] : written;
          if (wal) change(3, row);
          else if (old === undefined) change(1, row);
          else {
            change(2, old);
            change(3, row);
          }
          state.set(k, row);
        }
        expected.push(Buffer.from(encodeChangelogPayload(Uint8Array.from(changeTypes), builder.build(), 'NONE')));
        await kv.putKv([kvBatch(schemaId, seq, writes)], undefined, 'high-watermark');
      }
      const { records } = await logTablet.read(0n, 1 << 24);
      const logged = [...logBatchesOf(records)].map((b) => Buffer.from(logBatchPayload(b)));
      assert.equal(logged.length, batches.length);
      logged.forEach((payload, i) => assert.deepEqual(payload, expected[i], `changelog batch ${i}`));
      await kv.close();
      await logTablet.close();
    });
  }

  test('refuses a batch with a delete when deletes are disabled, and logs nothing of it', async () => {
    const dir = testTempDir('kv-tablet');
    const { logTablet, kv } = await openAt(dir, 1, { ...table, properties: { 'table.delete.behavior': 'DISABLE', 'table.log.arrow.compression.type': 'NONE' } });
    await kv.putKv([batch(0, [[1n, 'a']])], undefined, 'high-watermark');
    const end = logTablet.logEndOffset;
    for (const records of [[[2n, 'b'], [1n, null]], [[3n, null]]] as [bigint, string | null][][]) {
      await assert.rejects(kv.putKv([batch(1, records)], undefined, 'high-watermark'), { errorName: 'DELETION_DISABLED_EXCEPTION' });
    }
    assert.equal(logTablet.logEndOffset, end);
    assert.deepEqual([1n, 2n].map((k) => valueOf(kv, k)), ['a', undefined]);
    // The next batch's changelog holds its own row only, not the one of the refused batch before its delete.
    await kv.putKv([batch(1, [[4n, 'd']])], undefined, 'high-watermark');
    const expected = new ColumnBatchBuilder(schema);
    expected.appendInternalRow([4n, 'd']);
    const [logged, ...more] = [...logBatchesOf((await logTablet.read(end, 1 << 24)).records)];
    assert.equal(more.length, 0);
    assert.deepEqual(Buffer.from(logBatchPayload(logged)), Buffer.from(encodeChangelogPayload(Uint8Array.from([1]), expected.build(), 'NONE')));
    await kv.close();
    await logTablet.close();
  });
});
