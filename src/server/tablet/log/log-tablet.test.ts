import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { before, describe, it } from 'node:test';
import { CHANGE_TYPE_BYTE } from '../../../common/change-type.js';
import type { Row } from '../../../common/values.js';
import { encodeArrowPayload } from '../../../record/arrow-payload.js';
import { toArrowSchema } from '../../../record/arrow-schema.js';
import { cutLogBatch } from '../../../record/batch-projection.js';
import { encodeChangelogPayload } from '../../../record/changelog.js';
import { ColumnBatchBuilder } from '../../../record/column-batch-builder.js';
import { initArrowCompression } from '../../../record/compression.js';
import { sampleRows, sampleSchema } from '../../../record/fixtures/sample.js';
import { buildLogBatch, HEADER_SIZE, isCrcValid, type LogBatchHeader, logBatchPayload, readLogBatchHeader } from '../../../record/log-batch.js';
import { projectArrowPayload, projectChangelogPayload } from '../../../record/fixtures/projected.js';
import { batch, checkOffsetIndexes, idOf, logFiles, readAll, rejectsWith, split, tempDir, TEST_LOG_CONFIG as CONFIG } from './fixtures/logs.js';
import { batchesEnd, tearAtEnd } from './fixtures/segment-files.js';
import type { BatchCutter } from './log-segment.js';
import { type LogConfig, LogTablet, type LogTabletLogger } from './log-tablet.js';

function capturingLogger(): LogTabletLogger & { warnings: { obj: Record<string, unknown>; msg: string }[] } {
  const warnings: { obj: Record<string, unknown>; msg: string }[] = [];
  return { warnings, info() {}, warn: (obj, msg) => warnings.push({ obj: obj as Record<string, unknown>, msg }), error() {} };
}

