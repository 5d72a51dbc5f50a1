import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import type { KafkaApi } from './api.js';
import {
  ApiVersions,
  CreatePartitions,
  CreateTopics,
  DeleteTopics,
  DescribeConfigs,
  DescribeGroups,
  Fetch,
  FindCoordinator,
  Heartbeat,
  InitProducerId,
  JoinGroup,
  KAFKA_APIS,
  LeaveGroup,
  ListGroups,
  ListOffsets,
  Metadata,
  OffsetCommit,
  OffsetFetch,
  Produce,
  SyncGroup,
} from './apis/index.js';
import { KafkaErrors } from './error-codes.js';
import { errorResponse } from './error-response.js';
import { Reader } from './primitives.js';
import { decodeMessage, encodeMessage, inRange } from './schema.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');
const CODE = KafkaErrors.NOT_LEADER_OR_FOLLOWER;

/** A request of each API naming two topics (or resources) and two partitions of the first. */
const REQUESTS = new Map<KafkaApi, object>([
  [Produce, { transactionalId: null, acks: -1, timeoutMs: 1000, topics: [{ name: 'a', partitions: [{ partitionIndex: 0, records: null }, { partitionIndex: 3, records: null }] }, { name: 'b', partitions: [] }] }],
  [Fetch, { replicaId: -1, maxWaitMs: 0, minBytes: 1, maxBytes: 1, isolationLevel: 0, sessionId: 0, sessionEpoch: -1, topics: [{ topic: 'a', partitions: [{ partition: 0 }, { partition: 3 }] }, { topic: 'b', partitions: [] }] }],
  [ListOffsets, { replicaId: -1, isolationLevel: 0, topics: [{ name: 'a', partitions: [{ partitionIndex: 0, timestamp: -1n }, { partitionIndex: 3, timestamp: -2n }] }, { name: 'b', partitions: [] }] }],
  [Metadata, { topics: [{ name: 'a' }, { name: 'b' }], allowAutoTopicCreation: false }],
  [ApiVersions, { clientSoftwareName: 'x', clientSoftwareVersion: '1' }],
  [CreateTopics, { topics: [{ name: 'a', numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }, { name: 'b', numPartitions: 1, replicationFactor: 1, assignments: [], configs: [] }], timeoutMs: 1, validateOnly: false }],
  [DeleteTopics, { topicNames: ['a', 'b'], timeoutMs: 1 }],
  [InitProducerId, { transactionalId: null, transactionTimeoutMs: 1 }],
  [DescribeConfigs, { resources: [{ resourceType: 2, resourceName: 'a', configurationKeys: null }, { resourceType: 2, resourceName: 'b', configurationKeys: null }], includeSynonyms: false }],
  [CreatePartitions, { topics: [{ name: 'a', count: 2, assignments: null }, { name: 'b', count: 2, assignments: null }], timeoutMs: 1, validateOnly: false }],
  [FindCoordinator, { key: 'g', keyType: 0 }],
  [JoinGroup, { groupId: 'g', sessionTimeoutMs: 6000, rebalanceTimeoutMs: 6000, memberId: '', groupInstanceId: null, protocolType: 'consumer', protocols: [] }],
  [SyncGroup, { groupId: 'g', generationId: 1, memberId: 'm', groupInstanceId: null, assignments: [] }],
  [Heartbeat, { groupId: 'g', generationId: 1, memberId: 'm', groupInstanceId: null }],
  [LeaveGroup, { groupId: 'g', memberId: 'm', members: [] }],
  [ListGroups, { statesFilter: [] }],
  [
    OffsetCommit,
    {
      groupId: 'g',
      generationId: 1,
      memberId: 'm',
      groupInstanceId: null,
      retentionTimeMs: -1n,
      topics: [{ name: 'a', partitions: [{ partitionIndex: 0, committedOffset: 1n, committedMetadata: null }, { partitionIndex: 3, committedOffset: 1n, committedMetadata: null }] }, { name: 'b', partitions: [] }],
    },
  ],
  [OffsetFetch, { groupId: 'g', topics: [{ name: 'a', partitionIndexes: [0, 3] }, { name: 'b', partitionIndexes: [] }] }],
  [DescribeGroups, { groups: ['a', 'b'], includeAuthorizedOperations: false }],
]);

/** kafkajs's decoder of `api`'s response at `version`, when kafkajs has one. */
const kafkajsRequire = createRequire(import.meta.url);
const kafkajsRequests = join(dirname(kafkajsRequire.resolve('kafkajs/package.json')), 'src/protocol/requests');
function kafkajsDecoder(api: KafkaApi, version: number): { decode(b: Buffer): Promise<Record<string, unknown>>; parse(d: unknown): Promise<unknown> } | undefined {
  const file = join(kafkajsRequests, api.name[0].toLowerCase() + api.name.slice(1), `v${version}`, 'response.js');
  return existsSync(file) ? (kafkajsRequire(file) as ReturnType<typeof kafkajsDecoder>) : undefined;
}

