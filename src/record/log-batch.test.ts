import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { crc32c } from '@node-rs/crc32';
import { buildSchema } from '../common/schema.js';
import { encodeArrowPayload } from './arrow-payload.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import {
  buildLogBatch,
  buildLogBatchInHeadroom,
  computeCrc,
  HEADER_SIZE,
  isCrcValid,
  logBatchPayload,
  type NewLogBatch,
  readLogBatchHeader,
  splitLogBatches,
  stampLogBatch,
} from './log-batch.js';

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: a check on the library. */
function referenceCrc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (crc & 1 ? 0x82f63b78 : 0);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/**
 * A batch with an 8-byte payload, assembled by hand from the grammar in log-batch.ts:
 * BaseOffset 1000, Length 52, Magic 2, CommitTimestamp 1700000000000, LeaderEpoch 5,
 * CRC 0xd569f4ec, SchemaId 3, Attributes 1 (append-only), LastOffsetDelta 2, WriterId 42,
 * BatchSequence 7, RecordCount 3, StatisticsLength 0, payload "payload!".
 */
const FIXTURE = hex(`
  e803000000000000 34000000 02 0068e5cf8b010000 05000000 ecf469d5
  0300 01 02000000 2a00000000000000 07000000 03000000 00000000
  7061796c6f616421`);

const FIXTURE_BATCH: NewLogBatch = { schemaId: 3, appendOnly: true, recordCount: 3, payload: Buffer.from('payload!'), writerId: 42n, batchSequence: 7 };

describe('log batch', () => {
  it('uses CRC-32C (check value of "123456789" is 0xE3069283)', () => {
    assert.equal(crc32c(Buffer.from('123456789')), 0xe3069283);
    assert.equal(referenceCrc32c(Buffer.from('123456789')), 0xe3069283);
    assert.equal(computeCrc(FIXTURE), referenceCrc32c(FIXTURE.subarray(29)));
  });

  it('encodes the fixture byte for byte', () => {
    const built = buildLogBatch(FIXTURE_BATCH);
    stampLogBatch(built, 0, 1000n, 1_700_000_000_000n, 5);
    assert.equal(built.toString('hex'), FIXTURE.toString('hex'));
  });

  it('decodes the fixture field by field', () => {
    assert.deepEqual(readLogBatchHeader(FIXTURE), {
      baseOffset: 1000n,
      sizeInBytes: 64,
      magic: 2,
      commitTimestamp: 1_700_000_000_000n,
      leaderEpoch: 5,
      crc: 0xd569f4ec,
      schemaId: 3,
      appendOnly: true,
      recordSequences: false,
      lastOffsetDelta: 2,
      writerId: 42n,
      batchSequence: 7,
      recordCount: 3,
      statisticsLength: 0,
    });
    assert.equal(logBatchPayload(FIXTURE).toString(), 'payload!');
    assert.ok(isCrcValid(FIXTURE));
  });

  it('builds unstamped batches that are not idempotent by default', () => {
    const b = buildLogBatch({ schemaId: 1, appendOnly: false, recordCount: 0, payload: new Uint8Array(0) });
    assert.equal(b.length, HEADER_SIZE);
    const h = readLogBatchHeader(b);
    assert.deepEqual([h.baseOffset, h.commitTimestamp, h.leaderEpoch, h.writerId, h.batchSequence, h.appendOnly, h.lastOffsetDelta], [0n, 0n, 0, -1n, -1, false, 0]);
    assert.ok(isCrcValid(b));
  });

  it('stamps offset, timestamp and epoch in place without touching the CRC', () => {
    const buf = Buffer.concat([Buffer.alloc(5), buildLogBatch(FIXTURE_BATCH)]);
    const crc = readLogBatchHeader(buf, 5).crc;
    stampLogBatch(buf, 5, 2n ** 40n, 123n, 9);
    const h = readLogBatchHeader(buf, 5);
    assert.deepEqual([h.baseOffset, h.commitTimestamp, h.leaderEpoch, h.crc], [2n ** 40n, 123n, 9, crc]);
    assert.ok(isCrcValid(buf.subarray(5)));
    assert.deepEqual(buf.subarray(0, 5), Buffer.alloc(5));
  });

  it('splits concatenated batches', () => {
    const second = buildLogBatch({ schemaId: 4, appendOnly: false, recordCount: 1, payload: Buffer.from('xyz') });
    const batches = splitLogBatches(Buffer.concat([FIXTURE, second]));
    assert.deepEqual(batches.map((b) => b.toString('hex')), [FIXTURE.toString('hex'), second.toString('hex')]);
    assert.deepEqual(splitLogBatches(Buffer.alloc(0)), []);
  });

  it('rejects malformed batches with named errors', () => {
    const mutated = (change: (b: Buffer) => void): Buffer => {
      const b = Buffer.from(FIXTURE);
      change(b);
      return b;
    };
    const cases: [string, Buffer, string][] = [
      ['truncated header', FIXTURE.subarray(0, HEADER_SIZE - 1), 'CORRUPT_MESSAGE'],
      ['truncated second header', Buffer.concat([FIXTURE, FIXTURE.subarray(0, 20)]), 'CORRUPT_MESSAGE'],
      ['length beyond the buffer', mutated((b) => b.writeInt32LE(53, 8)), 'CORRUPT_MESSAGE'],
      ['length shorter than a header', mutated((b) => b.writeInt32LE(40, 8)), 'CORRUPT_MESSAGE'],
      ['negative length', mutated((b) => b.writeInt32LE(-1, 8)), 'CORRUPT_MESSAGE'],
      ['bad magic', mutated((b) => b.writeInt8(1, 12)), 'CORRUPT_MESSAGE'],
      ['statistics past the end', mutated((b) => b.writeInt32LE(9, 52)), 'CORRUPT_MESSAGE'],
      ['negative record count', mutated((b) => b.writeInt32LE(-1, 48)), 'CORRUPT_MESSAGE'],
      ['payload bit flipped', mutated((b) => (b[60] ^= 1)), 'CORRUPT_RECORD_EXCEPTION'],
      ['schema id changed', mutated((b) => b.writeInt16LE(4, 29)), 'CORRUPT_RECORD_EXCEPTION'],
      ['CRC changed', mutated((b) => (b[25] ^= 0x80)), 'CORRUPT_RECORD_EXCEPTION'],
    ];
    for (const [why, buf, errorName] of cases) assert.throws(() => splitLogBatches(buf), { errorName }, why);
  });
});

it('builds a batch in the payload headroom equal to one built by copying', () => {
  const builder = new ColumnBatchBuilder(buildSchema([{ name: 'a', type: 'INT' }, { name: 's', type: 'STRING' }]));
  builder.appendRow({ a: 1, s: 'x' });
  builder.appendRow({ a: 2, s: null });
  const rb = builder.build();
  const fields = { schemaId: 3, appendOnly: true, recordCount: 2, writerId: 9n, batchSequence: 4 };
  const copied = buildLogBatch({ ...fields, payload: encodeArrowPayload(rb, 'NONE') });
  const inPlace = buildLogBatchInHeadroom({ ...fields, payload: encodeArrowPayload(rb, 'NONE', 3, HEADER_SIZE) });
  assert.deepEqual(inPlace, copied);
  assert.throws(() => buildLogBatchInHeadroom({ ...fields, payload: encodeArrowPayload(rb, 'NONE') }), RangeError);
});
