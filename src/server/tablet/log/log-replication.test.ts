import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { readLogBatchHeader } from '../../../record/log-batch.js';
import { batch, checkOffsetIndexes, idOf, logFiles, readAll, rejectsWith, split, tempDir, TEST_LOG_CONFIG as CONFIG } from './fixtures/logs.js';
import { type LogConfig, LogTablet, type LogTabletOptions } from './log-tablet.js';

const W = 7n;
const REPLICATED = { replicated: true };
/** Small segments and a dense offset index, so that cuts land in every kind of place. */
const SMALL: LogConfig = { ...CONFIG, segmentBytes: 1200, indexIntervalBytes: 200 };

const headersOf = (batches: Buffer[]) => batches.map((b) => readLogBatchHeader(b));

/** Everything a leader holds up to its durable end, as a follower fetches it. */
async function fetchAll(leader: LogTablet, from = leader.logStartOffset): Promise<Buffer[]> {
  const out: Buffer[] = [];
  let offset = from;
  while (offset < leader.durableEndOffset) {
    const { records } = await leader.read(offset, 1 << 20, 'durable-end');
    for (const b of split(records)) {
      out.push(Buffer.from(b));
      const h = readLogBatchHeader(b);
      offset = h.baseOffset + BigInt(h.lastOffsetDelta) + 1n;
    }
  }
  return out;
}

/**
 * A log of writer W's batches 0..count-1 (sequence = id, 2 records each, 150-byte payloads) written
 * by the leader epochs `epochOf(id)` over several segments.
 */
async function writtenLog(dir: string, count: number, epochOf: (id: number) => number, options: LogTabletOptions = REPLICATED): Promise<LogTablet> {
  const log = await LogTablet.open(dir, SMALL, undefined, options);
  for (let id = 0; id < count; id++) await log.append([batch(id, { records: 2, payloadBytes: 150, writerId: W, sequence: id })], epochOf(id), 'durable');
  return log;
}

