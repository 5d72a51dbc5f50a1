import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ApiVersions, Fetch, JoinGroup, Metadata, OffsetFetch, Produce } from './apis/index.js';
import type { FetchResponse } from './apis/fetch.js';
import { readRequestHeaderRest, readRequestHeaderStart, responseHeaderVersion, writeRequestHeader, writeResponseHeader } from './headers.js';
import { KafkaDecodeError, Reader, Writer } from './primitives.js';
import { decodeMessage, encodeMessage } from './schema.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

test('varint, varlong and unsigned varint follow the protocol guide', () => {
  const cases: [number, string][] = [
    [0, '00'],
    [-1, '01'],
    [1, '02'],
    [-64, '7f'],
    [64, '8001'],
    [300, 'd804'],
    [2147483647, 'feffffff0f'],
    [-2147483648, 'ffffffff0f'],
  ];
  for (const [v, bytes] of cases) {
    assert.equal(new Writer().varint(v).finish().toString('hex'), bytes, `varint ${v}`);
    assert.equal(new Reader(hex(bytes)).varint(), v);
    assert.equal(new Writer().varlong(BigInt(v)).finish().toString('hex'), bytes, `varlong ${v}`);
    assert.equal(new Reader(hex(bytes)).varlong(), BigInt(v));
  }
  assert.equal(new Writer().varlong(-(2n ** 63n)).finish().toString('hex'), 'ffffffffffffffffff01');
  assert.equal(new Writer().uvarint(300).finish().toString('hex'), 'ac02');
  assert.throws(() => new Reader(hex('ffffffffff01')).uvarint(), KafkaDecodeError);
});

test('ApiVersions v3 request: header v2 (client id as int16 string, tagged fields) and compact strings', () => {
  // api key 18, version 3, correlation id 7, client id "kcat" (int16 length), header tagged fields,
  // then compact strings "librdkafka" (length + 1 = 0x0b) and "2.0.2", body tagged fields.
  const bytes = hex('0012 0003 00000007 0004 6b636174 00  0b 6c696272646b61666b61  06 322e302e32  00');
  const r = new Reader(bytes);
  const start = readRequestHeaderStart(r);
  assert.deepEqual(start, { apiKey: 18, apiVersion: 3, correlationId: 7 });
  assert.equal(readRequestHeaderRest(r, ApiVersions, 3), 'kcat');
  const body = decodeMessage(ApiVersions.request, 3, r);
  assert.deepEqual(body, { clientSoftwareName: 'librdkafka', clientSoftwareVersion: '2.0.2' });
  assert.equal(r.remaining, 0);
  const w = writeRequestHeader(new Writer(), ApiVersions, { ...start, clientId: 'kcat' });
  assert.deepEqual(encodeMessage(ApiVersions.request, 3, body, w).finish(), bytes);
});

test('ApiVersions response v0 and v3, byte for byte', () => {
  const value = { errorCode: 0, apiKeys: [{ apiKey: 0, minVersion: 3, maxVersion: 9 }], throttleTimeMs: 0 };
  const v0 = hex('0000 00000001 0000 0003 0009');
  assert.deepEqual(encodeMessage(ApiVersions.response, 0, value).finish(), v0);
  const v3 = hex('0000 02 0000 0003 0009 00 00000000 00');
  assert.deepEqual(encodeMessage(ApiVersions.response, 3, value).finish(), v3);
  assert.deepEqual(decodeMessage(ApiVersions.response, 3, new Reader(v3)), value);
  // Always header v0, even at the flexible version.
  assert.equal(responseHeaderVersion(ApiVersions, 3), 0);
  assert.equal(responseHeaderVersion(Fetch, 12), 1);
  assert.deepEqual(writeResponseHeader(new Writer(), 1, 5).finish(), hex('00000005 00'));
});

test('Metadata request: an empty topic array in v0, a null array from v1, compact in v9', () => {
  assert.deepEqual(decodeMessage(Metadata.request, 0, new Reader(hex('00000000'))), {
    topics: [],
    allowAutoTopicCreation: true,
    includeClusterAuthorizedOperations: false,
    includeTopicAuthorizedOperations: false,
  });
  assert.equal((decodeMessage(Metadata.request, 1, new Reader(hex('ffffffff'))) as { topics: unknown }).topics, null);
  const v9 = hex('02 0274 00  00 00 01 00'); // [ "t" ], allow auto-creation false, both operations flags, tagged
  const req = decodeMessage(Metadata.request, 9, new Reader(hex('02 0274 00 00 00 01 00')));
  assert.deepEqual(req, { topics: [{ name: 't' }], allowAutoTopicCreation: false, includeClusterAuthorizedOperations: false, includeTopicAuthorizedOperations: true });
  assert.deepEqual(encodeMessage(Metadata.request, 9, req).finish(), v9);
});

