import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { crc32c } from '@node-rs/crc32';
import type * as arrow from 'apache-arrow';
import { buildSchema, type TableInfo } from '../common/schema.js';
import { encodeArrowPayload } from '../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import { Writer } from './protocol/primitives.js';
import { Codec, CODEC_NAMES, type CodecId, initKafkaCompression } from './records/compression.js';
import { decodeBatch } from '../../test/support/kafka-records.js';
import { BATCH_HEADER_SIZE, encodeBatch, openBatch } from './records/record-batch.js';
import { decodeHeaders, encodeHeaders, RAW_TOPIC_COLUMNS, topicMapping } from './topic-mapping.js';

before(() => initKafkaCompression());

const LIMIT = 1 << 20;
const tableOf = (columns: typeof RAW_TOPIC_COLUMNS, properties: Record<string, string> = {}): TableInfo => ({
  path: { database: 'kafka', table: 't' },
  tableId: 1,
  schemaId: 0,
  schema: buildSchema(columns),
  partitionKeys: [],
  bucketCount: 1,
  bucketKeys: [],
  properties,
  createdTime: 0,
  modifiedTime: 0,
});
const rawTable = tableOf(RAW_TOPIC_COLUMNS);
const raw = topicMapping(rawTable);

const payloadOf = (batch: arrow.RecordBatch): Buffer => Buffer.from(encodeArrowPayload(batch, 'NONE'));

/** The raw columns of `batches` appended record object by record object, as the mapping did before it read fields straight from the records. */
function throughObjects(batches: Buffer[]): Buffer {
  const b = new ColumnBatchBuilder(rawTable.schema);
  for (const batch of batches) {
    for (const r of decodeBatch(batch, LIMIT).records) b.appendInternalRow([r.key, r.value, r.headers.length > 0 ? encodeHeaders(r.headers) : null, r.timestamp * 1000n]);
  }
  return payloadOf(b.build());
}

function appendRaw(b: ColumnBatchBuilder, batch: Buffer): void {
  raw.append(b, openBatch(batch, LIMIT).records);
}

/** The raw columns of `batches` appended by the mapping, into one builder reused through transient batches. */
function direct(batches: Buffer[], b = new ColumnBatchBuilder(rawTable.schema)): Buffer {
  for (const batch of batches) appendRaw(b, batch);
  return payloadOf(b.buildTransient());
}

type NewRecord = Parameters<typeof encodeBatch>[0]['records'][number];

/** Records of every shape: keys or none, null and empty and long values, headers or none (null values, non-ASCII keys), spread timestamps. */
function records(n: number, seed: number): NewRecord[] {
  return Array.from({ length: n }, (_, i) => ({
    timestamp: 1_700_000_000_000n + BigInt((i * seed) % 5) - (i % 9 === 4 ? 100_000n : 0n),
    key: (i + seed) % 4 === 0 ? null : Buffer.from(`key-${i}`),
    value: (i + seed) % 7 === 3 ? null : (i + seed) % 7 === 5 ? Buffer.alloc(0) : Buffer.from('v'.repeat((i * 13 + seed) % 150) + i),
    headers: (i + seed) % 3 === 0 ? [{ key: 'trace', value: Buffer.from(String(i)) }, { key: 'ñ', value: null }, { key: '', value: Buffer.alloc(70, i) }] : [],
  }));
}

/** `body` (records written by hand) in the header of `template`, an uncompressed batch, with its count and a valid CRC. */
function reframe(template: Buffer, body: Uint8Array, count: number, lastOffsetDelta = count - 1): Buffer {
  const out = Buffer.concat([template.subarray(0, BATCH_HEADER_SIZE), body]);
  out.writeInt32BE(out.length - 12, 8);
  out.writeInt32BE(lastOffsetDelta, 23);
  out.writeInt32BE(count, 57);
  out.writeUInt32BE(crc32c(out.subarray(21)), 17);
  return out;
}