/** Where the code must be: the top level, or every requested item at the highest level with an ErrorCode. */
function assertErrorPlaced(api: KafkaApi, version: number, decoded: Record<string, unknown>): void {
  const hasCode = (fields: KafkaApi['response']['fields']) => fields.some((f) => f.name === 'ErrorCode' && inRange(f.versions, version));
  if (hasCode(api.response.fields)) {
    assert.equal(decoded.errorCode, CODE);
    return;
  }
  const mirror = api.errorItems!;
  const items = decoded[mirror.response] as Record<string, unknown>[];
  assert.equal(items.length, 2, `${api.name} v${version}: one item per requested topic`);
  const keyOf = (i: Record<string, unknown>) => Object.keys(mirror.keys).map((k) => String(i[k])).join('/');
  assert.deepEqual(items.map(keyOf), mirror.keys.resourceType ? ['2/a', '2/b'] : ['a', 'b']);
  if (mirror.items) {
    const partitions = items[0][mirror.items.response] as Record<string, unknown>[];
    assert.deepEqual(
      partitions.map((p) => [p.partitionIndex, p.errorCode]),
      [
        [0, CODE],
        [3, CODE],
      ],
    );
    assert.deepEqual(items[1][mirror.items.response], []);
  } else {
    for (const i of items) assert.equal(i.errorCode, CODE);
  }
}

test('every API at every version answers an error in its own response shape, readable by our codec and by kafkajs', async () => {
  let byKafkajs = 0;
  for (const api of KAFKA_APIS) {
    const request = REQUESTS.get(api);
    assert.ok(request, `a sample request for ${api.name}`);
    for (let v = api.minVersion; v <= api.maxVersion; v++) {
      const bytes: Buffer = encodeMessage(api.response, v, errorResponse(api, v, request, CODE, 'leader moved')).finish();
      const r: Reader = new Reader(bytes);
      const decoded = decodeMessage<Record<string, unknown>>(api.response, v, r);
      assert.equal(r.remaining, 0, `${api.name} v${v}: every byte is the response's`);
      assertErrorPlaced(api, v, decoded);

      const kafkajs = kafkajsDecoder(api, v);
      if (!kafkajs) continue;
      byKafkajs++;
      const theirs = await kafkajs.decode(bytes);
      const failed = (await kafkajs.parse(theirs).then(
        () => undefined,
        (e: unknown) => e,
      )) as { type?: string; errors?: { type: string }[] } | undefined;
      // kafkajs's parse throws a partition's or topic's error (several at once as an aggregate); a
      // top-level one it leaves in the decoded value.
      const types = failed ? [failed.type, ...(failed.errors ?? []).map((e) => e.type)] : [];
      assert.ok(types.includes('NOT_LEADER_FOR_PARTITION') || theirs.errorCode === CODE, `${api.name} v${v}: kafkajs reads the error (${JSON.stringify(failed ?? theirs, (_, x: unknown) => (typeof x === 'bigint' ? String(x) : x))})`);
    }
  }
  assert.ok(byKafkajs >= 30, `kafkajs decoded ${byKafkajs} API versions`);
});

test('a request that did not decode gets the top-level code, or empty arrays where there is none', () => {
  const v7 = encodeMessage(Fetch.response, 7, errorResponse(Fetch, 7, undefined, KafkaErrors.CORRUPT_MESSAGE)).finish();
  assert.deepEqual(v7, hex('00000000 0002 00000000 00000000'));
  const produce = encodeMessage(Produce.response, 7, errorResponse(Produce, 7, undefined, KafkaErrors.CORRUPT_MESSAGE)).finish();
  assert.deepEqual(produce, hex('00000000 00000000'));
});

test('golden bytes: Produce v9 (flexible) and Fetch v6 (no top-level code) for one partition', () => {
  const produce = encodeMessage(Produce.response, 9, errorResponse(Produce, 9, { topics: [{ name: 't', partitions: [{ partitionIndex: 0 }] }] }, CODE)).finish();
  assert.deepEqual(
    produce,
    hex(`
      02 0274
        02 00000000 0006 ffffffffffffffff ffffffffffffffff ffffffffffffffff 01 00 00
        00
      00000000 00
    `),
  );
  const fetch = encodeMessage(Fetch.response, 6, errorResponse(Fetch, 6, { topics: [{ topic: 't', partitions: [{ partition: 0 }] }] }, CODE)).finish();
  assert.deepEqual(
    fetch,
    hex(`
      00000000
      00000001 0001 74
        00000001 00000000 0006 ffffffffffffffff ffffffffffffffff ffffffffffffffff ffffffff ffffffff
    `),
  );
});
