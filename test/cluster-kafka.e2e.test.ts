/**
 * The Kafka listener on every tablet server of a cluster on ZooKeeper (one coordinator, three
 * tablet servers, replication factor 3, min ISR 2), against kcat and kafkajs:
 * - Metadata on any server names the three tablet servers as brokers and each partition's leader;
 *   kcat produces to a topic of three partitions and reads every message back once;
 * - the leader of a partition killed with kill -9 while a kafkajs idempotent producer writes: the
 *   producer follows the new leader and every message is in the log once, in order.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, logLevel } from 'kafkajs';
import { useCluster } from './support/cluster.js';
import { kcat } from './support/kcat.js';

const cluster = useCluster({
  zooKeeper: { coordinators: 1, tabletServers: 3 },
  settings: {
    'kafka.enabled': 'true',
    'bind.listeners': 'TRIBUTARY://127.0.0.1:0,KAFKA://127.0.0.1:0',
    'default.replication.factor': '3',
    'log.replica.min-in-sync-replicas-number': '2',
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
