import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { TributaryError } from '../../../common/errors.js';
import { WRITER_SNAPSHOT_FILE, WriterStateManager } from './writer-state.js';
import { testTempDir } from '../../../common/fixtures/temp-dirs.js';

const tempDir = () => testTempDir('writers');

// Snapshot at offset 10 of writer 42 with batches (seq 0, offsets 3..5, ts 1000) and (seq 1, 6..6, ts 2000).
const FIXTURE = Buffer.from(
  [
    '0100', // Version
    '1d774d9f', // Crc
    '0a00000000000000', // Offset 10
    '01000000', // WriterCount
    '2a00000000000000', // WriterId 42
    '02000000', // BatchCount
    '00000000' + '0300000000000000' + '0500000000000000' + 'e803000000000000',
    '01000000' + '0600000000000000' + '0600000000000000' + 'd007000000000000',
  ].join(''),
  'hex',
);

const rejectsWith = (fn: () => unknown, errorName: string) =>
  assert.throws(fn, (err: unknown) => err instanceof TributaryError && err.errorName === errorName);

describe('WriterStateManager', () => {
  it('takes from a later snapshot the batches below an offset, and refuses an earlier snapshot', () => {
    // Writer 42's batches end at offsets 5 and 6: below 6 it has sequence 0 only.
    const below = WriterStateManager.below(6n, FIXTURE, 'fixture')!;
    assert.equal(below.writerCount, 1);
    assert.equal(below.begin().check(42n, 0)?.baseOffset, 3n, 'the batch below is a duplicate');
    assert.equal(below.begin().check(42n, 1), undefined, 'the next one follows on');
    assert.equal(WriterStateManager.below(4n, FIXTURE, 'fixture')!.writerCount, 0, 'no batch of the writer ends below 4');
    assert.equal(WriterStateManager.below(11n, FIXTURE, 'fixture'), undefined, 'a snapshot at 10 says nothing of 10 and after');
  });

  it('saves and loads its snapshot grammar byte for byte', async () => {
    const dir = tempDir();
    const state = new WriterStateManager();
    state.replay(42n, { sequence: 0, baseOffset: 3n, lastOffset: 5n, timestamp: 1000 });
    state.replay(42n, { sequence: 1, baseOffset: 6n, lastOffset: 6n, timestamp: 2000 });
    await WriterStateManager.save(dir, state.snapshot(10n));
    assert.deepEqual(fs.readFileSync(path.join(dir, WRITER_SNAPSHOT_FILE)), FIXTURE);

    const loaded = await WriterStateManager.load(dir);
    assert.equal(loaded?.offset, 10n);
    const append = loaded!.state.begin();
    assert.deepEqual(append.check(42n, 0), { sequence: 0, baseOffset: 3n, lastOffset: 5n, timestamp: 1000 });
    assert.equal(append.check(42n, 2), undefined);
  });

  it('refuses a snapshot whose CRC does not match', async () => {
    const dir = tempDir();
    const damaged = Buffer.from(FIXTURE);
    damaged[30] ^= 1;
    fs.writeFileSync(path.join(dir, WRITER_SNAPSHOT_FILE), damaged);
    await assert.rejects(WriterStateManager.load(dir), /CRC/);
    assert.equal(await WriterStateManager.load(tempDir()), undefined);
  });

  it('stages batches of one append and applies them only on commit', () => {
    const state = new WriterStateManager();
    const first = state.begin();
    assert.equal(first.check(1n, 0), undefined);
    first.record(1n, { sequence: 0, baseOffset: 0n, lastOffset: 0n, timestamp: 1 });
    assert.equal(first.check(1n, 1), undefined);
    assert.equal(first.check(1n, 0)?.baseOffset, 0n);
    // Not committed: the writer is still unknown.
    rejectsWith(() => state.begin().check(1n, 1), 'UNKNOWN_WRITER_ID_EXCEPTION');
    first.commit();
    assert.equal(state.begin().check(1n, 1), undefined);
    rejectsWith(() => state.begin().check(1n, 2), 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
  });

  it('wraps the sequence after the largest i32', () => {
    const state = new WriterStateManager();
    state.replay(1n, { sequence: 0x7fffffff, baseOffset: 0n, lastOffset: 0n, timestamp: 1 });
    assert.equal(state.begin().check(1n, 0), undefined);
  });

  it('expires idle writers and forgets batches past a cut log end', () => {
    const state = new WriterStateManager();
    state.replay(1n, { sequence: 0, baseOffset: 0n, lastOffset: 0n, timestamp: 100 });
    state.replay(2n, { sequence: 0, baseOffset: 1n, lastOffset: 1n, timestamp: 500 });
    state.replay(2n, { sequence: 1, baseOffset: 2n, lastOffset: 3n, timestamp: 600 });
    assert.equal(state.removeExpired(1000, 600), 1); // writer 1: 100 < 400
    assert.equal(state.writerCount, 1);
    state.truncateFrom(2n);
    assert.equal(state.begin().check(2n, 1), undefined); // batch 1 is gone: it is next again
    state.truncateFrom(0n);
    assert.equal(state.writerCount, 0);
  });
});

describe('record-counted sequences (a Kafka producer)', () => {
  it('a batch follows when its first record sequence is one past the last record of the one before', () => {
    const state = new WriterStateManager();
    const append = state.begin();
    // Batches of 3 and 2 records: last-record sequences 2 and 4.
    assert.equal(append.check(9n, 2, 3), undefined);
    append.record(9n, { sequence: 2, baseOffset: 0n, lastOffset: 2n, timestamp: 1 });
    assert.equal(append.check(9n, 4, 2), undefined);
    append.record(9n, { sequence: 4, baseOffset: 3n, lastOffset: 4n, timestamp: 1 });
    append.commit();
    const retry = state.begin();
    assert.equal(retry.check(9n, 2, 3)?.baseOffset, 0n, 'a retried batch is the original');
    assert.throws(() => retry.check(9n, 9, 2), (e: TributaryError) => e.errorName === 'OUT_OF_ORDER_SEQUENCE_EXCEPTION');
    assert.throws(() => state.begin().check(10n, 0, 3), (e: TributaryError) => e.errorName === 'UNKNOWN_WRITER_ID_EXCEPTION');
  });
});