describe('LogTablet append and read', () => {
  it('round-trips batches across several segment rolls, before and after reopening', async () => {
    const dir = tempDir();
    const log = await LogTablet.open(dir, { ...CONFIG, segmentBytes: 2000 });
    const expected: { id: number; base: bigint; last: bigint }[] = [];
    let id = 0;
    for (const group of [1, 3, 2, 5, 1, 4, 6, 2, 1, 3]) {
      const batches = Array.from({ length: group }, () => batch(id++, { records: 1 + (id % 4), payloadBytes: 150 + (id % 7) * 20 }));
      const results = await log.append(batches, 0);
      assert.equal(results.length, group);
      for (let i = 0; i < group; i++) {
        const r = results[i];
        assert.equal(r.duplicate, false);
        assert.equal(r.baseOffset, expected.length === 0 ? 0n : expected[expected.length - 1].last + 1n);
        assert.equal(r.lastOffset - r.baseOffset, BigInt(readLogBatchHeader(batches[i]).lastOffsetDelta));
        expected.push({ id: idOf(batches[i]), base: r.baseOffset, last: r.lastOffset });
      }
    }
    const leo = expected[expected.length - 1].last + 1n;
    assert.equal(log.logEndOffset, leo);
    assert.equal(log.highWatermark, leo);

    const files = logFiles(dir);
    assert.ok(files.length >= 5, `expected several segments, got ${files.join(', ')}`);
    assert.equal(files[0], '00000000000000000000.log');
    for (const f of files) assert.ok(fs.statSync(path.join(dir, f)).size <= 2000 || f === files[files.length - 1]);
    // Each segment is named by the base offset of its first batch.
    const bases = new Set(expected.map((e) => e.base));
    for (const f of files) assert.ok(bases.has(BigInt(f.slice(0, 20))), `${f} does not start at a batch`);

    const check = async (l: LogTablet, maxBytes?: number) => {
      const read = await readAll(l, maxBytes);
      assert.deepEqual(
        read.map((b) => idOf(b)),
        expected.map((e) => e.id),
      );
      for (let i = 0; i < read.length; i++) {
        const h = readLogBatchHeader(read[i]);
        assert.equal(h.baseOffset, expected[i].base);
        assert.equal(h.leaderEpoch, 0);
      }
    };
    await check(log);
    await check(log, 1); // the first batch comes back even when bigger than maxBytes
    await log.close();

    const reopened = await LogTablet.open(dir, { ...CONFIG, segmentBytes: 2000 });
    assert.equal(reopened.logEndOffset, leo);
    assert.equal(reopened.highWatermark, leo);
    await check(reopened);
    const more = await reopened.append([batch(999)], 0);
    assert.equal(more[0].baseOffset, leo);
    await reopened.close();
  });

  it('answers reads side by side, each with its own batch: the header walks share memory one at a time', async () => {
    const dir = tempDir();
    // Batches of about half an index interval: the walks start at different index entries and read more than once.
    const config = { ...CONFIG, recentBytes: 0 };
    const log = await LogTablet.open(dir, config);
    const ids = Array.from({ length: 60 }, (_, i) => i);
    const results = await log.append(ids.map((id) => batch(id, { records: 1, payloadBytes: 1500 + (id % 5) * 300 })), 0);
    await log.close();
    const reopened = await LogTablet.open(dir, config);
    await reopened.read(0n, 1, 'high-watermark'); // a walk's memory is there to be lent
    const reads = await Promise.all(results.map((r) => reopened.read(r.baseOffset, 1, 'high-watermark')));
    assert.deepEqual(
      reads.map(({ records }) => idOf(split(records)[0])),
      ids,
    );
    await reopened.close();
  });

  it('answers fetch offsets at the edges: empty at the high watermark, out of range beyond', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    const empty = await log.read(0n, 100);
    assert.equal(empty.records.length, 0);
    assert.equal(empty.highWatermark, 0n);
    await log.append([batch(1, { records: 3 }), batch(2, { records: 2 })], 0);
    const one = await log.read(0n, 1);
    assert.deepEqual(split(one.records).map(idOf), [1]);
    const both = await log.read(0n, 1 << 20);
    assert.deepEqual(split(both.records).map(idOf), [1, 2]);
    assert.equal(both.highWatermark, 5n);
    assert.equal(both.logStartOffset, 0n);
    assert.equal((await log.read(5n, 100)).records.length, 0);
    await rejectsWith(log.read(6n, 100), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await rejectsWith(log.read(-1n, 100), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await log.close();
    await rejectsWith(log.read(0n, 100), 'NOT_LEADER_OR_FOLLOWER');
    await rejectsWith(log.append([batch(3)], 0), 'NOT_LEADER_OR_FOLLOWER');
  });

  it('finds the batch holding any offset through the offset index, in every segment', async () => {
    const dir = tempDir();
    const config = { ...CONFIG, segmentBytes: 6000, indexIntervalBytes: 300 };
    const log = await LogTablet.open(dir, config);
    const batches: { id: number; base: bigint; last: bigint }[] = [];
    for (let i = 0; i < 120; i++) {
      const b = batch(i, { records: 1 + (i % 5), payloadBytes: 80 + (i % 3) * 40 });
      const [r] = await log.append([b], 0);
      batches.push({ id: i, base: r.baseOffset, last: r.lastOffset });
    }
    const checkEveryOffset = async (l: LogTablet) => {
      for (const b of batches) {
        for (let o = b.base; o <= b.last; o++) {
          const first = split((await l.read(o, 1)).records)[0];
          assert.equal(idOf(first), b.id, `offset ${o}`);
        }
      }
    };
    await checkEveryOffset(log);
    await log.close();

    // Every index entry points at the start of the batch it names.
    const entries = checkOffsetIndexes(dir);
    assert.ok(entries > 20, `expected a sparse index with many entries, got ${entries}`);

    const reopened = await LogTablet.open(dir, config);
    await checkEveryOffset(reopened);
    await reopened.close();
  });

  it('appends thousands of batches in one call', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    const batches = Array.from({ length: 3000 }, (_, i) => batch(i, { payloadBytes: 8 }));
    const results = await log.append(batches, 0);
    assert.equal(results[2999].baseOffset, 2999n);
    assert.deepEqual((await readAll(log)).map(idOf), batches.map((_, i) => i));
    await log.close();
  });

  it('orders concurrent appends and acknowledges each once durable', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    const seen: bigint[] = [];
    log.onHighWatermark((hw) => seen.push(hw));
    const results = await Promise.all(Array.from({ length: 200 }, (_, i) => log.append([batch(i)], 0)));
    assert.deepEqual(
      results.map((r) => r[0].baseOffset),
      results.map((_, i) => BigInt(i)),
    );
    assert.equal(log.highWatermark, 200n);
    assert.equal(seen[seen.length - 1], 200n);
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i] > seen[i - 1]);
    await log.close();
  });

  it('runs at most two fsyncs at once under concurrent appends, and acknowledges each append once durable', async () => {
    const flushes: { start: number; end: number }[] = [];
    const log = await LogTablet.open(tempDir(), CONFIG, undefined, { onFlush: (start, ms) => flushes.push({ start, end: start + ms }) });
    await Promise.all(
      Array.from({ length: 500 }, (_, i) =>
        log.append([batch(i)], 0).then(([r]) => assert.ok(log.durableEndOffset > r.lastOffset, `append ${i} acknowledged before its fsync`)),
      ),
    );
    assert.equal(log.highWatermark, 500n);
    assert.ok(flushes.length > 0);
    const overlapping = (t: number): number => flushes.filter((f) => f.start <= t && t < f.end).length;
    assert.ok(Math.max(...flushes.map((f) => overlapping(f.start))) <= 2);
    await log.close();
  });

  it('serves reads below the high watermark while appends and rolls continue', async () => {
    const log = await LogTablet.open(tempDir(), { ...CONFIG, segmentBytes: 3000, indexIntervalBytes: 500 });
    const appends = Promise.all(Array.from({ length: 300 }, (_, i) => log.append([batch(i, { records: 2, payloadBytes: 100 + (i % 5) * 40 })], 0)));
    let reads = 0;
    let done = false;
    void appends.then(() => (done = true));
    while (!done) {
      const hw = log.highWatermark;
      if (hw === 0n) {
        await new Promise((r) => setImmediate(r));
        continue;
      }
      const offset = BigInt(Math.floor(Math.random() * Number(hw)));
      const { records, highWatermark } = await log.read(offset, 2000);
      assert.ok(highWatermark >= hw);
      const batches = split(records);
      assert.ok(batches.length > 0);
      for (const b of batches) {
        const h = readLogBatchHeader(b);
        assert.equal(h.baseOffset, BigInt(idOf(b) * 2)); // batch i holds offsets 2i and 2i+1
        assert.ok(h.baseOffset < highWatermark);
      }
      assert.equal(readLogBatchHeader(batches[0]).baseOffset, offset - (offset % 2n));
      reads++;
      // A read of the recent batches completes without I/O: let the appends go on.
      await new Promise((r) => setImmediate(r));
    }
    await appends;
    assert.ok(reads > 0);
    await log.close();
  });

  it('rejects invalid configuration', async () => {
    await rejectsWith(LogTablet.open(tempDir(), { ...CONFIG, flushIntervalMessages: 0 }), 'INVALID_CONFIG_EXCEPTION');
    await rejectsWith(LogTablet.open(tempDir(), { ...CONFIG, segmentBytes: Number.NaN }), 'INVALID_CONFIG_EXCEPTION');
  });
});

