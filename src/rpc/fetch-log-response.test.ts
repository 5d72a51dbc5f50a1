import assert from 'node:assert/strict';
import { test } from 'node:test';
import { create, toBinary } from '@bufbuild/protobuf';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { encodeFetchLogResponse } from './fetch-log-response.js';
import { FetchLogResponseSchema } from './gen/tributary_pb.js';

const joined = (parts: Uint8Array[]): Buffer => Buffer.concat(parts);
const protobufOf = (init: MessageInitShape<typeof FetchLogResponseSchema>): Buffer => Buffer.from(toBinary(FetchLogResponseSchema, create(FetchLogResponseSchema, init)));

const big = new Uint8Array(70_000).map((_, i) => i % 251);

const responses: [string, MessageInitShape<typeof FetchLogResponseSchema>][] = [
  ['no tables', { tablesResp: [] }],
  ['a table without buckets', { tablesResp: [{ tableId: 7n, bucketsResp: [] }] }],
  [
    'buckets with records, empty records, ids of every size',
    {
      tablesResp: [
        {
          tableId: 0n,
          bucketsResp: [
            { bucketId: 0, highWatermark: 0n, logStartOffset: 0n, records: new Uint8Array(0) },
            { bucketId: 3, highWatermark: 2n ** 40n, logStartOffset: 12n, records: Uint8Array.of(1, 2, 3) },
            { partitionId: 2n ** 50n, bucketId: 200, highWatermark: 5n, logStartOffset: 0n, records: big },
          ],
        },
        { tableId: 123_456_789_012n, bucketsResp: [{ partitionId: 0n, bucketId: 1, highWatermark: 1n, logStartOffset: 1n, records: big.subarray(5, 300) }] },
      ],
    },
  ],
  [
    'failed buckets: error fields, unknown offsets (-1), a message in UTF-8',
    {
      tablesResp: [
        {
          tableId: 9n,
          bucketsResp: [
            { bucketId: 2, errorCode: 15, errorMessage: 'not the leader of bucket 2 — ask again', highWatermark: -1n, logStartOffset: -1n },
            { bucketId: 4, errorCode: 0, errorMessage: '', highWatermark: 10n, logStartOffset: 3n, records: Uint8Array.of(9) },
          ],
        },
      ],
    },
  ],
];

for (const [what, init] of responses) {
  test(`a hand-encoded FetchLog response is its protobuf encoding byte for byte: ${what}`, () => {
    assert.deepEqual(joined(encodeFetchLogResponse(init)), protobufOf(init));
  });
}

test('the records of a FetchLog response are sent as they are, not copied', () => {
  const records = big.subarray(10, 5000);
  const parts = encodeFetchLogResponse({ tablesResp: [{ tableId: 1n, bucketsResp: [{ bucketId: 1, highWatermark: 9n, records }] }] });
  assert.ok(parts.includes(records));
});
