/**
 * The Kafka listener in the node's request memory (`server.buffer.memory-size`), in this process
 * so its memory can be watched: the listener, as `startKafkaListener` builds it, in front of a real
 * node, reaching it over RPC through a backend that holds the node's ProduceLog calls until the
 * test releases them (a log that does not answer). Many producer connections together stay within
 * the memory, other connections are answered meanwhile, a request bigger than the whole memory
 * runs alone, a connection that stops in the middle of a frame is cut off after
 * `rpc.frame-timeout`, giving its memory back, and a consumer that does not read its answers is
 * not answered further until it does.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { pino } from 'pino';
import { Options } from '../src/common/config.js';
import { kafkaListenerOf, type RunningKafkaListener, startKafkaListener, type TributaryBackend } from '../src/kafka/index.js';
import type { ApiVersionsResponse } from '../src/kafka/protocol/apis/api-versions.js';
import { ApiVersions, Fetch, Metadata, Produce } from '../src/kafka/protocol/apis/index.js';
import type { MetadataResponse } from '../src/kafka/protocol/apis/metadata.js';
import type { ProduceResponse } from '../src/kafka/protocol/apis/produce.js';
import { encodeBatch } from '../src/kafka/records/record-batch.js';
import { ApiKeys } from '../src/rpc/api-keys.js';
import { RpcConnection } from '../src/rpc/connection.js';
import { RequestMemoryBudget, SHARE_FLOOR } from '../src/rpc/request-memory.js';
import { kafkaLakeHistory } from '../src/server/kafka-service.js';
import { TributaryServer } from '../src/server/server.js';
import { RawKafka } from './support/raw-kafka.js';
import { tempDir } from './support/server-process.js';

const silent = pino({ level: 'silent' });
/** The most one socket read delivers. */
const READ = 64 * 1024;
const root = tempDir('kafka-memory');
let node: TributaryServer;
let rpc: RpcConnection;

before(async () => {
  node = await TributaryServer.start({ 'data.dir': path.join(root, 'data'), 'bind.listeners': 'TRIBUTARY://127.0.0.1:0', 'http.port': '0' }, silent);
  rpc = await RpcConnection.connect(node.rpcAddress.host, node.rpcAddress.port, { requestTimeoutMs: 60_000 });
});
after(async () => {
  rpc?.close();
  await node?.stop();
  fs.rmSync(root, { recursive: true, force: true });
});

/** The node's APIs over RPC, with ProduceLog calls held until released: the log as if it did not answer. */
class HeldProduces {
  private readonly waiting: (() => void)[] = [];
  private holding = true;
  private onHeld: (() => void) | undefined;

  readonly backend: TributaryBackend = {
    call: async (api, request) => {
      if (api.key === ApiKeys.ProduceLog.key && this.holding) {
        const released = new Promise<void>((resolve) => this.waiting.push(resolve));
        this.onHeld?.();
        await released;
      }
      return rpc.request(api, request);
    },
  };

  get held(): number {
    return this.waiting.length;
  }

  async until(count: number): Promise<void> {
    while (this.waiting.length < count) await new Promise<void>((resolve) => (this.onHeld = resolve));
  }

  /** Lets the oldest held call go on. */
  releaseOne(): void {
    this.waiting.shift()!();
  }

  /** Lets every call go on, held or to come. */
  releaseAll(): void {
    this.holding = false;
    for (const release of this.waiting.splice(0)) release();
  }
}

/** A Kafka listener of the node in `memory`, as the node starts it. */
async function kafkaListener(memory: RequestMemoryBudget, held: HeldProduces, settings: Record<string, string> = {}): Promise<{ kafka: RunningKafkaListener; address: string }> {
  const options = new Options('server', { 'kafka.enabled': 'true', 'bind.listeners': 'TRIBUTARY://127.0.0.1:0,KAFKA://127.0.0.1:0', 'kafka.auto-create-topics': 'true', 'num.partitions': '4', ...settings });
  const kafka = await startKafkaListener(options, kafkaListenerOf(options)!, memory, held.backend, 0, (at) => [{ nodeId: 0, host: at.host, port: at.port, rack: null }], kafkaLakeHistory(held.backend), silent);
  return { kafka, address: `${kafka.address.host}:${kafka.address.port}` };
}

function produce(topic: string, partition: number, valueBytes: number): { api: typeof Produce; version: number; body: object } {
  const records = encodeBatch({ baseOffset: 0n, records: [{ timestamp: 1n, key: null, value: Buffer.alloc(valueBytes, partition) }] });
  return { api: Produce, version: 7, body: { transactionalId: null, acks: -1, timeoutMs: 30_000, topics: [{ name: topic, partitions: [{ partitionIndex: partition, records }] }] } };
}