describe('LogTablet high watermark', () => {
  it('notifies listeners of each new high watermark until they unsubscribe', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    const seen: bigint[] = [];
    const unsubscribe = log.onHighWatermark((hw) => seen.push(hw));
    await log.append([batch(1, { records: 4 })], 0);
    await log.append([batch(2, { records: 2 })], 0);
    unsubscribe();
    await log.append([batch(3)], 0);
    assert.deepEqual(seen, [4n, 6n]);
    assert.equal(log.highWatermark, 7n);
    await log.close();
  });

  it('with a lazy flush policy shows written batches at once and keeps them across reopen', async () => {
    const dir = tempDir();
    const log = await LogTablet.open(dir, { ...CONFIG, flushIntervalMessages: 1000, flushIntervalMs: 60_000 });
    const seen: bigint[] = [];
    log.onHighWatermark((hw) => seen.push(hw));
    await log.append([batch(1), batch(2)], 0);
    assert.deepEqual(seen, [2n]);
    assert.deepEqual((await readAll(log)).map(idOf), [1, 2]);
    await log.close();
    const reopened = await LogTablet.open(dir, CONFIG);
    assert.deepEqual((await readAll(reopened)).map(idOf), [1, 2]);
    await reopened.close();
  });
});

describe('LogTablet timestamps', () => {
  it('indexes commit timestamps and finds offsets by timestamp across segments', async () => {
    const dir = tempDir();
    let now = 1_000;
    const config = { ...CONFIG, segmentBytes: 1500, indexIntervalBytes: 200 };
    const log = await LogTablet.open(dir, config, undefined, { clock: () => now });
    const stamps: { base: bigint; ts: number }[] = [];
    for (let i = 0; i < 60; i++) {
      now = 1_000 + Math.floor(i / 3) * 100; // three batches per timestamp
      const [r] = await log.append([batch(i, { records: 2 })], 0);
      assert.equal(r.commitTimestamp, BigInt(now));
      stamps.push({ base: r.baseOffset, ts: now });
    }
    assert.ok(logFiles(dir).length >= 3);
    const expectFor = (ts: number): bigint => stamps.find((s) => s.ts >= ts)?.base ?? log.highWatermark;
    for (const ts of [0, 1_000, 1_001, 1_050, 1_100, 1_555, 2_000, 2_900, 2_901, 9_999]) {
      assert.equal(await log.offsetForTimestamp(BigInt(ts)), expectFor(ts), `timestamp ${ts}`);
    }
    // The stored batches carry the commit timestamp the append reported.
    for (const b of await readAll(log)) {
      const h = readLogBatchHeader(b);
      assert.equal(Number(h.commitTimestamp), stamps.find((s) => s.base === h.baseOffset)!.ts);
    }
    await log.close();

    // Time index entries name a batch carrying that timestamp; a sealed segment ends with its largest.
    const files = logFiles(dir);
    for (const f of files) {
      const base = BigInt(f.slice(0, 20));
      const data = fs.readFileSync(path.join(dir, f));
      const index = fs.readFileSync(path.join(dir, f.replace('.log', '.timeindex')));
      assert.equal(index.length % 12, 0);
      const headers: LogBatchHeader[] = split(data).map((b) => readLogBatchHeader(b));
      for (let at = 0; at < index.length; at += 12) {
        const ts = index.readBigInt64LE(at);
        const rel = BigInt(index.readInt32LE(at + 8));
        assert.equal(headers.find((h) => h.baseOffset === base + rel)?.commitTimestamp, ts);
      }
      if (f !== files[files.length - 1]) assert.equal(index.readBigInt64LE(index.length - 12), headers[headers.length - 1].commitTimestamp);
    }

    const reopened = await LogTablet.open(dir, config, undefined, { clock: () => now });
    for (const ts of [0, 1_050, 2_000, 2_901]) assert.equal(await reopened.offsetForTimestamp(BigInt(ts)), expectFor(ts));
    await reopened.close();
  });

  it('never lets commit timestamps go backwards when the clock does', async () => {
    let now = 5_000;
    const log = await LogTablet.open(tempDir(), CONFIG, undefined, { clock: () => now });
    const [a] = await log.append([batch(1)], 0);
    now = 4_000;
    const [b] = await log.append([batch(2)], 0);
    assert.equal(a.commitTimestamp, 5_000n);
    assert.equal(b.commitTimestamp, 5_000n);
    await log.close();
  });
});

