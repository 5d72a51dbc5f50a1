/**
 * The KV state on a full disk, for real: the lmdb environment sits on a small tmpfs filled up with
 * a file (the bucket's log on a normal disk), so lmdb's writes fail with ENOSPC. The tablet must
 * stay up (lmdb rejects every write of a failed commit), serve the committed changes from memory,
 * and write them once space returns; opening it on the full disk keeps the replayed changelog in
 * memory instead of failing.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { readKvValue } from '../../../common/row-encoder.js';
import { initArrowCompression } from '../../../record/compression.js';
import { buildKvBatch } from '../../../record/kv-batch.js';
import { LogTablet } from '../log/log-tablet.js';
import { KvSnapshotStore } from './kv-snapshot-store.js';
import { SmallDisk } from '../../../../test/support/small-disk.js';
import { decoder, keys, rows, schema, table } from './fixtures/kv-table.js';
import { KvTablet } from './kv-tablet.js';

const silent = pino({ level: 'silent' });

const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kv-disk-full-log-'));
const disk = SmallDisk.mount('kv-disk-full', '4m');
const mountPoint = disk.mountPoint;
const mountRefused = disk.refused;
before(() => initArrowCompression());
after(() => {
  disk.unmount();
  fs.rmSync(logDir, { recursive: true, force: true });
});

/** A batch of big values, so that lmdb must grow its file to hold them. */
function batch(seq: number, round: string): Buffer {
  const records = [1n, 2n, 3n, 4n].map((k) => ({ key: keys.encode([k, null]), row: rows.encode([k, `${round}:${'x'.repeat(60_000)}`]) }));
  return buildKvBatch({ schemaId: 0, writerId: 7n, batchSequence: seq, records });
}

function roundOf(kv: KvTablet, k: bigint): string | undefined {
  let out: string | undefined;
  kv.lookup([keys.encode([k, null])], (v) => (out = v === undefined ? undefined : String(decoder.decode(readKvValue(v).row)[1]).split(':')[0]));
  return out;
}

async function open(): Promise<{ log: LogTablet; kv: KvTablet }> {
  const config = { segmentBytes: 1 << 24, indexIntervalBytes: 4096, recentBytes: 1 << 20, preallocateBytes: 8192, flushIntervalMessages: 1, flushIntervalMs: 1000, ttlMs: 0, writerIdExpirationMs: 86_400_000 };
  const log = await LogTablet.open(path.join(logDir, 'log-0'), config);
  const kv = await KvTablet.open(path.join(mountPoint, 'kv-0'), log, table, (id) => (id === 0 ? schema : undefined), new KvSnapshotStore(path.join(logDir, 'snapshots'), path.join(logDir, 'snapshot-staging'), 4 << 20), silent);
  return { log, kv };
}

async function untilWritten(kv: KvTablet, log: LogTablet): Promise<void> {
  for (let i = 0; i < 600 && kv.stateOffset < log.highWatermark; i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(kv.stateOffset, log.highWatermark, 'lmdb holds every committed change');
}

test('lmdb writes that find the disk full wait for space; a reopen on the full disk replays into memory', { timeout: 120_000 }, async (t) => {
  if (mountRefused) return t.skip(mountRefused);
  let { log, kv } = await open();
  await kv.putKv([batch(0, 'r0')], undefined, 'high-watermark');
  await untilWritten(kv, log);

  disk.fill();
  await kv.putKv([batch(1, 'r1')], undefined, 'high-watermark');
  await kv.putKv([batch(2, 'r2')], undefined, 'high-watermark');
  // Let lmdb's commits fail: the process must not die of their rejections.
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(kv.stateOffset < log.highWatermark, 'lmdb could not take the changes');
  assert.equal(roundOf(kv, 1n), 'r2', 'lookups read the committed changes from memory');
  assert.equal(kv.rowCount, 4);

  // Closed (as a crash would leave it) with lmdb behind the log, and opened on the still full disk.
  await kv.close();
  await log.close();
  ({ log, kv } = await open());
  assert.equal(roundOf(kv, 1n), 'r2', 'the replayed changelog is served from memory');
  assert.equal(kv.rowCount, 4);
  assert.ok(kv.stateOffset < log.highWatermark);

  disk.free();
  await untilWritten(kv, log);
  await kv.close();
  await log.close();
  ({ log, kv } = await open());
  assert.deepEqual([1n, 2n, 3n, 4n].map((k) => roundOf(kv, k)), ['r2', 'r2', 'r2', 'r2']);
  await kv.close();
  await log.close();
});
