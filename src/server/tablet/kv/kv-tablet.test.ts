import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { before, test } from 'node:test';
import { pino } from 'pino';
import { CompactedKeyEncoder } from '../../../common/key-encoder.js';
import { CompactedRowDecoder, CompactedRowEncoder, primaryKeyLayout, readKvValue } from '../../../common/row-encoder.js';
import { buildSchema, type TableInfo } from '../../../common/schema.js';
import { initArrowCompression } from '../../../record/compression.js';
import { buildKvBatch } from '../../../record/kv-batch.js';
import { type LogConfig, LogTablet } from '../log/log-tablet.js';
import { KvSnapshotStore } from './kv-snapshot-store.js';
import { KvTablet } from './kv-tablet.js';

const schema = buildSchema([{ name: 'k', type: 'BIGINT' }, { name: 'v', type: 'STRING' }], ['k']);
const table: TableInfo = {
  path: { database: 'db', table: 't' }, tableId: 1, schemaId: 0, schema, partitionKeys: [], bucketCount: 1, bucketKeys: ['k'],
  properties: {}, createdTime: 0, modifiedTime: 0,
};
const keys = CompactedKeyEncoder.forColumns(schema, primaryKeyLayout(schema, ['k']));
const rows = new CompactedRowEncoder(schema.columns.map((c) => c.type));
const decoder = new CompactedRowDecoder(schema.columns.map((c) => c.type));
const log = pino({ level: 'silent' });

function config(flushIntervalMessages: number): LogConfig {
  return { segmentBytes: 1 << 20, indexIntervalBytes: 4096, flushIntervalMessages, flushIntervalMs: 1000, ttlMs: 0, writerIdExpirationMs: 86_400_000 };
}

function batch(seq: number, records: [bigint, string | null][]): Buffer {
  return buildKvBatch({
    schemaId: 0, writerId: 7n, batchSequence: seq,
    records: records.map(([k, v]) => ({ key: keys.encode([k, null]), row: v === null ? null : rows.encode([k, v]) })),
  });
}

async function openAt(dir: string, flush: number): Promise<{ logTablet: LogTablet; kv: KvTablet }> {
  const logTablet = await LogTablet.open(path.join(dir, 'log-0'), config(flush));
  const kv = await KvTablet.open(path.join(dir, 'kv-0'), logTablet, table, new KvSnapshotStore(path.join(dir, 'snapshots'), 2), log);
  return { logTablet, kv };
}

function valueOf(kv: KvTablet, k: bigint): string | null | undefined {
  const v = kv.lookup([keys.encode([k, null])])[0];
  return v === undefined ? undefined : (decoder.decode(readKvValue(v).row)[1] as string | null);
}

before(() => initArrowCompression());

for (const flush of [1, 1000]) {
  test(`writes are visible once committed and survive a reopen (log.flush.interval-messages=${flush})`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kv-tablet-'));
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kv-tablet-'));
  let { logTablet, kv } = await openAt(dir, 1);
  await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
  const snap = await kv.snapshot();
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
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kv-tablet-'));
  let { logTablet, kv } = await openAt(dir, 1);
  await kv.putKv([batch(0, [[1n, 'a'], [2n, 'b']])], undefined, 'high-watermark');
  await kv.snapshot();
  const segment = path.join(dir, 'log-0', fs.readdirSync(path.join(dir, 'log-0')).find((f) => f.endsWith('.log'))!);
  const sizeAtSnapshot = fs.statSync(segment).size;
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