describe('LogTablet idempotent writers', () => {
  const W = 7n;

  it('acknowledges a duplicate with its original offsets and rejects gaps and unknown writers', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    await log.append([batch(0)], 0); // a non-idempotent batch first, so offsets differ from sequences
    const first = await log.append([batch(1, { writerId: W, sequence: 0, records: 3 }), batch(2, { writerId: W, sequence: 1 })], 0);
    assert.deepEqual(
      first.map((r) => [r.baseOffset, r.lastOffset, r.duplicate]),
      [
        [1n, 3n, false],
        [4n, 4n, false],
      ],
    );
    const retry = await log.append([batch(1, { writerId: W, sequence: 0, records: 3 })], 0);
    assert.deepEqual([retry[0].baseOffset, retry[0].lastOffset, retry[0].duplicate], [1n, 3n, true]);
    assert.equal(retry[0].commitTimestamp, first[0].commitTimestamp);
    assert.equal(log.logEndOffset, 5n);

    await rejectsWith(log.append([batch(3, { writerId: W, sequence: 3 })], 0), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    await rejectsWith(log.append([batch(3, { writerId: 8n, sequence: 1 })], 0), 'UNKNOWN_WRITER_ID_EXCEPTION');
    // One bad batch rejects the whole call: the good one before it is not appended.
    await rejectsWith(log.append([batch(3, { writerId: W, sequence: 2 }), batch(4, { writerId: W, sequence: 9 })], 0), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    assert.equal(log.logEndOffset, 5n);

    // A new writer starts at 0; a duplicate inside one call is recognised too.
    const mixed = await log.append(
      [batch(5, { writerId: 8n, sequence: 0 }), batch(6, { writerId: W, sequence: 2 }), batch(5, { writerId: 8n, sequence: 0 })],
      0,
    );
    assert.deepEqual(
      mixed.map((r) => [r.baseOffset, r.duplicate]),
      [
        [5n, false],
        [6n, false],
        [5n, true],
      ],
    );
    assert.deepEqual((await readAll(log)).map(idOf), [0, 1, 2, 5, 6]);
    await log.close();
  });

  it('keeps the last five batches per writer: older sequences are out of order', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    for (let s = 0; s < 8; s++) await log.append([batch(s, { writerId: W, sequence: s })], 0);
    for (let s = 3; s < 8; s++) assert.equal((await log.append([batch(s, { writerId: W, sequence: s })], 0))[0].baseOffset, BigInt(s));
    await rejectsWith(log.append([batch(2, { writerId: W, sequence: 2 })], 0), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    assert.equal(log.logEndOffset, 8n);
    await log.close();
  });

  it('keeps writer state across a clean reopen, a crash and segment deletion', async () => {
    const dir = tempDir();
    let now = 10_000;
    const config = { ...CONFIG, segmentBytes: 600, ttlMs: 1000 };
    const log = await LogTablet.open(dir, config, undefined, { clock: () => now });
    for (let s = 0; s < 4; s++) await log.append([batch(s, { writerId: W, sequence: s, payloadBytes: 200 })], 0);
    await log.checkpoint();
    for (let s = 4; s < 6; s++) await log.append([batch(s, { writerId: W, sequence: s, payloadBytes: 200 })], 0);

    // Crash: a copy of the files without a checkpoint of the last two batches.
    const crashed = tempDir();
    fs.cpSync(dir, crashed, { recursive: true });
    const afterCrash = await LogTablet.open(crashed, config, undefined, { clock: () => now });
    const dup = await afterCrash.append([batch(5, { writerId: W, sequence: 5, payloadBytes: 200 })], 0);
    assert.deepEqual([dup[0].baseOffset, dup[0].duplicate], [5n, true]);
    await rejectsWith(afterCrash.append([batch(7, { writerId: W, sequence: 7 })], 0), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    await afterCrash.close();

    await log.close();
    now = 20_000;
    const reopened = await LogTablet.open(dir, config, undefined, { clock: () => now });
    const sealed = logFiles(dir).length - 1;
    assert.ok(sealed >= 2);
    assert.equal(await reopened.deleteExpiredSegments(now), sealed);
    assert.ok(reopened.logStartOffset > 1n);
    const again = await reopened.append([batch(4, { writerId: W, sequence: 4, payloadBytes: 200 })], 0);
    assert.deepEqual([again[0].baseOffset, again[0].duplicate], [4n, true]);
    const next = await reopened.append([batch(6, { writerId: W, sequence: 6 })], 0);
    assert.deepEqual([next[0].baseOffset, next[0].duplicate], [6n, false]);
    await reopened.close();
  });

  it('forgets writers idle past the expiration time', async () => {
    const dir = tempDir();
    let now = 1_000;
    const config = { ...CONFIG, writerIdExpirationMs: 10_000 };
    const log = await LogTablet.open(dir, config, undefined, { clock: () => now });
    await log.append([batch(0, { writerId: W, sequence: 0 })], 0);
    await log.append([batch(1, { writerId: 9n, sequence: 0 })], 0);
    now = 8_000;
    await log.append([batch(2, { writerId: 9n, sequence: 1 })], 0);
    now = 12_000;
    await log.checkpoint();
    await rejectsWith(log.append([batch(3, { writerId: W, sequence: 1 })], 0), 'UNKNOWN_WRITER_ID_EXCEPTION');
    assert.equal((await log.append([batch(3, { writerId: 9n, sequence: 2 })], 0))[0].duplicate, false);
    await log.close();
    const reopened = await LogTablet.open(dir, config, undefined, { clock: () => now });
    await rejectsWith(reopened.append([batch(4, { writerId: W, sequence: 1 })], 0), 'UNKNOWN_WRITER_ID_EXCEPTION');
    assert.equal((await reopened.append([batch(4, { writerId: 9n, sequence: 2 })], 0))[0].duplicate, true);
    await reopened.close();
  });
});

describe('LogTablet leader epochs', () => {
  it('stamps the epoch, persists the epoch cache and fences older epochs', async () => {
    const dir = tempDir();
    const log = await LogTablet.open(dir, CONFIG);
    assert.equal(log.latestEpoch, -1);
    await log.append([batch(1, { records: 2 })], 0);
    await log.append([batch(2)], 3);
    await log.append([batch(3)], 3);
    assert.equal(log.latestEpoch, 3);
    await rejectsWith(log.append([batch(4)], 2), 'FENCED_LEADER_EPOCH_EXCEPTION');
    assert.deepEqual(
      (await readAll(log)).map((b) => readLogBatchHeader(b).leaderEpoch),
      [0, 3, 3],
    );
    await log.close();
    assert.equal(fs.readFileSync(path.join(dir, 'leader-epoch-checkpoint'), 'utf8'), '0\n2\n0 0\n3 2\n');

    // Rebuilt from batch headers when the checkpoint is gone.
    fs.rmSync(path.join(dir, 'leader-epoch-checkpoint'));
    const reopened = await LogTablet.open(dir, CONFIG);
    assert.equal(reopened.latestEpoch, 3);
    await reopened.close();
    assert.equal(fs.readFileSync(path.join(dir, 'leader-epoch-checkpoint'), 'utf8'), '0\n2\n0 0\n3 2\n');
  });

  it('rewrites the epoch checkpoint only when the epochs changed', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'leader-epoch-checkpoint');
    // Each save replaces the file by a rename: a new inode.
    const inode = (): number => fs.statSync(file).ino;
    const log = await LogTablet.open(dir, CONFIG);
    await log.append([batch(1)], 2);
    await log.checkpoint();
    const first = inode();
    await log.append([batch(2)], 2);
    await log.checkpoint();
    assert.equal(inode(), first, 'same epochs: not written again');
    await log.append([batch(3)], 5);
    await log.checkpoint();
    assert.notEqual(inode(), first, 'a new epoch is written');
    assert.equal(fs.readFileSync(file, 'utf8'), '0\n2\n2 0\n5 2\n');
    await log.close();

    const reopened = await LogTablet.open(dir, CONFIG);
    const afterOpen = inode();
    await reopened.append([batch(4)], 5);
    await reopened.checkpoint();
    assert.equal(inode(), afterOpen, 'the loaded file counts as saved');
    await reopened.close();
  });
});

