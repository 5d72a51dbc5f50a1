/**
 * The Kafka listener on every tablet server of a cluster on ZooKeeper (one coordinator, three
 * tablet servers, replication factor 3, min ISR 2), against kcat and kafkajs:
 * - Metadata on any server names the three tablet servers as brokers and each partition's leader;
 *   kcat produces to a topic of three partitions and reads every message back once;
 * - the leader of a partition killed with kill -9 while a kafkajs idempotent producer writes: the
 *   producer follows the new leader and every message is in the log once, in order;
 * - a kafkajs consumer group on an RF=3 topic whose coordinator (the leader of the group's bucket
 *   of kafka.__consumer_offsets) is killed with kill -9: the group carries on at another server
 *   from its committed offsets, nothing skipped, and SHOW CONSUMER GROUPS' ListConsumerGroups
 *   answers it there.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { useCluster } from './support/cluster.js';
import { FindCoordinator } from '../src/kafka/protocol/apis/index.js';
import type { FindCoordinatorResponse } from '../src/kafka/protocol/apis/find-coordinator.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { RpcConnection } from '../src/rpc/connection.js';
import { kcat } from './support/kcat.js';
import { RawKafka } from './support/raw-kafka.js';

const cluster = useCluster({
  zooKeeper: { coordinators: 1, tabletServers: 3 },
  settings: {
    'kafka.enabled': 'true',
    'bind.listeners': 'TRIBUTARY://127.0.0.1:0,KAFKA://127.0.0.1:0',
    'default.replication.factor': '3',
    'log.replica.min-in-sync-replicas-number': '2',
    'kafka.group.min-session-timeout': '1s',
    'kafka.group.initial-rebalance-delay': '300ms',
  },
  client: false,
});

const kafkaOf = (ids: number[]): string[] => ids.map((id) => cluster.tabletServer(id).kafka);

function kafkajs(brokers: string[]): Kafka {
  return new Kafka({ brokers, logLevel: logLevel.NOTHING, retry: { retries: 30, initialRetryTime: 100, maxRetryTime: 1000 } });
}

async function createTopic(topic: string, numPartitions: number): Promise<void> {
  const admin = kafkajs(kafkaOf([0, 1, 2])).admin();
  await admin.connect();
  try {
    assert.equal(await admin.createTopics({ topics: [{ topic, numPartitions, replicationFactor: 3 }], waitForLeaders: true }), true);
  } finally {
    await admin.disconnect();
  }
}

/** kcat -L of one broker: the brokers it names and each partition's leader. */
async function metadataOf(broker: string, topic: string): Promise<{ brokers: string[]; leaders: number[] }> {
  const out = await kcat(['-b', broker, '-L', '-t', topic]);
  const brokers = [...out.matchAll(/broker (\d+) at (\S+)/g)].map((m) => `${m[1]}=${m[2]}`).sort();
  const leaders = [...out.matchAll(/partition (\d+), leader (-?\d+)/g)].sort((a, b) => Number(a[1]) - Number(b[1])).map((m) => Number(m[2]));
  return { brokers, leaders };
}

test('Metadata on every server names all tablet servers and the leaders; kcat produces to an RF=3 topic and reads it back', async () => {
  await createTopic('rf3', 3);
  const expected = [0, 1, 2].map((id) => `${id}=${cluster.tabletServer(id).kafka}`);
  const seen = await Promise.all(kafkaOf([0, 1, 2]).map((b) => metadataOf(b, 'rf3')));
  for (const m of seen) {
    assert.deepEqual(m.brokers, expected);
    assert.equal(m.leaders.length, 3);
    for (const leader of m.leaders) assert.ok([0, 1, 2].includes(leader), `leader ${leader} is a tablet server`);
  }
  assert.deepEqual(seen[1].leaders, seen[0].leaders, 'every server names the same leaders');

  const lines = Array.from({ length: 300 }, (_, i) => `k${i}:v${i}`).join('\n') + '\n';
  await kcat(['-b', kafkaOf([0, 1, 2]).join(','), '-P', '-t', 'rf3', '-K:', '-X', 'acks=all'], lines);
  const out = await kcat(['-b', kafkaOf([2]).join(','), '-C', '-t', 'rf3', '-o', 'beginning', '-e', '-q', '-f', '%p|%o|%k|%s\\n']);
  const got = out.trim().split('\n').map((l) => l.split('|'));
  assert.deepEqual(got.map(([, , k, v]) => `${k}:${v}`).sort(), lines.trim().split('\n').sort(), 'every message once');
  for (const p of ['0', '1', '2']) {
    const offsets = got.filter((g) => g[0] === p).map((g) => Number(g[1]));
    assert.deepEqual(offsets, offsets.map((_, i) => i), `partition ${p}: offsets from 0 without a gap`);
  }
});