test('Metadata response v1: broker with a null rack, one topic, one partition', () => {
  const value = {
    brokers: [{ nodeId: 0, host: 'h', port: 9092, rack: null }],
    controllerId: 0,
    topics: [{ errorCode: 0, name: 't', isInternal: false, partitions: [{ errorCode: 0, partitionIndex: 0, leaderId: 0, replicaNodes: [0], isrNodes: [0] }] }],
  };
  const bytes = hex(`
    00000001 00000000 0001 68 00002384 ffff
    00000000
    00000001 0000 0001 74 00
      00000001 0000 00000000 00000000 00000001 00000000 00000001 00000000
  `);
  assert.deepEqual(encodeMessage(Metadata.response, 1, value).finish(), bytes);
});

test('Produce request v3: transactional id null, records as int32-length bytes', () => {
  const bytes = hex('ffff ffff 00007530 00000001 0001 74 00000001 00000002 00000003 aabbcc');
  const req = decodeMessage(Produce.request, 3, new Reader(bytes));
  assert.deepEqual(req, { transactionalId: null, acks: -1, timeoutMs: 30000, topics: [{ name: 't', partitions: [{ partitionIndex: 2, records: hex('aabbcc') }] }] });
  assert.deepEqual(encodeMessage(Produce.request, 3, req).finish(), bytes);
});

test('Fetch response v12 writes CurrentLeader as tagged field 1 and skips tagged fields left at their defaults', () => {
  const value: Partial<FetchResponse> & { responses: unknown[] } = {
    throttleTimeMs: 0,
    errorCode: 0,
    sessionId: 0,
    responses: [
      {
        topic: 't',
        partitions: [
          { partitionIndex: 0, errorCode: 0, highWatermark: 5n, lastStableOffset: 5n, logStartOffset: 0n, currentLeader: { leaderId: 1, leaderEpoch: 0 }, abortedTransactions: null, preferredReadReplica: -1, records: hex('') },
        ],
      },
    ],
  };
  const bytes = hex(`
    00000000 0000 00000000
    02 0274
      02 00000000 0000 0000000000000005 0000000000000005 0000000000000000
         00 ffffffff 01
         01 01 09 00000001 00000000 00
      00
    00
  `);
  assert.deepEqual(encodeMessage(Fetch.response, 12, value).finish(), bytes);
  const back = decodeMessage<FetchResponse>(Fetch.response, 12, new Reader(bytes));
  assert.deepEqual((back.responses[0].partitions[0] as unknown as { currentLeader: unknown }).currentLeader, { leaderId: 1, leaderEpoch: 0 });
});

test('truncated and fuzzed bodies fail as KafkaDecodeError, never RangeError', () => {
  const good = encodeMessage(Produce.request, 9, { acks: 1, timeoutMs: 1, topics: [{ name: 'abc', partitions: [{ partitionIndex: 0, records: Buffer.alloc(40, 1) }] }] }).finish();
  for (let cut = 0; cut < good.length; cut++) {
    assert.throws(() => decodeMessage(Produce.request, 9, new Reader(good.subarray(0, cut))), KafkaDecodeError, `cut at ${cut}`);
  }
  assert.throws(() => decodeMessage(Metadata.request, 1, new Reader(hex('7fffffff'))), KafkaDecodeError);
});

test('JoinGroup request v5: a new member (empty id), no instance id, one protocol with opaque metadata', () => {
  const bytes = hex('0001 67  00000bb8 0000ea60  0000  ffff  0008 636f6e73756d6572  00000001 0005 72616e6765 00000002 0001');
  const req = decodeMessage(JoinGroup.request, 5, new Reader(bytes));
  assert.deepEqual(req, { groupId: 'g', sessionTimeoutMs: 3000, rebalanceTimeoutMs: 60000, memberId: '', groupInstanceId: null, protocolType: 'consumer', protocols: [{ name: 'range', metadata: hex('0001') }] });
  assert.deepEqual(encodeMessage(JoinGroup.request, 5, req).finish(), bytes);
  // v0 has no rebalance timeout: it decodes to -1, the session timeout stands in.
  const v0 = decodeMessage<{ rebalanceTimeoutMs: number }>(JoinGroup.request, 0, new Reader(hex('0001 67 00000bb8 0000 0008 636f6e73756d6572 00000000')));
  assert.equal(v0.rebalanceTimeoutMs, -1);
});

test('OffsetFetch response v6 (flexible): compact arrays and strings, a null metadata, the top-level error code', () => {
  const value = { throttleTimeMs: 0, topics: [{ name: 't', partitions: [{ partitionIndex: 0, committedOffset: 5n, committedLeaderEpoch: -1, metadata: null, errorCode: 0 }] }], errorCode: 0 };
  const bytes = hex('00000000 02 0274 02 00000000 0000000000000005 ffffffff 00 0000 00 00 0000 00');
  assert.deepEqual(encodeMessage(OffsetFetch.response, 6, value).finish(), bytes);
  assert.deepEqual(decodeMessage(OffsetFetch.response, 6, new Reader(bytes)), value);
  // v1 has neither the leader epoch nor the top-level error code.
  assert.deepEqual(encodeMessage(OffsetFetch.response, 1, value).finish(), hex('00000001 0001 74 00000001 00000000 0000000000000005 ffff 0000'));
});