/** A record whose fields after the offset delta are `rest` as written: its length, attributes 0, timestamp delta 0. */
function recordOf(offsetDelta: number, rest: number[]): Buffer {
  const fields = new Writer(16).int8(0).varlong(0n).varint(offsetDelta).finish();
  const w = new Writer(16).varint(fields.length + rest.length);
  return Buffer.concat([w.finish(), fields, Buffer.from(rest)]);
}

describe('raw topic mapping', () => {
  for (const codec of [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD] as CodecId[]) {
    it(`${CODEC_NAMES[codec]}: gives exactly the Arrow columns of the record objects`, () => {
      const batches = [records(300, 1), records(1, 2), records(40, 3)].map((r, i) => encodeBatch({ baseOffset: BigInt(i), codec, records: r }));
      const expected = throughObjects(batches);
      assert.deepEqual(direct(batches), expected);
      // The builder reused, as the broker reuses it per table schema.
      const b = new ColumnBatchBuilder(rawTable.schema);
      for (const batch of batches) assert.deepEqual(direct([batch], b), throughObjects([batch]));
    });
  }

  it('without keys, headers or nulls: values and timestamps only', () => {
    const batch = encodeBatch({ baseOffset: 0n, records: Array.from({ length: 50 }, (_, i) => ({ timestamp: 1000n + BigInt(i % 3), key: null, value: Buffer.alloc(100, i) })) });
    const b = new ColumnBatchBuilder(rawTable.schema);
    appendRaw(b, batch);
    const out = b.build();
    assert.equal(out.getChild('headers')!.nullCount, 50);
    assert.equal(out.getChild('key')!.nullCount, 50);
    assert.deepEqual(out.getChild('value')!.get(7), new Uint8Array(100).fill(7));
    assert.equal(out.getChild('timestamp')!.data[0].values[5], 1002_000n);
    assert.deepEqual(payloadOf(out), throughObjects([batch]));
  });

  it('stores headers written other than as the encoder writes them as they decode, encoded again', () => {
    const template = encodeBatch({ baseOffset: 0n, records: [] });
    const headers = [
      [0x02, 0x02, 0x68, 0x02, 0x76], // canonical: 1 header, 'h' = 'v', stored as is
      [0x82, 0x00, 0x02, 0x68, 0x02, 0x76], // the count in two bytes
      [0x02, 0x82, 0x00, 0x68, 0x02, 0x76], // the key length in two bytes
      [0x02, 0x02, 0x68, 0x81, 0x00], // a null value in two bytes
      [0x02, 0x04, 0x61, 0xff, 0x02, 0x76], // a key that is not UTF-8
      [0x80, 0x00], // no headers, in two bytes: null as for none
    ];
    const body = Buffer.concat(headers.map((h, i) => recordOf(i, [0x01, 0x01, ...h])));
    const batch = reframe(template, body, headers.length);
    const b = new ColumnBatchBuilder(rawTable.schema);
    appendRaw(b, batch);
    const out = b.build();
    const stored = Array.from({ length: headers.length }, (_, i) => out.getChild('headers')!.get(i) as Uint8Array | null);
    assert.deepEqual(stored.map((h) => (h === null ? null : [...h])), [
      [0x02, 0x02, 0x68, 0x02, 0x76],
      [0x02, 0x02, 0x68, 0x02, 0x76],
      [0x02, 0x02, 0x68, 0x02, 0x76],
      [0x02, 0x02, 0x68, 0x01],
      [0x02, 0x08, 0x61, 0xef, 0xbf, 0xbd, 0x02, 0x76],
      null,
    ]);
    assert.deepEqual(decodeHeaders(stored[4]!), [{ key: 'a\ufffd', value: Buffer.from('v') }]);
    assert.deepEqual(payloadOf(out), throughObjects([batch]));
  });

  it('refuses a malformed batch with the error of the object decode and leaves no row of it, whatever byte breaks it', () => {
    const good = encodeBatch({ baseOffset: 0n, records: records(3, 2) });
    const template = encodeBatch({ baseOffset: 0n, records: [] });
    const body = Buffer.concat([good.subarray(BATCH_HEADER_SIZE), recordOf(3, [0x04, 0x6b, 0x31, 0x00, 0x02, 0x02, 0x68, 0x00])]);
    const count = 4;
    const broken: { name: string; batch: Buffer }[] = [
      { name: 'count one short', batch: reframe(template, body, count - 1) },
      { name: 'count one over', batch: reframe(template, body, count + 1) },
      { name: 'last offset delta', batch: reframe(template, body, count, count) },
    ];
    const badCrc = reframe(template, body, count);
    badCrc[badCrc.length - 1] ^= 1;
    broken.push({ name: 'a bad CRC', batch: badCrc });
    for (let len = 0; len < body.length; len++) broken.push({ name: `cut at ${len}`, batch: reframe(template, body.subarray(0, len), count) });
    for (let at = 0; at < body.length; at++) {
      for (const byte of [0x00, 0x01, 0x7f, 0x80, 0xff, body[at] ^ 0x02]) {
        const mutated = Buffer.from(body);
        mutated[at] = byte;
        broken.push({ name: `byte ${at} = ${byte}`, batch: reframe(template, mutated, count) });
      }
    }
    const b = new ColumnBatchBuilder(rawTable.schema);
    appendRaw(b, good);
    const size = b.estimatedSizeInBytes;
    const errors = new Set<string>();
    for (const { name, batch } of broken) {
      let expected: Error | undefined;
      try {
        decodeBatch(batch, LIMIT);
      } catch (err) {
        expected = err as Error;
      }
      if (expected === undefined) {
        // Still a batch: the same columns either way.
        assert.deepEqual(direct([batch]), throughObjects([batch]), name);
        continue;
      }
      errors.add(expected.message.replace(/\d+/g, 'N'));
      assert.throws(() => appendRaw(b, batch), (err: Error) => err.constructor === expected.constructor && err.message === expected.message, name);
      assert.equal(b.rowCount, 3, name);
      assert.equal(b.estimatedSizeInBytes, size, name);
    }
    // Errors of every kind were met, after records already appended too.
    for (const kind of ['record batch CRC mismatch', 'last offset delta N with N records', 'N bytes after the last of N records', 'header with a null key', 'header count N', 'length -N', 'record N has offset delta N', 'varint cut off at position N', 'N records in N bytes']) {
      assert.ok(errors.has(kind), `${kind} in ${[...errors].join('; ')}`);
    }
    assert.ok([...errors].some((e) => /^needs N bytes/.test(e)));
    assert.ok([...errors].some((e) => /^record N declares N bytes/.test(e)));
    // Nothing of any refused batch is left: the next good one follows the first.
    appendRaw(b, good);
    assert.deepEqual(payloadOf(b.build()), throughObjects([good, good]));
  });
});