async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The most of each of the listener's counters seen, looked at on every turn of the event loop's timers. */
function watch(kafka: RunningKafkaListener): { most: { heldBytes: number; runningBytes: number }; stop: () => void } {
  const most = { heldBytes: 0, runningBytes: 0 };
  const look = (): void => {
    const { heldBytes, runningBytes } = kafka.stats();
    most.heldBytes = Math.max(most.heldBytes, heldBytes);
    most.runningBytes = Math.max(most.runningBytes, runningBytes);
  };
  const timer = setInterval(look, 1);
  return { most, stop: () => clearInterval(timer) };
}

test('producer connections whose requests the log holds back stay together within the request memory; others are answered meanwhile, and all complete once released', async (t) => {
  const budget = 2 << 20;
  const producers = 10;
  const perProducer = 6;
  const valueBytes = 200_000; // ten such frames fit in the budget, and one more does not
  const held = new HeldProduces();
  const memory = new RequestMemoryBudget(budget);
  const { kafka, address } = await kafkaListener(memory, held);
  t.after(() => kafka.close());
  const [bystander, ...connections] = await Promise.all(Array.from({ length: producers + 1 }, () => RawKafka.connect(address)));
  t.after(() => [bystander, ...connections].forEach((c) => c.close()));
  await bystander.request(Metadata, 4, { topics: [{ name: 'held' }], allowAutoTopicCreation: true });
  const watching = watch(kafka);
  t.after(() => watching.stop());

  // Each producer pipelines 6 frames: with up to 8 Produce requests in flight per connection, the
  // listener alone would hold all 12 MB of them.
  const answers = connections.map((c, i) => c.pipelined<ProduceResponse>(Array.from({ length: perProducer }, () => produce('held', i % 4, valueBytes))));
  await held.until(1);
  await until(() => kafka.stats().heldBytes >= budget, 'the producers fill the request memory');

  const versions = await bystander.request<ApiVersionsResponse>(ApiVersions, 3, { clientSoftwareName: 'test', clientSoftwareVersion: '1' });
  assert.equal(versions.errorCode, 0, 'a connection within its share is read and answered while the producers wait');
  const metadata = await bystander.request<MetadataResponse>(Metadata, 4, { topics: [{ name: 'held' }], allowAutoTopicCreation: false });
  assert.equal(metadata.topics[0].partitions.length, 4);
  assert.ok(held.held <= 10, `${held.held} frames of ${valueBytes} bytes run: no more than fit in ${budget}`);

  held.releaseAll();
  const produced = await Promise.all(answers);
  watching.stop();
  for (const [i, responses] of produced.entries()) {
    assert.deepEqual(
      responses.map((r) => r.responses[0].partitions[0].errorCode),
      Array(perProducer).fill(0),
      `producer ${i}`,
    );
  }
  for (let partition = 0; partition < 4; partition++) {
    const offsets = produced.filter((_, i) => i % 4 === partition).flatMap((responses) => responses.map((r) => Number(r.responses[0].partitions[0].baseOffset)));
    assert.deepEqual(offsets.sort((a, b) => a - b), [...offsets.keys()], `partition ${partition}: every frame written once`);
  }
  await until(() => kafka.stats().heldBytes === 0, 'every byte is released');
  assert.deepEqual(kafka.stats(), { connections: producers + 1, heldBytes: 0, runningBytes: 0, unsentBytes: 0 });

  // Requests start only while the running bytes stay within the memory, across connections.
  assert.ok(watching.most.runningBytes <= budget, `at most ${watching.most.runningBytes} bytes ran at once`);
  // While the memory is full, a connection is read only below its share (the memory divided by the
  // connections): the most held is the memory itself, plus each connection's share and one socket
  // read past it, plus the read that filled the memory.
  const connectionsOpen = producers + 1;
  const share = Math.max(SHARE_FLOOR, budget / connectionsOpen);
  const bound = budget + connectionsOpen * (share + READ) + READ;
  assert.ok(watching.most.heldBytes <= bound, `at most ${watching.most.heldBytes} bytes held at once (bound ${bound})`);
});

test('a Produce frame bigger than the whole request memory runs alone once nothing else runs, and nothing starts beside it', async (t) => {
  const budget = 256 * 1024;
  const held = new HeldProduces();
  const memory = new RequestMemoryBudget(budget);
  const { kafka, address } = await kafkaListener(memory, held);
  t.after(() => kafka.close());
  const [small, big] = await Promise.all([RawKafka.connect(address), RawKafka.connect(address)]);
  t.after(() => [small, big].forEach((c) => c.close()));
  await small.request(Metadata, 4, { topics: [{ name: 'big' }], allowAutoTopicCreation: true });

  const first = small.request<ProduceResponse>(Produce, 7, produce('big', 0, 1000).body);
  await held.until(1);
  const huge = big.request<ProduceResponse>(Produce, 7, produce('big', 1, 4 << 20).body);
  await until(() => kafka.stats().heldBytes >= budget, 'the big frame fills the memory');
  held.releaseOne();
  assert.equal((await first).responses[0].partitions[0].errorCode, 0);

  await held.until(1);
  assert.ok(kafka.stats().runningBytes > 4 << 20, 'the big frame runs, alone');
  const second = small.request<ProduceResponse>(Produce, 7, produce('big', 0, 1000).body);
  await until(() => memory.requestsWaiting(), 'the small request waits for the big one');
  assert.equal(held.held, 1, 'nothing runs beside a request bigger than the memory');
  held.releaseAll();
  const [hugeAnswer, secondAnswer] = await Promise.all([huge, second]);
  assert.deepEqual([hugeAnswer.responses[0].partitions[0].errorCode, hugeAnswer.responses[0].partitions[0].baseOffset], [0, 0n]);
  assert.deepEqual([secondAnswer.responses[0].partitions[0].errorCode, secondAnswer.responses[0].partitions[0].baseOffset], [0, 1n]);
  await until(() => kafka.stats().heldBytes === 0, 'every byte is released');
});