describe('LogTablet replicated high watermark', () => {
  it('moves only when told, to a batch end at most the durable end, and never back', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG, undefined, REPLICATED);
    const seen: bigint[] = [];
    const durable: bigint[] = [];
    log.onHighWatermark((hw) => seen.push(hw));
    log.onDurableEnd((end) => durable.push(end));
    await log.append([batch(1, { records: 2 }), batch(2, { records: 3 }), batch(3, { records: 1 })], 0, 'durable');
    assert.equal(log.durableEndOffset, 6n);
    assert.equal(log.highWatermark, 0n);
    assert.deepEqual(durable, [6n]);
    // Clients see nothing yet; a follower reads to the durable end.
    assert.equal((await log.read(0n, 1 << 20)).records.length, 0);
    const followerRead = await log.read(0n, 1 << 20, 'durable-end');
    assert.deepEqual(split(followerRead.records).map(idOf), [1, 2, 3]);
    assert.equal(followerRead.highWatermark, 0n);

    log.advanceHighWatermark(3n); // inside batch 2: the high watermark stops at its start
    assert.equal(log.highWatermark, 2n);
    const clientRead = await log.read(0n, 1 << 20);
    assert.deepEqual(split(clientRead.records).map(idOf), [1]);
    assert.equal(clientRead.highWatermark, 2n);
    const whole = (head: Buffer) => ({ out: Buffer.from(head), copies: [] });
    assert.deepEqual((await log.readCut(0n, 1 << 20, 1 << 20, whole)).batches.map(idOf), [1]);
    assert.deepEqual((await log.readCut(2n, 1 << 20, 1 << 20, whole, 'durable-end')).batches.map(idOf), [2, 3]);

    log.advanceHighWatermark(100n); // past the durable end: stops there
    assert.equal(log.highWatermark, 6n);
    log.advanceHighWatermark(4n);
    assert.equal(log.highWatermark, 6n);
    assert.deepEqual(seen, [2n, 6n]);
    assert.deepEqual((await readAll(log)).map(idOf), [1, 2, 3]);

    // acks=1 answers after the write; the durable end follows with the fsync.
    const [written] = await log.append([batch(4)], 0, 'written');
    assert.equal(written.baseOffset, 6n);
    await assert.rejects(log.append([batch(5)], 0), /waits for 'durable' or 'written'/);
    await log.close();
  });

  it('is the durable end when not replicated, where advancing it is an error', async () => {
    const log = await LogTablet.open(tempDir(), CONFIG);
    const seen: bigint[] = [];
    log.onDurableEnd((end) => seen.push(end));
    await log.append([batch(1, { records: 4 })], 0, 'durable');
    assert.equal(log.highWatermark, 4n);
    assert.equal(log.durableEndOffset, 4n);
    assert.deepEqual(seen, [4n]);
    assert.throws(() => log.advanceHighWatermark(4n), /not replicated/);
    await log.close();
    assert.ok(!fs.existsSync(path.join(log.dir, 'high-watermark-checkpoint')));
  });

  it('is checkpointed and restored on reopen, at most the recovered log end', async () => {
    const dir = tempDir();
    const log = await writtenLog(dir, 20, () => 0);
    log.advanceHighWatermark(10n);
    await log.checkpoint();
    assert.equal(fs.readFileSync(path.join(dir, 'high-watermark-checkpoint'), 'utf8'), '0\n1\n10\n');
    log.advanceHighWatermark(30n);
    await log.close(); // close checkpoints the newer high watermark
    const reopened = await LogTablet.open(dir, SMALL, undefined, REPLICATED);
    assert.equal(reopened.highWatermark, 30n);
    assert.equal(reopened.durableEndOffset, 40n);
    assert.deepEqual((await readAll(reopened)).map(idOf), Array.from({ length: 15 }, (_, i) => i));
    // The batch ends above the restored high watermark were found again.
    reopened.advanceHighWatermark(35n);
    assert.equal(reopened.highWatermark, 34n);
    reopened.advanceHighWatermark(40n);
    assert.equal(reopened.highWatermark, 40n);
    await reopened.close();

    // A checkpoint past the log (its tail was lost): the high watermark is the recovered end.
    const last = path.join(dir, logFiles(dir).at(-1)!);
    fs.truncateSync(last, fs.statSync(last).size - 10);
    const torn = await LogTablet.open(dir, SMALL, undefined, REPLICATED);
    assert.equal(torn.logEndOffset, 38n);
    assert.equal(torn.highWatermark, 38n);
    await torn.close();

    // No checkpoint: nothing is known to be replicated.
    fs.rmSync(path.join(dir, 'high-watermark-checkpoint'));
    const unknown = await LogTablet.open(dir, SMALL, undefined, REPLICATED);
    assert.equal(unknown.highWatermark, 0n);
    unknown.advanceHighWatermark(5n);
    assert.equal(unknown.highWatermark, 4n);
    await unknown.close();
  });
});