describe('LogTablet recovery', () => {
  /** A log of 30 batches over several segments, and a copy of its files taken while it is open. */
  async function crashedCopy(checkpointAfter?: number): Promise<{ dir: string; ids: number[]; config: LogConfig; sizes: number[] }> {
    const dir = tempDir();
    const config = { ...CONFIG, segmentBytes: 1500, indexIntervalBytes: 256 };
    const log = await LogTablet.open(dir, config);
    const sizes: number[] = [];
    for (let i = 0; i < 30; i++) {
      const b = batch(i, { records: 2, payloadBytes: 120 + (i % 4) * 30 });
      sizes.push(b.length);
      await log.append([b], 0);
      if (i === checkpointAfter) await log.checkpoint();
    }
    const copy = tempDir();
    fs.cpSync(dir, copy, { recursive: true });
    await log.close();
    const active = path.join(copy, logFiles(copy).at(-1)!);
    assert.ok(fs.statSync(active).size > batchesEnd(active), 'the crash left no zeros written ahead of the active segment');
    return { dir: copy, ids: Array.from({ length: 30 }, (_, i) => i), config, sizes };
  }

  const lastLog = (dir: string): string => path.join(dir, logFiles(dir).at(-1)!);

  async function expectRecovered(dir: string, config: LogConfig, ids: number[], droppedBytes: number): Promise<void> {
    const logger = capturingLogger();
    const log = await LogTablet.open(dir, config, logger);
    assert.deepEqual((await readAll(log)).map(idOf), ids);
    assert.equal(log.logEndOffset, BigInt(ids.length * 2));
    assert.equal(log.highWatermark, log.logEndOffset);
    const dropped = logger.warnings.reduce((n, w) => n + Number(w.obj.droppedBytes ?? 0), 0);
    assert.equal(dropped, droppedBytes, JSON.stringify(logger.warnings));
    // The log continues at the end of the valid prefix, and the cut is durable.
    const [r] = await log.append([batch(100, { records: 2 })], 0);
    assert.equal(r.baseOffset, BigInt(ids.length * 2));
    await log.close();
    const again = capturingLogger();
    const reopened = await LogTablet.open(dir, config, again);
    assert.deepEqual((await readAll(reopened)).map(idOf), [...ids, 100]);
    assert.deepEqual(again.warnings, []);
    await reopened.close();
  }

  it('takes checkpoints beside appends and rolls: each recovery point holds, every index entry is right', async () => {
    const dir = tempDir();
    const config = { ...CONFIG, segmentBytes: 3000, indexIntervalBytes: 200 };
    const log = await LogTablet.open(dir, config);
    const appends: Promise<unknown>[] = [];
    const checkpoints: Promise<void>[] = [];
    for (let i = 0; i < 60; i++) {
      appends.push(log.append([batch(i, { records: 2, payloadBytes: 150 })], 0));
      // Not awaited: each checkpoint writes its files while the next appends go on.
      if (i % 5 === 0) checkpoints.push(log.checkpoint());
    }
    await Promise.all([...appends, ...checkpoints]);
    // A checkpoint saves the log as it was at its place in the append order: the last one, after batch 55.
    const text = fs.readFileSync(path.join(dir, 'recovery-point-checkpoint'), 'utf8');
    assert.equal(text, `0\n1\n${56 * 2}\n`);
    const copy = tempDir();
    fs.cpSync(dir, copy, { recursive: true });
    await log.close();
    // The index files as the checkpoints and rolls left them: every entry points at the batch it names.
    assert.ok(checkOffsetIndexes(copy) > 0);
    await expectRecovered(copy, config, Array.from({ length: 60 }, (_, i) => i), 0);
  });

  it('keeps everything written before a crash without a checkpoint', async () => {
    const { dir, ids, config } = await crashedCopy();
    await expectRecovered(dir, config, ids, 0);
  });

  it('cuts garbage appended at the tail', async () => {
    const { dir, ids, config } = await crashedCopy(20);
    tearAtEnd(lastLog(dir), Buffer.from('this is not a record batch at all, just garbage bytes'));
    await expectRecovered(dir, config, ids, 53);
  });

  it('cuts a torn half batch at the tail', async () => {
    const { dir, ids, config } = await crashedCopy();
    const torn = batch(30, { records: 2, payloadBytes: 400 });
    tearAtEnd(lastLog(dir), torn.subarray(0, 250));
    await expectRecovered(dir, config, ids, 250);
  });

  it('cuts the last batch when a byte of it is flipped', async () => {
    const { dir, ids, config, sizes } = await crashedCopy(25);
    const file = lastLog(dir);
    const data = fs.readFileSync(file);
    data[batchesEnd(file) - 10] ^= 0xff;
    fs.writeFileSync(file, data);
    await expectRecovered(dir, config, ids.slice(0, 29), sizes[29]);
  });

  it('drops the segments after a corrupt one when recovering from an old recovery point', async () => {
    const { dir, ids, config } = await crashedCopy();
    const files = logFiles(dir);
    assert.ok(files.length >= 4);
    // Corrupt the first batch of the second segment: the log ends with the first segment.
    const second = path.join(dir, files[1]);
    const data = fs.readFileSync(second);
    data[100] ^= 0x01;
    fs.writeFileSync(second, data);
    const firstSegmentBatches = split(fs.readFileSync(path.join(dir, files[0]))).length;
    let dropped = 0;
    for (const f of files.slice(1)) dropped += fs.statSync(path.join(dir, f)).size;
    await expectRecovered(dir, config, ids.slice(0, firstSegmentBatches), dropped);
    assert.equal(logFiles(dir).length, 2);
  });

  it('rebuilds missing or wrong index files', async () => {
    const { dir, ids, config } = await crashedCopy(29);
    const files = logFiles(dir);
    fs.rmSync(path.join(dir, files[0].replace('.log', '.index')));
    fs.rmSync(path.join(dir, files[1].replace('.log', '.timeindex')));
    // Entries of the active segment that point one byte past each batch start.
    const active = path.join(dir, files.at(-1)!.replace('.log', '.index'));
    const index = fs.readFileSync(active);
    assert.ok(index.length >= 8);
    for (let at = 0; at < index.length; at += 8) index.writeInt32LE(index.readInt32LE(at + 4) + 1, at + 4);
    fs.writeFileSync(active, index);
    await expectRecovered(dir, config, ids, 0);
    assert.ok(fs.existsSync(path.join(dir, files[0].replace('.log', '.index'))));
  });

  it('treats unreadable checkpoints as missing and removes leftover temp files', async () => {
    const { dir, ids, config } = await crashedCopy(29);
    fs.writeFileSync(path.join(dir, 'recovery-point-checkpoint'), 'garbage');
    fs.writeFileSync(path.join(dir, 'writer-snapshot'), Buffer.from([1, 2, 3]));
    fs.writeFileSync(path.join(dir, 'recovery-point-checkpoint.tmp'), '0\n1\n5\n');
    const logger = capturingLogger();
    const log = await LogTablet.open(dir, config, logger);
    assert.deepEqual((await readAll(log)).map(idOf), ids);
    assert.equal(logger.warnings.length, 2);
    assert.ok(!fs.existsSync(path.join(dir, 'recovery-point-checkpoint.tmp')));
    await log.close();
    assert.equal(fs.readFileSync(path.join(dir, 'recovery-point-checkpoint'), 'utf8'), '0\n1\n60\n');
  });
});

