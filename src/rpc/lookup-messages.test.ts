import assert from 'node:assert/strict';
import { test } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { LookupRequestSchema, LookupResponseSchema, PrefixLookupRequestSchema } from './gen/tributary_pb.js';
import { decodeLookupRequest, decodeLookupResponse, encodeLookupRequest, KeyFields, LookupResponseWriter } from './lookup-messages.js';

function fieldsOf(keys: Uint8Array[]): KeyFields {
  const fields = new KeyFields();
  for (const k of keys) fields.add(k);
  return fields;
}

const long = new Uint8Array(300).map((_, i) => i);
const buckets = [
  { bucket: 3, keys: [Uint8Array.of(1), long] },
  { partitionId: 2 ** 40 + 5, bucket: 0, keys: [Uint8Array.of(7, 8)] },
  { partitionId: 1, bucket: 200, keys: Array.from({ length: 100 }, (_, i) => Uint8Array.of(i, i)) },
];

test('a hand-encoded lookup request reads back as the message it stands for, and is its protobuf encoding byte for byte', () => {
  const parts = encodeLookupRequest(2 ** 33 + 9, buckets.map((b) => ({ ...b, keys: fieldsOf(b.keys) })));
  const bytes = new Uint8Array(Buffer.concat(parts));
  const expected = create(LookupRequestSchema, {
    tableId: 2n ** 33n + 9n,
    bucketsReq: buckets.map((b) => ({ ...(b.partitionId !== undefined ? { partitionId: BigInt(b.partitionId) } : {}), bucketId: b.bucket, keys: b.keys })),
  });
  assert.deepEqual(fromBinary(LookupRequestSchema, bytes), expected);
  assert.deepEqual(fromBinary(PrefixLookupRequestSchema, bytes).bucketsReq.map((b) => b.keys.length), [2, 1, 100]);
  // protobuf-es leaves out a bucket id of 0 (proto3's default); the hand encoding writes it, which reads the same.
  const withoutZero = encodeLookupRequest(9, [buckets[0], buckets[2]].map((b) => ({ ...b, keys: fieldsOf(b.keys) })));
  const reference = toBinary(LookupRequestSchema, create(LookupRequestSchema, { tableId: 9n, bucketsReq: [buckets[0], buckets[2]].map((b) => ({ ...(b.partitionId !== undefined ? { partitionId: BigInt(b.partitionId) } : {}), bucketId: b.bucket, keys: b.keys })) }));
  assert.equal(Buffer.concat(withoutZero).toString('hex'), Buffer.from(reference).toString('hex'));
  assert.deepEqual(fromBinary(LookupRequestSchema, Buffer.concat(encodeLookupRequest(4, []))), create(LookupRequestSchema, { tableId: 4n }));
});

test('the server reads a lookup request as written by hand or by protobuf-es, keys as views of the body', () => {
  const expected = { tableId: 2 ** 33 + 9, buckets: buckets.map((b) => ({ partitionId: b.partitionId, bucketId: b.bucket, keys: b.keys })) };
  const hand = new Uint8Array(Buffer.concat(encodeLookupRequest(expected.tableId, buckets.map((b) => ({ ...b, keys: fieldsOf(b.keys) })))));
  const read = decodeLookupRequest(hand);
  assert.deepEqual(read, expected);
  assert.equal(read.buckets[0].keys[1].buffer, hand.buffer);
  // protobuf-es leaves out bucket id 0; an unknown field (9, varint) and fields out of order are read past.
  const proto = toBinary(LookupRequestSchema, create(LookupRequestSchema, { tableId: BigInt(expected.tableId), bucketsReq: buckets.map((b) => ({ ...(b.partitionId !== undefined ? { partitionId: BigInt(b.partitionId) } : {}), bucketId: b.bucket, keys: b.keys })) }));
  assert.deepEqual(decodeLookupRequest(Uint8Array.from([0x12, 0x07, 0x1a, 0x01, 0x05, 0x48, 0x01, 0x10, 0x02, ...proto, 0x48, 0x03])), { tableId: expected.tableId, buckets: [{ partitionId: undefined, bucketId: 2, keys: [Uint8Array.of(5)] }, ...expected.buckets] });
  assert.throws(() => decodeLookupRequest(proto.subarray(0, proto.length - 1)), /runs past/);
});

/** The answers of a response: per bucket its values (hex, null when absent) or its error. */
type Answers = ({ values: (string | null)[] } | { errorCode: number; errorMessage: string })[];