describe('LogTablet follower append', () => {
  it('keeps the leader offsets, epochs and timestamps, and rejects a gap or a corrupt batch', async () => {
    const leader = await writtenLog(tempDir(), 12, (id) => (id < 5 ? 1 : 3));
    const fetched = await fetchAll(leader);
    const follower = await LogTablet.open(tempDir(), SMALL, undefined, REPLICATED);
    await follower.appendAsFollower(fetched.slice(0, 4));
    await follower.appendAsFollower(fetched.slice(4));
    assert.equal(follower.logEndOffset, 24n);
    assert.equal(follower.durableEndOffset, 24n);
    assert.equal(follower.latestEpoch, 3);
    assert.deepEqual(headersOf(await fetchAll(follower)), headersOf(fetched));
    assert.deepEqual(await fetchAll(follower), fetched);
    for (const epoch of [0, 1, 2, 3, 4]) assert.deepEqual(follower.endOffsetForEpoch(epoch), leader.endOffsetForEpoch(epoch));

    await leader.append([batch(12, { records: 2 }), batch(13, { records: 2 })], 3, 'durable');
    const [b12, b13] = await fetchAll(leader, 24n);
    await rejectsWith(follower.appendAsFollower([b13]), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await rejectsWith(follower.appendAsFollower([b12, b12]), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await rejectsWith(follower.appendAsFollower([fetched[11]]), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    const flipped = Buffer.from(b12);
    flipped[flipped.length - 1] ^= 0xff;
    await rejectsWith(follower.appendAsFollower([flipped, b13]), 'CORRUPT_MESSAGE');
    assert.equal(follower.logEndOffset, 24n, 'a rejected call appends nothing');
    await follower.appendAsFollower([b12, b13]);
    assert.deepEqual(await fetchAll(follower), await fetchAll(leader));

    // The follower's indexes find every batch after reopening, as the leader's do.
    await follower.close();
    assert.ok(checkOffsetIndexes(follower.dir) > 0);
    const reopened = await LogTablet.open(follower.dir, SMALL, undefined, REPLICATED);
    assert.deepEqual(await fetchAll(reopened), await fetchAll(leader));
    assert.equal(reopened.latestEpoch, 3);
    // The time index was built from the leader's commit timestamps: lookups answer as the leader's.
    reopened.advanceHighWatermark(28n);
    leader.advanceHighWatermark(28n);
    for (const h of headersOf(await fetchAll(leader))) {
      assert.equal(await reopened.offsetForTimestamp(h.commitTimestamp), await leader.offsetForTimestamp(h.commitTimestamp));
    }
    await reopened.close();
    await leader.close();
  });

  it('learns the writers, so that a retry is a duplicate once the follower leads, also after reopening', async () => {
    const leader = await writtenLog(tempDir(), 8, () => 1);
    const follower = await LogTablet.open(tempDir(), SMALL, undefined, REPLICATED);
    await follower.appendAsFollower(await fetchAll(leader));
    await leader.close();

    const check = async (log: LogTablet, epoch: number) => {
      const [dup] = await log.append([batch(7, { records: 2, writerId: W, sequence: 7 })], epoch, 'durable');
      assert.deepEqual([dup.baseOffset, dup.lastOffset, dup.duplicate], [14n, 15n, true]);
      const [old] = await log.append([batch(3, { records: 2, writerId: W, sequence: 3 })], epoch, 'durable');
      assert.deepEqual([old.baseOffset, old.duplicate], [6n, true]);
      await rejectsWith(log.append([batch(9, { writerId: W, sequence: 9 })], epoch, 'durable'), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    };
    await check(follower, 2);
    await follower.close();
    const reopened = await LogTablet.open(follower.dir, SMALL, undefined, REPLICATED);
    await check(reopened, 2);
    const [next] = await reopened.append([batch(8, { writerId: W, sequence: 8 })], 2, 'durable');
    assert.deepEqual([next.baseOffset, next.duplicate], [16n, false]);
    await reopened.close();
  });
});

describe('LogTablet truncation', () => {
  it('cuts before the batch holding the offset: files, indexes, epochs, writers and high watermark, also after reopening', async () => {
    const dir = tempDir();
    // Epoch 1 writes ids 0..9 (offsets 0..19), epoch 2 ids 10..19, epoch 4 ids 20..29.
    const log = await writtenLog(dir, 30, (id) => (id < 10 ? 1 : id < 20 ? 2 : 4));
    log.advanceHighWatermark(50n);
    const segmentsBefore = logFiles(dir);
    assert.ok(segmentsBefore.length >= 6, segmentsBefore.join(', '));
    await log.truncateTo(60n); // at the log end: nothing to cut
    assert.equal(log.logEndOffset, 60n);

    await log.truncateTo(33n); // inside id 16, offsets 32..33, in the segment starting at 30
    const crashed = tempDir();
    fs.cpSync(dir, crashed, { recursive: true }); // the files as a crash right now would leave them

    const expectCut = async (l: LogTablet) => {
      assert.equal(l.logEndOffset, 32n);
      assert.equal(l.durableEndOffset, 32n);
      assert.equal(l.highWatermark, 32n);
      assert.deepEqual((await readAll(l)).map(idOf), Array.from({ length: 16 }, (_, i) => i));
      assert.equal(l.latestEpoch, 2);
      assert.deepEqual(l.endOffsetForEpoch(4), { epoch: 2, endOffset: 32n });
      assert.deepEqual(l.endOffsetForEpoch(1), { epoch: 1, endOffset: 20n });
      // The writer's last batch left is a duplicate; the first one cut is next.
      const [dup] = await l.append([batch(15, { records: 2, writerId: W, sequence: 15 })], 5, 'durable');
      assert.deepEqual([dup.baseOffset, dup.duplicate], [30n, true]);
      await rejectsWith(l.append([batch(17, { writerId: W, sequence: 17 })], 5, 'durable'), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    };
    await expectCut(log);
    assert.deepEqual(logFiles(dir), segmentsBefore.filter((f) => BigInt(f.slice(0, 20)) < 32n));
    assert.ok(checkOffsetIndexes(dir) > 0);
    const [again] = await log.append([batch(16, { records: 2, writerId: W, sequence: 16 })], 5, 'durable');
    assert.deepEqual([again.baseOffset, again.duplicate], [32n, false]);
    assert.deepEqual(log.endOffsetForEpoch(4), { epoch: 2, endOffset: 32n });
    assert.deepEqual(log.endOffsetForEpoch(5), { epoch: 5, endOffset: 34n });
    await log.close();
    const reopened = await LogTablet.open(dir, SMALL, undefined, REPLICATED);
    assert.equal(reopened.logEndOffset, 34n);
    assert.deepEqual((await readAll(reopened, 1 << 20, 'durable-end')).map(idOf), Array.from({ length: 17 }, (_, i) => i));
    await reopened.close();

    assert.ok(checkOffsetIndexes(crashed) > 0);
    const afterCrash = await LogTablet.open(crashed, SMALL, undefined, REPLICATED);
    await expectCut(afterCrash);
    await afterCrash.close();
  });

  it('cuts at a segment start and at the log start, keeping the segment as the active one', async () => {
    const dir = tempDir();
    const log = await writtenLog(dir, 20, () => 1, {});
    const bases = logFiles(dir).map((f) => BigInt(f.slice(0, 20)));
    await log.truncateTo(bases[2]);
    assert.deepEqual(logFiles(dir).map((f) => BigInt(f.slice(0, 20))), bases.slice(0, 3));
    assert.equal(fs.statSync(path.join(dir, logFiles(dir)[2])).size, 0);
    assert.equal(log.logEndOffset, bases[2]);
    assert.equal(log.highWatermark, bases[2]); // not replicated: the high watermark is the durable end
    const [r] = await log.append([batch(99, { records: 2 })], 1);
    assert.equal(r.baseOffset, bases[2]);
    await log.truncateTo(0n);
    assert.deepEqual(logFiles(dir), ['00000000000000000000.log']);
    assert.equal(log.logEndOffset, 0n);
    assert.equal(log.latestEpoch, -1);
    // The writer's every batch was cut: it starts again at sequence 0.
    await rejectsWith(log.append([batch(1, { writerId: W, sequence: 20 })], 1), 'UNKNOWN_WRITER_ID_EXCEPTION');
    await log.close();
    const reopened = await LogTablet.open(dir, SMALL);
    assert.equal(reopened.logEndOffset, 0n);
    await reopened.close();
  });

  it('finds, below the cut, the batches of a writer whose retained ones were all cut', async () => {
    const dir = tempDir();
    const log = await writtenLog(dir, 12, () => 1);
    // Writer W's retained batches are ids 7..11 (offsets 14..23): cut them all.
    await log.truncateTo(14n);
    const [dup] = await log.append([batch(4, { records: 2, writerId: W, sequence: 4 })], 1, 'durable');
    assert.deepEqual([dup.baseOffset, dup.duplicate], [8n, true]);
    const [next] = await log.append([batch(7, { records: 2, writerId: W, sequence: 7 })], 1, 'durable');
    assert.deepEqual([next.baseOffset, next.duplicate], [14n, false]);
    await log.close();
  });

  it('starts the log again at an offset below its start', async () => {
    let now = 1_000;
    const log = await LogTablet.open(tempDir(), { ...SMALL, ttlMs: 1000 }, undefined, { replicated: true, clock: () => now });
    for (let id = 0; id < 20; id++) await log.append([batch(id, { records: 2 })], 1, 'durable');
    log.advanceHighWatermark(40n);
    now += 10_000;
    assert.ok((await log.deleteExpiredSegments(now)) > 0);
    assert.ok(log.logStartOffset > 10n);
    await log.truncateTo(10n);
    assert.deepEqual([log.logStartOffset, log.logEndOffset, log.highWatermark, log.latestEpoch], [10n, 10n, 10n, -1]);
    assert.deepEqual(logFiles(log.dir), ['00000000000000000010.log']);
    await log.close();
  });

  it('starts again at an offset past the old log', async () => {
    const dir = tempDir();
    const log = await writtenLog(dir, 10, () => 2);
    log.advanceHighWatermark(20n);
    await log.truncateFullyAndStartAt(500n);
    const expectEmpty = (l: LogTablet) => {
      assert.deepEqual([l.logStartOffset, l.logEndOffset, l.durableEndOffset, l.highWatermark], [500n, 500n, 500n, 500n]);
      assert.equal(l.latestEpoch, -1);
      assert.deepEqual(l.endOffsetForEpoch(2), { epoch: -1, endOffset: -1n });
    };
    expectEmpty(log);
    assert.deepEqual(logFiles(dir), ['00000000000000000500.log']);
    await rejectsWith(log.read(0n, 100), 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION');
    await log.close();

    const reopened = await LogTablet.open(dir, SMALL, undefined, REPLICATED);
    expectEmpty(reopened);
    await rejectsWith(reopened.append([batch(10, { writerId: W, sequence: 10 })], 3, 'durable'), 'UNKNOWN_WRITER_ID_EXCEPTION');
    // A leader's batches from its log start on follow.
    const leader = await LogTablet.open(tempDir(), SMALL);
    await leader.truncateFullyAndStartAt(500n);
    await leader.append([batch(1, { records: 3 })], 3);
    await reopened.appendAsFollower(await fetchAll(leader));
    assert.equal(reopened.logEndOffset, 503n);
    reopened.advanceHighWatermark(503n);
    assert.deepEqual((await readAll(reopened)).map(idOf), [1]);
    await reopened.close();
    await leader.close();
  });
});

describe('LogTablet endOffsetForEpoch', () => {
  it('answers with the largest epoch at most the asked one and where it ends', async () => {
    const log = await LogTablet.open(tempDir(), SMALL, undefined, REPLICATED);
    assert.deepEqual(log.endOffsetForEpoch(0), { epoch: -1, endOffset: -1n });
    // Epoch 2 writes offsets 0..9, 4 offsets 10..19, 7 offsets 20..29, one batch per offset.
    for (const epoch of [2, 4, 7]) {
      for (let i = 0; i < 10; i++) await log.append([batch(i)], epoch, 'durable');
    }
    const cases: [number, number, bigint][] = [
      [1, -1, -1n], // before the first epoch
      [2, 2, 10n],
      [3, 2, 10n], // an epoch that never wrote: the one before it
      [4, 4, 20n],
      [7, 7, 30n], // the latest ends at the log end
      [9, 7, 30n],
    ];
    for (const [asked, epoch, endOffset] of cases) assert.deepEqual(log.endOffsetForEpoch(asked), { epoch, endOffset }, `epoch ${asked}`);
    await log.truncateTo(15n);
    assert.deepEqual(log.endOffsetForEpoch(7), { epoch: 4, endOffset: 15n });
    assert.deepEqual(log.endOffsetForEpoch(4), { epoch: 4, endOffset: 15n });
    assert.deepEqual(log.endOffsetForEpoch(2), { epoch: 2, endOffset: 10n });
    await log.close();
  });
});