test('the leader of a partition killed with kill -9 mid-produce: a kafkajs idempotent producer carries on without duplicates', async () => {
  await createTopic('failover', 1);
  const admin = kafkajs(kafkaOf([0, 1, 2])).admin();
  await admin.connect();
  const leader = (await admin.fetchTopicMetadata({ topics: ['failover'] })).topics[0].partitions[0].leader;
  await admin.disconnect();
  assert.ok([0, 1, 2].includes(leader));

  const producer = kafkajs(kafkaOf([0, 1, 2])).producer({ idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  let killed: Promise<void> | undefined;
  const count = 60;
  try {
    for (let i = 0; i < count; i++) {
      // Not awaited: the kill lands while the next sends are on their way.
      if (i === 20) killed = cluster.tabletServer(leader).kill();
      await producer.send({ topic: 'failover', acks: -1, messages: [{ key: `k${i}`, value: `m${i}` }] });
    }
  } finally {
    await producer.disconnect();
  }
  await killed;
  const survivors = [0, 1, 2].filter((id) => id !== leader);
  const out = await kcat(['-b', kafkaOf(survivors).join(','), '-C', '-t', 'failover', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o|%s\\n']);
  const got = out.trim().split('\n').map((l) => l.split('|'));
  assert.deepEqual(
    got.map(([, v]) => v),
    Array.from({ length: count }, (_, i) => `m${i}`),
    'every message once, in order',
  );
  assert.deepEqual(
    got.map(([o]) => Number(o)),
    got.map((_, i) => i),
  );
  // The cluster whole again, and the restarted server a broker again.
  await cluster.restart(cluster.tabletServer(leader));
  const back = `${leader}=${cluster.tabletServer(leader).kafka}`;
  let brokers: string[] = [];
  // The coordinator tells the other servers of the new registration in its next UpdateMetadata.
  for (let attempt = 0; attempt < 100 && !brokers.includes(back); attempt++) {
    if (attempt > 0) await sleep(200);
    brokers = (await metadataOf(cluster.tabletServer(survivors[0]).kafka, 'failover')).brokers;
  }
  assert.ok(brokers.includes(back), `brokers after the restart: ${brokers.join(', ')}`);
});

/** The node id FindCoordinator on `broker` names for a group. */
async function coordinatorOf(broker: string, group: string): Promise<number> {
  const c = await RawKafka.connect(broker);
  try {
    const r = await c.request<FindCoordinatorResponse>(FindCoordinator, 1, { key: group, keyType: 0 });
    assert.equal(r.errorCode, 0, r.errorMessage ?? '');
    return r.nodeId;
  } finally {
    c.close();
  }
}

test('a consumer group whose coordinator is killed with kill -9 carries on at another server from its committed offsets', async () => {
  await createTopic('grouped', 3);
  const live = (): number[] => [0, 1, 2].filter((id) => cluster.tabletServer(id).running);
  const produce = async (from: number, count: number): Promise<void> => {
    const lines = Array.from({ length: count }, (_, i) => `m${from + i}`).join('\n') + '\n';
    await kcat(['-b', kafkaOf(live()).join(','), '-P', '-t', 'grouped', '-X', 'acks=all'], lines);
  };
  await produce(0, 90);

  const seen: string[] = [];
  const consume = async (group: string) => {
    const consumer = kafkajs(kafkaOf(live())).consumer({ groupId: group, sessionTimeout: 3000, heartbeatInterval: 300, rebalanceTimeout: 10_000, maxWaitTimeInMs: 200 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'grouped', fromBeginning: true });
    await consumer.run({ autoCommitThreshold: 1, eachMessage: async ({ message }) => void seen.push(String(message.value)) });
    return consumer;
  };
  const until = async (what: string, done: () => boolean | Promise<boolean>): Promise<void> => {
    for (let attempt = 0; !(await done()); attempt++) {
      assert.ok(attempt < 600, what);
      await sleep(100);
    }
  };
  const admin = kafkajs(kafkaOf(live())).admin();
  await admin.connect();
  const committed = async (): Promise<number> => {
    const [topic] = await admin.fetchOffsets({ groupId: 'survivors', topics: ['grouped'] });
    return topic.partitions.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0);
  };

  const first = await consume('survivors');
  await until('the first 90 are read and committed', async () => seen.length >= 90 && (await committed()) === 90);
  const coordinator = await coordinatorOf(cluster.tabletServer(live()[0]).kafka, 'survivors');
  await cluster.tabletServer(coordinator).kill();
  await admin.disconnect();
  const others = live();
  assert.ok(!others.includes(coordinator) && others.length === 2);

  // The group goes on at the new leader of its offsets bucket: what is produced now is read and committed there.
  await produce(90, 60);
  const newCoordinator = await coordinatorOf(cluster.tabletServer(others[0]).kafka, 'survivors');
  assert.ok(others.includes(newCoordinator), `the group moved from ${coordinator} to ${newCoordinator}`);
  const admin2 = kafkajs(kafkaOf(others)).admin();
  await admin2.connect();
  const committedNow = async (): Promise<number> => {
    const [topic] = await admin2.fetchOffsets({ groupId: 'survivors', topics: ['grouped'] });
    return topic.partitions.reduce((n, p) => n + Math.max(0, Number(p.offset)), 0);
  };
  await until('the 60 produced after the kill are read and committed at the new coordinator', async () => new Set(seen).size === 150 && (await committedNow()) === 150);
  // Read from committed offsets, not from the beginning again: the first 90 are not read a second time in full.
  assert.ok(seen.length < 150 + 90, `${seen.length} messages delivered for 150`);
  await first.disconnect();

  // A new member of the group starts where the group's commits stand: only what came after.
  const before = seen.length;
  await produce(150, 30);
  const second = await consume('survivors');
  await until('the newest 30 are read by the new member', () => new Set(seen).size === 180);
  await second.disconnect();
  // kcat's keyless messages stick to one partition per batch, so not every partition need hold any.
  const [groupedOffsets] = await admin2.fetchOffsets({ groupId: 'survivors', topics: ['grouped'] });
  const partitionsCommitted = groupedOffsets.partitions.filter((p) => Number(p.offset) >= 0).length;
  await admin2.disconnect();
  const afresh = seen.slice(before);
  assert.deepEqual([...new Set(afresh)].sort(), Array.from({ length: 30 }, (_, i) => `m${150 + i}`).sort(), 'the new member reads from the committed offsets: nothing skipped, nothing before them');
  assert.deepEqual([...new Set(seen)].sort(), Array.from({ length: 180 }, (_, i) => `m${i}`).sort(), 'every message read');

  // SHOW CONSUMER GROUPS asks every tablet server; the new coordinator answers the group, with no lag left.
  const node = cluster.tabletServer(newCoordinator);
  const [host, port] = node.bootstrap.split(':');
  const rpc = await RpcConnection.connect(host, Number(port), { requestTimeoutMs: 10_000, clientName: 'test' });
  try {
    const { groups } = await rpc.request(ApiKeys.ListConsumerGroups, {});
    const group = groups.find((g) => g.groupId === 'survivors');
    assert.ok(group, `groups at server ${newCoordinator}: ${groups.map((g) => g.groupId).join(', ')}`);
    assert.deepEqual(group.topics.map((t) => ({ topic: t.topic, partitions: t.partitions, lag: t.lag })), [{ topic: 'grouped', partitions: partitionsCommitted, lag: 0n }]);
  } finally {
    rpc.close();
  }
  await cluster.restart(cluster.tabletServer(coordinator));
});