test('a connection that stops in the middle of a frame is closed after rpc.frame-timeout and its bytes are released; others go on', async (t) => {
  const held = new HeldProduces();
  held.releaseAll();
  const { kafka, address } = await kafkaListener(new RequestMemoryBudget(1 << 20), held, { 'rpc.frame-timeout': '300ms' });
  t.after(() => kafka.close());
  const [host, port] = address.split(':');
  const stalled = net.connect(Number(port), host);
  t.after(() => stalled.destroy());
  const closed = new Promise<void>((resolve) => stalled.once('close', () => resolve()));
  await new Promise<void>((resolve) => stalled.once('connect', () => resolve()));
  // A 100 000-byte Produce frame of which only the length and 2 000 bytes arrive.
  const start = Buffer.alloc(4 + 2000);
  start.writeInt32BE(100_000, 0);
  start.writeInt16BE(Produce.key, 4);
  start.writeInt16BE(7, 6);
  stalled.write(start);
  await until(() => kafka.stats().heldBytes >= start.length, 'the partial frame is held');

  const other = await RawKafka.connect(address);
  t.after(() => other.close());
  // Answered while the stalled frame waits, and again after it is gone: the deadline is the frame's, not the listener's.
  assert.equal((await other.request<ApiVersionsResponse>(ApiVersions, 3, { clientSoftwareName: 'test', clientSoftwareVersion: '1' })).errorCode, 0);
  await closed;
  await until(() => kafka.stats().heldBytes === 0, 'the partial frame is released');
  assert.equal((await other.request<ApiVersionsResponse>(ApiVersions, 3, { clientSoftwareName: 'test', clientSoftwareVersion: '1' })).errorCode, 0);
  assert.equal(kafka.stats().connections, 1);
});

test('a consumer that pipelines Fetch requests and reads no answer gets no more answers than its socket can take, then all of them in order', async (t) => {
  const held = new HeldProduces();
  held.releaseAll();
  const { kafka, address } = await kafkaListener(new RequestMemoryBudget(64 << 20), held);
  t.after(() => kafka.close());
  const producer = await RawKafka.connect(address);
  t.after(() => producer.close());
  await producer.request(Metadata, 4, { topics: [{ name: 'unread' }], allowAutoTopicCreation: true });
  const valueBytes = 1 << 20;
  assert.equal((await producer.request<ProduceResponse>(Produce, 7, produce('unread', 0, valueBytes).body)).responses[0].partitions[0].errorCode, 0);

  // 60 Fetch requests of the same megabyte, sent at once by a consumer that then stops reading.
  const fetches = 60;
  const consumer = await RawKafka.connect(address);
  t.after(() => consumer.close());
  consumer.socket.pause();
  const body = {
    replicaId: -1,
    maxWaitMs: 0,
    minBytes: 0,
    maxBytes: 2 * valueBytes,
    isolationLevel: 0,
    sessionId: 0,
    sessionEpoch: -1,
    topics: [{ topic: 'unread', partitions: [{ partition: 0, currentLeaderEpoch: -1, fetchOffset: 0n, logStartOffset: -1n, partitionMaxBytes: 2 * valueBytes }] }],
  };
  const answers = consumer.pipelined<{ responses: { partitions: { errorCode: number; records: Uint8Array | null }[] }[] }>(Array.from({ length: fetches }, () => ({ api: Fetch, version: 11, body })));
  await until(() => kafka.stats().unsentBytes > 0, 'the socket holds answers it cannot send');
  // Time for the listener to answer every request it would (all 60 MB of them, without the back-pressure).
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const unsent = kafka.stats().unsentBytes;
  assert.ok(unsent <= 2 * valueBytes + 64 * 1024, `${unsent} answer bytes wait in the process for a consumer that reads nothing`);

  consumer.socket.resume();
  const got = await answers;
  assert.equal(got.length, fetches);
  for (const a of got) {
    assert.equal(a.responses[0].partitions[0].errorCode, 0);
    assert.ok(a.responses[0].partitions[0].records!.length > valueBytes, 'each answer carries the megabyte');
  }
});