describe('json topic mapping', () => {
  const json = topicMapping(tableOf([{ name: 'id', type: 'BIGINT', nullable: true }], { 'kafka.value.format': 'json' }));
  const schema = buildSchema([{ name: 'id', type: 'BIGINT', nullable: true }]);

  it('reads every record before converting any: a batch that does not decode fails as that, not as its first bad row', () => {
    const batch = encodeBatch({ baseOffset: 0n, records: ['{"id":1}', 'not json', '{"id":3}'].map((v) => ({ timestamp: 0n, key: null, value: Buffer.from(v) })) });
    const b = new ColumnBatchBuilder(schema);
    assert.throws(() => json.append(b, openBatch(batch, LIMIT).records), { errorName: 'INVALID_ROW', message: /record 1 of the batch: the value is not JSON/ });
    const cut = reframe(batch, batch.subarray(BATCH_HEADER_SIZE, batch.length - 2), 3);
    assert.throws(() => json.append(b, openBatch(cut, LIMIT).records), { name: 'KafkaDecodeError' });
    assert.equal(b.rowCount, 0);
    const good = encodeBatch({ baseOffset: 0n, records: [{ timestamp: 0n, key: null, value: Buffer.from('{"id":7}') }] });
    json.append(b, openBatch(good, LIMIT).records);
    assert.equal(b.build().getChild('id')!.get(0), 7n);
  });
});
