import assert from 'node:assert/strict';
import { before, test } from 'node:test';
import { Codec, CODEC_NAMES, type CodecId, CompressionError, compressRecords, decompressRecords, initKafkaCompression } from './compression.js';
import { decodeBatch } from '../../../test/support/kafka-records.js';
import { CorruptBatchError, encodeBatch, splitBatches } from './record-batch.js';
import { compressSync } from 'snappy';

before(() => initKafkaCompression());

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('a one-record batch, byte for byte (CRC-32C over attributes to the end)', () => {
  const batch = encodeBatch({ baseOffset: 0n, records: [{ timestamp: 1000n, key: null, value: Buffer.from('a'), headers: [{ key: 'h', value: Buffer.from('v') }] }] });
  const expected = hex(`
    0000000000000000 0000003d ffffffff 02 df5237e9
    0000 00000000 00000000000003e8 00000000000003e8 ffffffffffffffff ffff ffffffff 00000001
    16 00 00 00 01 02 61 02 02 68 02 76
  `);
  assert.deepEqual(batch, expected);
  const decoded = decodeBatch(batch, 1 << 20);
  assert.deepEqual(decoded.records, [{ offsetDelta: 0, timestamp: 1000n, key: null, value: Buffer.from('a'), headers: [{ key: 'h', value: Buffer.from('v') }] }]);
});

for (const codec of [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD] as CodecId[]) {
  test(`${CODEC_NAMES[codec]}: batches decode to what was encoded`, () => {
    const records = Array.from({ length: 200 }, (_, i) => ({
      timestamp: 1_700_000_000_000n + BigInt(i),
      key: i % 7 === 0 ? null : Buffer.from(`key-${i}`),
      value: Buffer.from('x'.repeat(i % 50) + i),
      headers: i % 3 === 0 ? [{ key: 'n', value: Buffer.from(String(i)) }, { key: 'null', value: null }] : [],
    }));
    const batch = encodeBatch({ baseOffset: 42n, codec, producerId: 7n, producerEpoch: 0, baseSequence: 5, records });
    const [only] = splitBatches(Buffer.concat([batch]));
    const d = decodeBatch(only, 1 << 20);
    assert.equal(d.codec, codec);
    assert.equal(d.baseOffset, 42n);
    assert.equal(d.baseSequence, 5);
    assert.equal(d.lastOffsetDelta, 199);
    assert.deepEqual(
      d.records.map((r) => [r.timestamp, r.key, r.value, r.headers]),
      records.map((r) => [r.timestamp, r.key, r.value, r.headers]),
    );
  });
}

test('snappy without the xerial framing (as librdkafka writes it) is read too', () => {
  const raw = Buffer.from('hello hello hello hello');
  assert.deepEqual(decompressRecords(Codec.SNAPPY, compressSync(raw), 1024), raw);
});

test('zstd records past the limit, or corrupt, are refused by name', () => {
  const raw = Buffer.alloc(10_000, 'a');
  const frame = compressRecords(Codec.ZSTD, raw);
  assert.deepEqual(decompressRecords(Codec.ZSTD, frame, raw.length), raw);
  assert.throws(() => decompressRecords(Codec.ZSTD, frame, raw.length - 1), { name: 'CompressionError', message: /more than 9999 bytes/ });
  assert.throws(() => decompressRecords(Codec.ZSTD, frame.subarray(0, frame.length - 2), raw.length), CompressionError);
});

test('bad CRC, wrong magic, cut batches and a bomb past the limit are refused by name', () => {
  const batch = encodeBatch({ baseOffset: 0n, codec: Codec.GZIP, records: [{ timestamp: 0n, key: null, value: Buffer.alloc(10_000) }] });
  const flipped = Buffer.from(batch);
  flipped[flipped.length - 1] ^= 1;
  assert.throws(() => decodeBatch(flipped, 1 << 20), /CRC mismatch/);
  const magic = Buffer.from(batch);
  magic[16] = 1;
  assert.throws(() => decodeBatch(magic, 1 << 20), /magic 1/);
  assert.throws(() => splitBatches(batch.subarray(0, batch.length - 1)), CorruptBatchError);
  assert.throws(() => splitBatches(batch.subarray(0, 30)), CorruptBatchError);
  assert.throws(() => decodeBatch(batch, 1000), CompressionError);
});