describe('LogTablet preallocation', () => {
  /** Waits until the zeros written ahead of the active segment show in its file size. */
  async function untilZerosAhead(file: string): Promise<number> {
    for (let i = 0; i < 500; i++) {
      const ahead = fs.statSync(file).size - batchesEnd(file);
      if (ahead > 0) return ahead;
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.fail(`no zeros were written ahead in ${file}`);
  }

  it('keeps zeros ahead of the active segment, within its size, and cuts them when it rolls or the log closes', async () => {
    const dir = tempDir();
    const config = { ...CONFIG, segmentBytes: 6000, preallocateBytes: 4096 };
    const log = await LogTablet.open(dir, config);
    const active = (): string => path.join(dir, logFiles(dir).at(-1)!);
    for (let i = 0; i < 80; i++) {
      await log.append([batch(i, { payloadBytes: 150 })], 0);
      const ahead = await untilZerosAhead(active());
      assert.ok(fs.statSync(active()).size <= config.segmentBytes, 'zeros past the segment size');
      // Renewed at half, to a page boundary past preallocateBytes.
      assert.ok(ahead >= config.preallocateBytes / 2 - 256 || fs.statSync(active()).size === config.segmentBytes, `only ${ahead} bytes ahead`);
      assert.ok(ahead <= config.preallocateBytes + 4096, `${ahead} bytes ahead`);
    }
    const files = logFiles(dir);
    assert.ok(files.length >= 3);
    for (const f of files.slice(0, -1)) assert.equal(fs.statSync(path.join(dir, f)).size, batchesEnd(path.join(dir, f)), `sealed ${f}`);
    const last = active();
    await log.close();
    assert.equal(fs.statSync(last).size, batchesEnd(last));
    const reopened = await LogTablet.open(dir, config);
    assert.deepEqual((await readAll(reopened)).map(idOf), Array.from({ length: 80 }, (_, i) => i));
    await reopened.close();
  });

  it('writes no zeros ahead of appends larger than a sixteenth of preallocateBytes', async () => {
    const dir = tempDir();
    const log = await LogTablet.open(dir, { ...CONFIG, preallocateBytes: 4096 });
    const file = path.join(dir, logFiles(dir)[0]);
    for (let i = 0; i < 5; i++) await log.append([batch(i, { payloadBytes: 1000 })], 0);
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(fs.statSync(file).size, batchesEnd(file));
    await log.append([batch(5, { payloadBytes: 100 })], 0);
    await untilZerosAhead(file);
    await log.close();
  });

  it('lets segments grow with their batches when preallocateBytes is 0', async () => {
    const dir = tempDir();
    const log = await LogTablet.open(dir, { ...CONFIG, preallocateBytes: 0 });
    for (let i = 0; i < 10; i++) {
      await log.append([batch(i)], 0);
      const file = path.join(dir, logFiles(dir).at(-1)!);
      assert.equal(fs.statSync(file).size, batchesEnd(file));
    }
    await log.close();
  });

  it('writes a batch that reaches into zeros still being written after them, never under them', async () => {
    const dir = tempDir();
    // Zeros written a megabyte at a time, several writes in all: a large batch right after a
    // small one reaches into the part still to be zeroed.
    const config = { ...CONFIG, segmentBytes: 64 << 20, preallocateBytes: 8 << 20 };
    const log = await LogTablet.open(dir, config);
    const batches = Array.from({ length: 8 }, (_, i) => batch(i, { payloadBytes: i % 2 === 0 ? 100 : 3 << 20 }));
    await Promise.all(batches.map((b) => log.append([b], 0)));
    await log.close();
    // What the file holds, read from disk.
    const reopened = await LogTablet.open(dir, config);
    const read = await readAll(reopened, 4 << 20);
    assert.equal(read.length, batches.length);
    for (let i = 0; i < read.length; i++) assert.ok(Buffer.from(logBatchPayload(read[i])).equals(Buffer.from(logBatchPayload(batches[i]))), `batch ${i}`);
    await reopened.close();
  });
});

describe('LogTablet retention', () => {
  it('deletes whole sealed segments past the ttl, never the active one, and honours the guard', async () => {
    const dir = tempDir();
    let now = 1_000;
    const config = { ...CONFIG, segmentBytes: 800, ttlMs: 1_000 };
    const log = await LogTablet.open(dir, config, undefined, { clock: () => now });
    const segmentTimes = [1_000, 2_000, 3_000, 4_000];
    for (const t of segmentTimes) {
      now = t;
      // Three batches of ~256 bytes fill one segment; the next append rolls.
      for (let i = 0; i < 3; i++) await log.append([batch(t + i, { payloadBytes: 200 })], 0);
    }
    assert.equal(logFiles(dir).length, 4);
    const bases = logFiles(dir).map((f) => BigInt(f.slice(0, 20)));

    assert.equal(await log.deleteExpiredSegments(2_500, () => false), 0);
    assert.equal(await log.deleteExpiredSegments(2_500), 1); // 1_000 < 2_500 - 1_000
    assert.equal(log.logStartOffset, bases[1]);
    await rejectsWith(log.read(0n, 100), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    assert.equal(await log.offsetForTimestamp(0n), bases[1]);
    const guard: bigint[] = [];
    assert.equal(
      await log.deleteExpiredSegments(1e9, (end) => {
        guard.push(end);
        return end <= bases[2];
      }),
      1,
    );
    assert.deepEqual(guard, [bases[2], bases[3]]);
    assert.equal(await log.deleteExpiredSegments(1e9), 1);
    assert.equal(logFiles(dir).length, 1);
    assert.equal(log.logStartOffset, bases[3]);
    assert.deepEqual((await readAll(log)).map(idOf), [4_000, 4_001, 4_002]);
    await log.close();

    const reopened = await LogTablet.open(dir, config, undefined, { clock: () => now });
    assert.equal(reopened.logStartOffset, bases[3]);
    assert.equal(fs.readdirSync(dir).filter((f) => f.endsWith('index')).length, 2);
    await reopened.close();
  });

  it('keeps everything with ttl 0 and applies an altered ttl', async () => {
    let now = 1_000;
    const log = await LogTablet.open(tempDir(), { ...CONFIG, segmentBytes: 300 }, undefined, { clock: () => now });
    for (let i = 0; i < 4; i++) await log.append([batch(i, { payloadBytes: 200 })], 0);
    now = 1e9;
    assert.equal(await log.deleteExpiredSegments(now), 0);
    log.updateConfig({ ...CONFIG, segmentBytes: 300, ttlMs: 1000 });
    assert.equal(await log.deleteExpiredSegments(now), 3);
    await log.close();
  });
});

describe('LogTablet readTail', () => {
  it('returns the last batches holding at least the requested records', async () => {
    const log = await LogTablet.open(tempDir(), { ...CONFIG, segmentBytes: 500 });
    assert.deepEqual(await log.readTail(5), []);
    for (let i = 0; i < 6; i++) await log.append([batch(i, { records: 3, payloadBytes: 150 })], 0);
    assert.deepEqual((await log.readTail(3)).map(idOf), [5]);
    assert.deepEqual((await log.readTail(5)).map(idOf), [4, 5]);
    assert.deepEqual((await log.readTail(7)).map(idOf), [3, 4, 5]);
    assert.deepEqual((await log.readTail(100)).map(idOf), [0, 1, 2, 3, 4, 5]);
    await log.close();
  });

  it('looks further back when batches hold fewer records than offsets', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    await log.append([batch(0, { records: 3 })], 0);
    for (let i = 1; i <= 4; i++) await log.append([batch(i, { records: 0 })], 0); // empty batches still take an offset
    await log.append([batch(5, { records: 1 })], 0);
    assert.deepEqual((await log.readTail(2)).map(idOf), [0, 1, 2, 3, 4, 5]);
    assert.deepEqual((await log.readTail(1)).map(idOf), [5]);
    await log.close();
  });
});

describe('LogTablet readCut', () => {
  const arrowSchema = toArrowSchema(sampleSchema);
  const columns = [10, 0, 7];
  const cutter: BatchCutter = (head) => cutLogBatch(head, () => ({ arrowSchema, columns }));
  const rows = (n: number, from: number): Row[] => Array.from({ length: n }, (_, i) => ({ ...sampleRows[(from + i) % sampleRows.length], i64: BigInt(from + i) }));
  const arrowOf = (rs: Row[]) => {
    const b = new ColumnBatchBuilder(sampleSchema);
    for (const r of rs) b.appendRow(r);
    return b.build();
  };
  /** Log batches of real Arrow payloads; every third one a changelog batch, one of them with more change types than a batch head holds. */
  function realBatches(): Buffer[] {
    const out: Buffer[] = [];
    for (let i = 0; i < 12; i++) {
      const rs = rows(i === 4 ? 10_000 : 50 + 40 * i, i * 1000);
      if (i % 3 === 1) {
        const changes = Uint8Array.from(rs, (_, j) => CHANGE_TYPE_BYTE[j % 2 === 0 ? '+I' : '+U']);
        out.push(buildLogBatch({ schemaId: 1, appendOnly: false, recordCount: rs.length, payload: encodeChangelogPayload(changes, arrowOf(rs), 'ZSTD') }));
      } else {
        out.push(buildLogBatch({ schemaId: 1, appendOnly: true, recordCount: rs.length, payload: encodeArrowPayload(arrowOf(rs), i % 2 === 0 ? 'ZSTD' : 'NONE') }));
      }
    }
    return out;
  }
  /** What a cut of `batch` must be: its header and the in-memory projection of its payload. */
  function expectedCut(batch: Buffer): { header: LogBatchHeader; payload: Buffer } {
    const h = readLogBatchHeader(batch);
    const payload = logBatchPayload(batch);
    return {
      header: { ...h, statisticsLength: 0, crc: 0, sizeInBytes: 0 },
      payload: Buffer.from(h.appendOnly ? projectArrowPayload(payload, arrowSchema, columns) : projectChangelogPayload(payload, h.recordCount, arrowSchema, columns)),
    };
  }

  before(() => initArrowCompression());

  it('reads of each batch only what its cut keeps, equal to projecting the whole batch, segment by segment', async () => {
    const log = await LogTablet.open(tempDir(), { ...CONFIG, segmentBytes: 40_000 });
    for (const b of realBatches()) await log.append([b], 0);
    const whole = await readAll(log);
    assert.ok(logFiles(log.dir).length >= 3, 'several segments');
    const cut: Buffer[] = [];
    for (let offset = log.logStartOffset; offset < log.highWatermark; ) {
      const { batches, storedBytes } = await log.readCut(offset, 1 << 20, 1 << 30, cutter);
      assert.ok(batches.length > 0);
      assert.ok(storedBytes >= batches.reduce((n, b) => n + b.length, 0));
      for (const b of batches) {
        assert.ok(isCrcValid(b), 'a cut batch carries its own CRC');
        cut.push(b);
        const h = readLogBatchHeader(b);
        offset = h.baseOffset + BigInt(h.lastOffsetDelta) + 1n;
      }
    }
    assert.equal(cut.length, whole.length);
    for (let i = 0; i < whole.length; i++) {
      const { header, payload } = expectedCut(whole[i]);
      assert.deepEqual({ ...readLogBatchHeader(cut[i]), crc: 0, sizeInBytes: 0 }, header, `batch ${i}`);
      assert.deepEqual(Buffer.from(logBatchPayload(cut[i])), payload, `batch ${i}`);
    }
    await log.close();
  });

  it('reads of the recent batches kept in memory equal reads of the file, whole and cut, also across where memory starts', async () => {
    const batches = realBatches();
    // Memory holds about three of the batches of the active segment.
    const config = { ...CONFIG, segmentBytes: 60_000, recentBytes: 3 * Math.max(...batches.map((b) => b.length)) + 1 };
    const dir = tempDir();
    let log = await LogTablet.open(dir, config);
    for (const b of batches) await log.append([b], 0);
    assert.ok(logFiles(dir).length >= 2, 'several segments: sealed ones keep nothing in memory');
    const reads = async () => {
      const out: unknown[] = [];
      for (let offset = log.logStartOffset; offset < log.highWatermark; offset += 37n) {
        for (const maxBytes of [1, 5000, 1 << 20]) out.push((await log.read(offset, maxBytes)).records, await log.readCut(offset, maxBytes, 1 << 30, cutter));
      }
      return out;
    };
    // The last batch is read from memory alone: no file read.
    const handle = await fs.promises.open(path.join(dir, logFiles(dir)[0]));
    const fileHandle = Object.getPrototypeOf(handle) as { read: (...args: unknown[]) => Promise<unknown> };
    await handle.close();
    const fileRead = fileHandle.read;
    let fileReads = 0;
    fileHandle.read = function (this: unknown, ...args: unknown[]) {
      fileReads++;
      return fileRead.apply(this, args);
    };
    try {
      assert.ok((await log.read(log.highWatermark - 1n, 1 << 20)).records.length > 0);
      await log.readCut(log.highWatermark - 1n, 1 << 20, 1 << 30, cutter);
    } finally {
      fileHandle.read = fileRead;
    }
    assert.equal(fileReads, 0);
    const fromMemory = await reads();
    // Reopened, the log keeps nothing in memory: every read is a file read.
    await log.close();
    log = await LogTablet.open(dir, config);
    assert.deepEqual(fromMemory, await reads());
    await log.close();
  });

  it('stops at the byte budget of the cuts or of the stored batches, after at least one batch', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    await log.append(realBatches(), 0);
    const whole = await readAll(log);
    assert.equal((await log.readCut(0n, 1, 1 << 30, cutter)).batches.length, 1);
    const one = await log.readCut(0n, 1 << 30, 1, cutter);
    assert.deepEqual([one.batches.length, one.storedBytes], [1, whole[0].length]);
    const two = await log.readCut(0n, 1 << 30, whole[0].length + 1, cutter);
    assert.deepEqual([two.batches.length, two.storedBytes], [2, whole[0].length + whole[1].length]);
    const all = await log.readCut(0n, 1 << 30, 1 << 30, cutter);
    assert.equal(all.batches.length, whole.length);
    assert.equal((await log.readCut(log.highWatermark, 1 << 20, 1 << 30, cutter)).batches.length, 0);
    await rejectsWith(log.readCut(log.highWatermark + 1n, 1 << 20, 1 << 30, cutter), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await log.close();
  });

  it('fails with a storage error, not a loop, when a cut keeps asking for bytes it has or the batch lacks', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    await log.append(realBatches().slice(0, 2), 0);
    await rejectsWith(log.readCut(0n, 1 << 20, 1 << 30, () => HEADER_SIZE), 'LOG_STORAGE_EXCEPTION');
    await rejectsWith(log.readCut(0n, 1 << 20, 1 << 30, () => 1 << 30), 'LOG_STORAGE_EXCEPTION');
    await log.close();
  });
});
