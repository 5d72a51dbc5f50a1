import assert from 'node:assert/strict';
import { test } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { LookupRequestSchema, PrefixLookupRequestSchema } from '../rpc/gen/tributary_pb.js';
import { encodeLookupRequest, KeyFields } from './lookuper.js';

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
});