const answers: { partitionId?: number; bucketId: number; answer: Answers[number] }[] = [
  { bucketId: 1, answer: { values: ['01', null, Buffer.from(long).toString('hex'), '', 'ff00'] } },
  { partitionId: 2 ** 40 + 5, bucketId: 200, answer: { errorCode: 43, errorMessage: 'no such bücket' } },
  { partitionId: 7, bucketId: 2, answer: { values: Array.from({ length: 300 }, (_, i) => (i % 3 === 0 ? null : Buffer.alloc(i, i).toString('hex'))) } },
  { bucketId: 4, answer: { errorCode: -1, errorMessage: 'unexpected' } },
  { bucketId: 5, answer: { values: [] } },
];

function write(bucketsAnswered: typeof answers): Uint8Array {
  const out = new LookupResponseWriter(2);
  for (const b of bucketsAnswered) {
    out.bucket(b.partitionId, b.bucketId);
    if ('values' in b.answer) for (const v of b.answer.values) out.value(v === null ? undefined : Buffer.from(v, 'hex'));
    else {
      // Values written before a failure are dropped with it.
      out.value(Uint8Array.of(9, 9));
      out.value(undefined);
      out.error(b.answer.errorCode, b.answer.errorMessage);
    }
  }
  return new Uint8Array(Buffer.concat(out.finish()));
}

function reference(bucketsAnswered: typeof answers): Uint8Array {
  return toBinary(
    LookupResponseSchema,
    create(LookupResponseSchema, {
      bucketsResp: bucketsAnswered.map((b) => ({
        ...(b.partitionId !== undefined ? { partitionId: BigInt(b.partitionId) } : {}),
        bucketId: b.bucketId,
        ...('values' in b.answer ? { values: b.answer.values.map((v) => (v === null ? {} : { values: Buffer.from(v, 'hex') })) } : b.answer),
      })),
    }),
  );
}

function read(body: Uint8Array): Answers {
  return decodeLookupResponse(body).map((b) =>
    b.errorCode !== undefined ? { errorCode: b.errorCode, errorMessage: b.errorMessage ?? '' } : { values: b.values.map((v) => (v === undefined ? null : Buffer.from(v).toString('hex'))) },
  );
}

test('a hand-written lookup response is its protobuf encoding byte for byte (bucket ids other than 0), and both read back as what was written', () => {
  const written = write(answers);
  assert.equal(Buffer.from(written).toString('hex'), Buffer.from(reference(answers)).toString('hex'));
  assert.deepEqual(read(written), answers.map((b) => b.answer));
  assert.deepEqual(read(reference(answers)), answers.map((b) => b.answer));
  // An empty value is a present one: the key holds a row of no bytes, which is not "not found".
  assert.deepEqual(fromBinary(LookupResponseSchema, written).bucketsResp[0].values.map((v) => v.values?.length), [1, undefined, 300, 0, 2]);
  const zero = [{ bucketId: 0, answer: { values: ['0a0b'] } }];
  assert.deepEqual(fromBinary(LookupResponseSchema, write(zero)), fromBinary(LookupResponseSchema, reference(zero)));
  assert.deepEqual(read(Buffer.concat(new LookupResponseWriter(2).finish())), []);
});

test('the lookup response reader takes fields in any order, skips unknown ones and rejects cut or malformed bytes', () => {
  // bucket: values first, then an unknown varint field 9, bucket id, an unknown fixed64 and fixed32, then error-free end
  const value = [0x2a, 0x03, 0x0a, 0x01, 0x07];
  const bucket = [...value, 0x48, 0x96, 0x01, 0x10, 0x03, 0x31, 1, 2, 3, 4, 5, 6, 7, 8, 0x3d, 1, 2, 3, 4, 0x2a, 0x00];
  const body = Uint8Array.from([0x52, 0x01, 0x00, 0x0a, bucket.length, ...bucket]);
  assert.deepEqual(read(body), [{ values: ['07', null] }]);
  for (let cut = 1; cut < body.length; cut++) {
    if (cut === 3) continue; // the unknown field 10 alone is a whole message
    assert.throws(() => decodeLookupResponse(body.subarray(0, cut)), { name: 'TributaryError', errorName: 'CORRUPT_MESSAGE' } as object, `cut at ${cut}`);
  }
  assert.throws(() => decodeLookupResponse(Uint8Array.of(0x0b)), /wire type 3/);
  assert.throws(() => decodeLookupResponse(Uint8Array.of(0x0a, 0x02, 0x2a, 0x05)), /runs past/);
});

test('a lookup of a negative or fractional bucket or partition id is refused before anything is written', () => {
  for (const b of [{ bucket: -1 }, { bucket: 1.5 }, { partitionId: -3, bucket: 0 }]) {
    assert.throws(() => encodeLookupRequest(1, [{ ...b, keys: fieldsOf([new Uint8Array([1])]) }]), (err: { errorName?: string }) => err.errorName === 'INVALID_ARGUMENT');
  }
});
