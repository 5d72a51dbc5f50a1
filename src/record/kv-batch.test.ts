import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { crc32c } from '@node-rs/crc32';
import { TributaryError } from '../common/errors.js';
import { buildKvBatch, KV_BATCH_HEADER_SIZE, KvBatchBuilder, kvRecordSize, readKvBatch, splitKvBatches } from './kv-batch.js';

const named = (name: string, message?: RegExp) => (e: unknown): boolean => e instanceof TributaryError && e.errorName === name && (!message || message.test(e.message));
const hexOf = (parts: string[]): Buffer => Buffer.from(parts.join('').replace(/\s+/g, ''), 'hex');

/** Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): an independent reference. */
function referenceCrc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) {
    crc ^= b;
    for (let k = 0; k < 8; k++) crc = crc & 1 ? (crc >>> 1) ^ 0x82f63b78 : crc >>> 1;
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const longKey = Buffer.alloc(130, 0x6b);
const records = [
  { key: Buffer.from([1, 2]), row: Buffer.from([0, 0x64]) },
  { key: Buffer.from('a'), row: null },
  { key: longKey, row: Buffer.from([0, 0x0a]) },
];

const fixture = hexOf([
  'B1000000', // Length: 181 - 4
  '00', // Magic
  'D4772FDC', // CRC-32C of bytes [9, 181)
  '0300', // SchemaId 3
  '00', // Attributes
  '0700000000000000', // WriterId 7
  '05000000', // BatchSequence 5
  '03000000', // RecordCount
  '05000000 02 0102 0064', // upsert: key 01 02, row 00 64
  '02000000 01 61', // delete of key 'a': the record ends after the key
  '86000000 8201', // upsert: Length 134, KeyLength 130 as a two-byte varint
  '6B'.repeat(130),
  '000A',
]);

/** `buf` with its CRC made right again, so that checks behind the CRC are reached. */
function withCrc(buf: Buffer): Buffer {
  buf.writeUInt32LE(crc32c(buf.subarray(9)), 5);
  return buf;
}

describe('KV batch', () => {
  it('builds the fixture bytes', () => {
    const built = buildKvBatch({ schemaId: 3, writerId: 7n, batchSequence: 5, records });
    assert.equal(built.toString('hex'), fixture.toString('hex'));
    assert.equal(referenceCrc32c(fixture.subarray(9)), fixture.readUInt32LE(5));
  });

  it('builds the fixture bytes record by record from views of a reused buffer, growing from a small start', () => {
    const builder = new KvBatchBuilder(30);
    const scratch = Buffer.alloc(256);
    for (const { key, row } of records) {
      // The builder copies at once: the scratch bytes change before the next record.
      key.copy(scratch);
      row?.copy(scratch, key.length);
      builder.add(scratch.subarray(0, key.length), row && scratch.subarray(key.length, key.length + row.length));
      scratch.fill(0xee);
    }
    assert.equal(builder.recordCount, 3);
    assert.equal(builder.sizeInBytes, fixture.length);
    assert.equal(builder.finish(3, 7n, 5).toString('hex'), fixture.toString('hex'));
  });

  it('reads the fixture bytes, keys and rows as views of them', () => {
    const batch = readKvBatch(fixture);
    assert.deepEqual({ ...batch, records: undefined }, { schemaId: 3, writerId: 7n, batchSequence: 5, records: undefined });
    assert.deepEqual(
      batch.records.map((r) => [Buffer.from(r.key).toString('hex'), r.row && Buffer.from(r.row).toString('hex')]),
      records.map((r) => [r.key.toString('hex'), r.row && r.row.toString('hex')]),
    );
    assert.equal(batch.records[0].key.buffer, fixture.buffer);
  });

  it('marks a writer without idempotence with -1, and allows a batch without records', () => {
    const empty = buildKvBatch({ schemaId: 1, records: [] });
    assert.equal(empty.length, KV_BATCH_HEADER_SIZE);
    assert.deepEqual(readKvBatch(empty), { schemaId: 1, writerId: -1n, batchSequence: -1, records: [] });
  });

  it('counts record sizes as they are laid out', () => {
    const total = records.reduce((n, r) => n + kvRecordSize(r.key, r.row), KV_BATCH_HEADER_SIZE);
    assert.equal(total, fixture.length);
  });

  it('refuses records that would read back as something else', () => {
    assert.throws(() => buildKvBatch({ schemaId: 1, records: [{ key: new Uint8Array(0), row: null }] }), named('INVALID_ARGUMENT'));
    assert.throws(() => buildKvBatch({ schemaId: 1, records: [{ key: new Uint8Array(1), row: new Uint8Array(0) }] }), named('INVALID_ARGUMENT'));
  });

  it('rejects every truncation and any extra byte as CORRUPT_MESSAGE', () => {
    for (let len = 0; len < fixture.length; len++) assert.throws(() => readKvBatch(fixture.subarray(0, len)), named('CORRUPT_MESSAGE'), `${len} bytes`);
    assert.throws(() => readKvBatch(Buffer.concat([fixture, Buffer.alloc(1)])), named('CORRUPT_MESSAGE', /declares 181 bytes, 182 present/));
  });

  it('rejects any changed byte after the CRC field with CORRUPT_RECORD_EXCEPTION', () => {
    for (let i = 5; i < fixture.length; i++) {
      if (i === 11) continue; // Attributes: refused as framing before the CRC
      const changed = Buffer.from(fixture);
      changed[i] ^= 0x10;
      assert.throws(() => readKvBatch(changed), named('CORRUPT_RECORD_EXCEPTION', /CRC-32C/), `byte ${i}`);
    }
  });

  it('rejects bad magic, attributes and record framing behind a valid CRC', () => {
    const tamper = (at: number, write: (b: Buffer) => void): Buffer => {
      const b = Buffer.from(fixture);
      write(b.subarray(at));
      return withCrc(b);
    };
    const cases: [Buffer, RegExp][] = [
      [tamper(4, (b) => b.writeInt8(1)), /unsupported magic 1/],
      [tamper(11, (b) => b.writeInt8(2)), /unknown attributes 2/],
      [tamper(24, (b) => b.writeInt32LE(-1)), /record count -1/],
      [tamper(24, (b) => b.writeInt32LE(1 << 30)), /record count 1073741824/],
      [tamper(24, (b) => b.writeInt32LE(2)), /138 bytes after the last of 2 records/],
      [tamper(24, (b) => b.writeInt32LE(4)), /record 3 of 4 starts past the end/],
      [tamper(28, (b) => b.writeInt32LE(1000)), /record 0 declares 1000 bytes/],
      [tamper(28, (b) => b.writeInt32LE(-5)), /record 0 declares -5 bytes/],
      [tamper(32, (b) => b.writeUInt8(0)), /record 0 has a key of 0 bytes/],
      [tamper(32, (b) => b.writeUInt8(5)), /record 0 has a key of 5 bytes in a record of 5/],
      [tamper(37, (b) => b.writeInt32LE(0)), /record 1 has no readable key length/],
      [tamper(47, (b) => b.fill(0xff, 0, 5)), /record 2 has no readable key length/],
    ];
    for (const [bytes, message] of cases) assert.throws(() => readKvBatch(bytes), named('CORRUPT_MESSAGE', message), String(message));
  });

  it('splits concatenated batches, checking that each is whole', () => {
    const second = buildKvBatch({ schemaId: 2, writerId: 7n, batchSequence: 6, records: [{ key: Buffer.from('z'), row: null }] });
    const both = Buffer.concat([fixture, second, fixture]);
    const split = splitKvBatches(both);
    assert.deepEqual(split.map((b) => b.length), [fixture.length, second.length, fixture.length]);
    assert.deepEqual(split.map((b) => readKvBatch(b).batchSequence), [5, 6, 5]);
    assert.deepEqual(splitKvBatches(Buffer.alloc(0)), []);
    assert.throws(() => splitKvBatches(both.subarray(0, both.length - 1)), named('CORRUPT_MESSAGE', /declares 181 bytes, 180 present/));
    assert.throws(() => splitKvBatches(Buffer.concat([fixture, Buffer.alloc(27)])), named('CORRUPT_MESSAGE', /truncated header at byte 181/));
    const tooShort = Buffer.from(second);
    tooShort.writeInt32LE(10, 0);
    assert.throws(() => splitKvBatches(tooShort), named('CORRUPT_MESSAGE', /declares 14 bytes/));
  });
});
