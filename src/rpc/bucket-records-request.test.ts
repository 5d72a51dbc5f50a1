import assert from 'node:assert/strict';
import { test } from 'node:test';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { ProduceLogRequestSchema, PutKvRequestSchema } from './gen/tributary_pb.js';
import { encodeBucketRecordsRequest } from './bucket-records-request.js';

const join = (parts: Uint8Array[]): Uint8Array => Buffer.concat(parts);

test('ProduceLog requests encode exactly as protobuf does, batches as separate parts', () => {
  const a = Buffer.from('first batch');
  const b = Buffer.from('second');
  const parts = encodeBucketRecordsRequest({
    acks: -1,
    tableId: 9_007_199_254_740_993n,
    timeoutMs: 30_000,
    buckets: [
      { bucketId: 0, batches: [a, b] },
      { partitionId: 0n, bucketId: 200, batches: [] },
      { partitionId: 70_000n, bucketId: 3, batches: [b] },
    ],
  });
  assert.ok(parts.includes(a) && parts.includes(b), 'batches are passed through, not copied');
  const expected = toBinary(
    ProduceLogRequestSchema,
    create(ProduceLogRequestSchema, {
      acks: -1,
      tableId: 9_007_199_254_740_993n,
      timeoutMs: 30_000,
      bucketsReq: [
        { bucketId: 0, records: Buffer.concat([a, b]) },
        { partitionId: 0n, bucketId: 200, records: new Uint8Array(0) },
        { partitionId: 70_000n, bucketId: 3, records: b },
      ],
    }),
  );
  assert.deepEqual(Buffer.from(join(parts)), Buffer.from(expected));
});

test('PutKv requests carry packed target columns and read back with the generated decoder', () => {
  const batch = Buffer.alloc(300, 7);
  const parts = encodeBucketRecordsRequest({ acks: 1, tableId: 5n, timeoutMs: 0, targetColumns: [0, 2, 130], buckets: [{ bucketId: 1, batches: [batch] }] });
  const decoded = fromBinary(PutKvRequestSchema, join(parts));
  assert.equal(decoded.acks, 1);
  assert.equal(decoded.tableId, 5n);
  assert.deepEqual(decoded.targetColumns, [0, 2, 130]);
  assert.equal(decoded.bucketsReq.length, 1);
  assert.equal(decoded.bucketsReq[0].bucketId, 1);
  assert.deepEqual(Buffer.from(decoded.bucketsReq[0].records), batch);
  const none = fromBinary(PutKvRequestSchema, join(encodeBucketRecordsRequest({ acks: -1, tableId: 5n, timeoutMs: 1, targetColumns: [], buckets: [{ bucketId: 0, batches: [batch] }] })));
  assert.deepEqual(none.targetColumns, []);
  assert.equal(none.bucketsReq[0].records.length, 300);
});
