/**
 * The Kafka listener's lake backfill, end to end with a real server and its embedded tiering
 * worker: kcat feeds a lake-enabled json table and a raw topic, tiering puts them in the lake,
 * retention deletes the log segments the lake holds, and then a Kafka consumer from the beginning
 * (kcat -o beginning, librdkafka) reads every record, at its offset, exactly, from the lake and then
 * the log with no gap; kafkajs reads the same, in small fetches that stop inside the lake part.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Kafka, logLevel } from 'kafkajs';
import type { TablePath } from '../src/client/index.js';
import { startCluster } from './support/cluster.js';
import { kcat } from './support/kcat.js';

const LAKE_OPTIONS = { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '500ms', 'table.log.ttl': '1s' };
const ORDERS: TablePath = { database: 'kafka', table: 'orders' };
const RAW: TablePath = { database: 'kafka', table: 'clicks' };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a Kafka consumer from the beginning reads a lake-enabled topic across the lake/log boundary: every record, at its offset, once', { timeout: 300_000 }, async (t) => {
  const cluster = await startCluster(t, {
    args: ['--kafka-port', '0'],
    settings: { 'log.segment.file-size': '2kb', 'log.retention.check-interval': '200ms', 'kafka.fetch.lake-cursors': '2' },
  });
  const kafkaAddress = cluster.server.kafka;
  const admin = cluster.conn.getAdmin();
  await admin.createDatabase('kafka', { ignoreIfExists: true });
  await admin.createTable(ORDERS, {
    columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'item', type: 'STRING' }, { name: 'amount', type: 'INT' }],
    bucketCount: 1,
    properties: { ...LAKE_OPTIONS, 'kafka.value.format': 'json', 'kafka.key.fields': 'id' },
  });
  await admin.createTable(RAW, {
    columns: [{ name: 'key', type: 'BYTES' }, { name: 'value', type: 'BYTES' }, { name: 'headers', type: 'BYTES' }, { name: 'timestamp', type: 'TIMESTAMP_LTZ(3)' }],
    bucketCount: 1,
    properties: { ...LAKE_OPTIONS, 'kafka.value.format': 'raw' },
  });

  // kcat feeds both, one produce call per batch of 20 records, so the log has many small segments.
  let sent = 0;
  const produce = async (batches: number): Promise<void> => {
    for (let b = 0; b < batches; b++) {
      const ids = Array.from({ length: 20 }, (_, i) => sent + i);
      await kcat(['-b', kafkaAddress, '-P', '-t', 'orders', '-p', '0'], ids.map((id) => JSON.stringify({ id, item: `item-${id}`, amount: id * 3 })).join('\n') + '\n');
      await kcat(['-b', kafkaAddress, '-P', '-t', 'clicks', '-p', '0', '-K:', '-H', 'src=kcat'], ids.map((id) => `k${id}:click-${id}`).join('\n') + '\n');
      sent += ids.length;
    }
  };
  await produce(12);

  // Until retention has deleted segments the lake holds: the log of both starts above 0.
  const logStart = async (p: TablePath) => (await admin.listOffsets(p, [0], 'earliest')).get(0)!;
  const deadline = Date.now() + 120_000;
  while ((await logStart(ORDERS)) === 0n || (await logStart(RAW)) === 0n) {
    assert.ok(Date.now() < deadline, `retention deletes tiered segments: ${cluster.server.stderr}`);
    await sleep(200);
  }
  // More records after that: the last ones only in the log when they are read.
  await produce(3);
  const starts = { orders: await logStart(ORDERS), clicks: await logStart(RAW) };

  // kcat: ListOffsets earliest is the lake's, then Fetch reads the lake and the log.
  const orders = (await kcat(['-b', kafkaAddress, '-C', '-t', 'orders', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o|%k|%s\\n'])).trim().split('\n');
  assert.equal(orders.length, sent);
  orders.forEach((line, n) => {
    const [offset, key, value] = line.split('|');
    assert.equal(offset, String(n), 'offsets 0, 1, … without a gap');
    assert.deepEqual(JSON.parse(key), { id: n });
    assert.deepEqual(JSON.parse(value), { id: n, item: `item-${n}`, amount: n * 3 });
  });
  assert.ok(starts.orders > 0n && starts.orders < BigInt(sent), `the json topic's log starts at ${starts.orders}: records below it came from the lake`);

  const clicks = (await kcat(['-b', kafkaAddress, '-C', '-t', 'clicks', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o|%k|%s|%h\\n'])).trim().split('\n');
  assert.deepEqual(clicks, Array.from({ length: sent }, (_, n) => `${n}|k${n}|click-${n}|src=kcat`));
  assert.ok(starts.clicks > 0n, `the raw topic's log starts at ${starts.clicks}`);

  // kafkajs in fetches of at most 1 kb per partition: many fetches end inside the lake part and the next continues there.
  const kafka = new Kafka({ brokers: [kafkaAddress], logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: 'lake-readers', maxBytesPerPartition: 1024, minBytes: 1, maxWaitTimeInMs: 200 });
  await consumer.connect();
  await consumer.subscribe({ topic: 'clicks', fromBeginning: true });
  const got: string[] = [];
  const done = new Promise<void>((resolve) => {
    void consumer.run({
      eachMessage: async ({ message }) => {
        got.push(`${message.offset}|${String(message.key)}|${String(message.value)}`);
        if (got.length === sent) resolve();
      },
    });
  });
  await done;
  await consumer.disconnect();
  assert.deepEqual(got, Array.from({ length: sent }, (_, n) => `${n}|k${n}|click-${n}`));
});
