/**
 * The Kafka listener against independent clients: kcat (librdkafka) and kafkajs produce and read
 * topics of a real server process, `tributary sql` sees the same rows, and hand-made frames check
 * idempotent retries, the json mapping and malformed input.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { ApiVersions, Fetch, ListOffsets, Metadata, Produce } from '../src/kafka/protocol/apis/index.js';
import type { ListOffsetsResponse } from '../src/kafka/protocol/apis/list-offsets.js';
import type { MetadataResponse } from '../src/kafka/protocol/apis/metadata.js';
import { readResponseHeader, writeRequestHeader } from '../src/kafka/protocol/headers.js';
import { KafkaErrors } from '../src/kafka/protocol/error-codes.js';
import { Reader, Writer } from '../src/kafka/protocol/primitives.js';
import { decodeMessage } from '../src/kafka/protocol/schema.js';
import type { ProduceResponse } from '../src/kafka/protocol/apis/produce.js';
import { Codec, initKafkaCompression } from '../src/kafka/records/compression.js';
import { encodeBatch } from '../src/kafka/records/record-batch.js';
import { kcat } from './support/kcat.js';
import { RawKafka } from './support/raw-kafka.js';
import { random } from './support/random.js';
import { CLI_ARGS, ServerProcess } from './support/server-process.js';

const run = promisify(execFile);

async function sql(bootstrap: string, statement: string): Promise<Record<string, unknown>[]> {
  const { stdout } = await run(process.execPath, [...CLI_ARGS, 'sql', '--bootstrap', bootstrap, '--format', 'json', '-e', statement]);
  return stdout.trim().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('Kafka listener', () => {
  let server: ServerProcess;
  before(async () => {
    await initKafkaCompression();
    server = await ServerProcess.start({ args: ['--no-tiering', '--kafka-port', '0'], settings: { 'kafka.auto-create-topics': 'true', 'num.partitions': '2' } });
  });
  after(() => server.stopAndRemove());

  it('kcat produces with every codec and reads back keys, values, headers and offsets exactly; SQL sees the rows', async () => {
    const codecs = ['none', 'gzip', 'snappy', 'lz4', 'zstd'];
    for (const codec of codecs) {
      const lines = Array.from({ length: 20 }, (_, i) => `k${i}:${codec}-${i}`).join('\n') + '\n';
      await kcat(['-b', server.kafka, '-P', '-t', 'codecs', '-p', '0', '-K:', '-z', codec, '-H', `codec=${codec}`], lines);
    }
    const out = await kcat(['-b', server.kafka, '-C', '-t', 'codecs', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o|%k|%s|%h|%T\\n']);
    const got = out.trim().split('\n').map((l) => l.split('|'));
    assert.equal(got.length, 100);
    got.forEach(([offset, key, value, headers], n) => {
      const codec = codecs[Math.floor(n / 20)];
      assert.deepEqual([offset, key, value, headers], [String(n), `k${n % 20}`, `${codec}-${n % 20}`, `codec=${codec}`]);
    });
    const rows = await sql(server.bootstrap, 'SELECT key, value, "timestamp" FROM kafka.codecs ORDER BY value');
    assert.equal(rows.length, 100);
    const kcatTimestamps = new Set(got.map((g) => Number(g[4])));
    for (const row of rows) assert.ok(kcatTimestamps.has(Date.parse(String(row.timestamp))), `timestamp ${String(row.timestamp)} is one kcat read`);
  });

  it('a consumer\'s small fetch limits hold in the Kafka bytes sent: kcat with a 30 kB receive limit reads large, well-compressed values exactly', async () => {
    // 8 kB values that compress to little: the log stores a few kB for what is 2.4 MB on the wire.
    const values = Array.from({ length: 300 }, (_, i) => `${i}:`.padEnd(8000, 'abcdefgh'));
    await kcat(['-b', server.kafka, '-P', '-t', 'wide', '-p', '0'], values.join('\n') + '\n');
    const limits = ['-X', 'message.max.bytes=30000', '-X', 'fetch.max.bytes=30000', '-X', 'max.partition.fetch.bytes=30000', '-X', 'receive.message.max.bytes=31000'];
    const out = await kcat(['-b', server.kafka, '-C', '-t', 'wide', '-p', '0', '-o', 'beginning', '-e', '-q', ...limits, '-f', '%o|%s\\n']);
    assert.deepEqual(out.trim().split('\n'), values.map((v, i) => `${i}|${v}`));
  });

  it('pipelined Produce requests are answered in order, and each partition keeps the order its batches were sent in, past a corrupt one', async () => {
    const c = await RawKafka.connect(server.kafka);
    await c.request(Metadata, 4, { topics: [{ name: 'pipelined' }], allowAutoTopicCreation: true });
    // Request 1's batch has a wrong CRC: it is refused alone, and the requests of its partition
    // after it, in flight with it, are written in order without a gap.
    const CORRUPT = 1;
    const produce = (partition: number, value: string, i: number) => {
      const records = encodeBatch({ baseOffset: 0n, records: [{ timestamp: 1n, key: null, value: Buffer.from(value) }] });
      if (i === CORRUPT) records[records.length - 1] ^= 0xff;
      return { api: Produce, version: 7, body: { transactionalId: null, acks: -1, timeoutMs: 5000, topics: [{ name: 'pipelined', partitions: [{ partitionIndex: partition, records }] }] } };
    };
    // Runs of one partition, then alternating ones, and a Metadata request among them.
    const partitions = [0, 0, 0, 1, 0, 1, 0, 1, 1, 1, 0, 1];
    const requests: { api: typeof Produce | typeof Metadata; version: number; body: object }[] = partitions.map((p, i) => produce(p, `v${i}`, i));
    requests.splice(6, 0, { api: Metadata, version: 4, body: { topics: [{ name: 'pipelined' }], allowAutoTopicCreation: false } });
    const answers = await c.pipelined<ProduceResponse | MetadataResponse>(requests);
    c.close();
    const produced = answers.filter((a): a is ProduceResponse => 'responses' in a).map((a) => a.responses[0].partitions[0]);
    const next = [0n, 0n];
    produced.forEach((answer, i) =>
      assert.deepEqual([answer.errorCode, answer.baseOffset], i === CORRUPT ? [KafkaErrors.CORRUPT_MESSAGE, -1n] : [0, next[partitions[i]]++], `request ${i}`),
    );
    for (const p of [0, 1]) {
      const out = await kcat(['-b', server.kafka, '-C', '-t', 'pipelined', '-p', String(p), '-o', 'beginning', '-e', '-q', '-f', '%s\\n']);
      assert.deepEqual(out.trim().split('\n'), partitions.flatMap((q, i) => (q === p && i !== CORRUPT ? [`v${i}`] : [])));
    }
  });

  it('kafkajs: admin creates a topic, an idempotent producer writes it, kcat reads what it wrote', async () => {
    const kafka = new Kafka({ brokers: [server.kafka], logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    assert.equal(await admin.createTopics({ topics: [{ topic: 'idem', numPartitions: 3 }] }), true);
    assert.ok((await admin.listTopics()).includes('idem'));
    await admin.disconnect();
    const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 });
    await producer.connect();
    const offsets: string[] = [];
    for (let i = 0; i < 5; i++) {
      const [r] = await producer.send({ topic: 'idem', acks: -1, messages: [{ partition: 1, key: `k${i}`, value: `v${i}`, timestamp: String(1_700_000_000_000 + i), headers: { n: String(i) } }, { partition: 1, key: null, value: `w${i}` }] });
      offsets.push(r.baseOffset!);
    }
    await producer.disconnect();
    assert.deepEqual(offsets, ['0', '2', '4', '6', '8']);
    const out = await kcat(['-b', server.kafka, '-C', '-t', 'idem', '-p', '1', '-o', 'beginning', '-e', '-q', '-f', '%o|%k|%s|%T\\n']);
    assert.equal(out.split('\n')[0], '0|k0|v0|1700000000000');
    assert.equal(out.trim().split('\n').length, 10);
  });

  it('Metadata: a null topic array names every topic, an empty one from v1 names none, and v0 has only the empty one for all', async () => {
    const c = await RawKafka.connect(server.kafka);
    try {
      await c.request(Metadata, 4, { topics: [{ name: 'listed' }], allowAutoTopicCreation: true });
      const names = async (version: number, topics: { name: string }[] | null) =>
        (await c.request<MetadataResponse>(Metadata, version, { topics, allowAutoTopicCreation: false, includeClusterAuthorizedOperations: false, includeTopicAuthorizedOperations: false })).topics.map((t) => t.name);
      assert.ok((await names(4, null)).includes('listed'));
      assert.deepEqual(await names(4, []), []);
      assert.deepEqual(await names(9, []), []);
      assert.ok((await names(0, [])).includes('listed'));
    } finally {
      c.close();
    }
  });

  it('a retried idempotent batch is acknowledged with its first offset and written once; a gap is refused', async () => {
    const c = await RawKafka.connect(server.kafka);
    await c.request(Metadata, 4, { topics: [{ name: 'retry' }], allowAutoTopicCreation: true });
    const { producerId } = await c.request<{ producerId: bigint }>((await import('../src/kafka/protocol/apis/index.js')).InitProducerId, 1, { transactionalId: null, transactionTimeoutMs: 1000 });
    const batch = (seq: number) => encodeBatch({ baseOffset: 0n, producerId, producerEpoch: 0, baseSequence: seq, records: [0, 1, 2].map((i) => ({ timestamp: 1000n + BigInt(i), key: null, value: Buffer.from(`r${seq + i}`) })) });
    const produce = (records: Buffer) => c.request<ProduceResponse>(Produce, 7, { transactionalId: null, acks: -1, timeoutMs: 5000, topics: [{ name: 'retry', partitions: [{ partitionIndex: 0, records }] }] });
    const first = (await produce(batch(0))).responses[0].partitions[0];
    const again = (await produce(batch(0))).responses[0].partitions[0];
    const second = (await produce(batch(3))).responses[0].partitions[0];
    const gap = (await produce(batch(9))).responses[0].partitions[0];
    assert.deepEqual([first.errorCode, first.baseOffset, again.errorCode, again.baseOffset, second.baseOffset], [0, 0n, 0, 0n, 3n]);
    assert.equal(gap.errorCode, 45, 'OUT_OF_ORDER_SEQUENCE_NUMBER');
    assert.deepEqual(await sql(server.bootstrap, 'SELECT count(*) AS n FROM kafka.retry'), [{ n: 6 }]);
    c.close();
  });

  it('a json-mapped table: typed columns on produce, a bad record refuses its batch whole, JSON back on fetch', async () => {
    await sql(server.bootstrap, "CREATE TABLE kafka.events (id BIGINT NOT NULL, name STRING, at TIMESTAMP_LTZ(3)) WITH ('kafka.value.format' = 'json', 'kafka.key.fields' = 'id')");
    const c = await RawKafka.connect(server.kafka);
    const records = (values: string[]) => encodeBatch({ baseOffset: 0n, codec: Codec.GZIP, records: values.map((v) => ({ timestamp: 0n, key: null, value: Buffer.from(v) })) });
    const produce = (values: string[]) => c.request<ProduceResponse>(Produce, 8, { transactionalId: null, acks: 1, timeoutMs: 5000, topics: [{ name: 'events', partitions: [{ partitionIndex: 0, records: records(values) }] }] });
    const good = (await produce(['{"id": 1, "name": "a", "at": "2026-01-02 03:04:05"}', '{"id": 2, "at": 1767236645000}'])).responses[0].partitions[0];
    assert.equal(good.errorCode, 0);
    const bad = (await produce(['{"id": 3, "name": "fine"}', '{"id": "x"}'])).responses[0].partitions[0];
    assert.equal(bad.errorCode, 87, 'INVALID_RECORD');
    assert.match(bad.errorMessage ?? '', /record 1 of the batch: .*id/);
    assert.deepEqual(await sql(server.bootstrap, 'SELECT id, name FROM kafka.events ORDER BY id'), [{ id: 1, name: 'a' }, { id: 2, name: null }]);
    const out = await kcat(['-b', server.kafka, '-C', '-t', 'events', '-p', '0', '-o', 'beginning', '-e', '-q', '-f', '%o|%k|%s\\n']);
    assert.deepEqual(out.trim().split('\n'), ['0|{"id":1}|{"id":1,"name":"a","at":"2026-01-02T03:04:05.000Z"}', '1|{"id":2}|{"id":2,"name":null,"at":"2026-01-01T03:04:05.000Z"}']);
    c.close();
  });

  it('malformed frames (seeded) get error codes and leave the server and another connection serving', async () => {
    const seed = Number(process.env.TRIBUTARY_FUZZ_SEED ?? 20261201);
    const rnd = random(seed);
    const bystander = await RawKafka.connect(server.kafka);
    const good = encodeBatch({ baseOffset: 0n, records: [{ timestamp: 1n, key: null, value: Buffer.from('v') }] });
    for (let round = 0; round < 60; round++) {
      const c = await RawKafka.connect(server.kafka);
      const kind = round % 4;
      if (kind === 0) {
        // A random api key and version, with a random body.
        const w = new Writer();
        w.int32(0).int16(Math.floor(rnd() * 80) - 5).int16(Math.floor(rnd() * 20) - 2).int32(round).nullableString('fuzz');
        for (let i = Math.floor(rnd() * 40); i > 0; i--) w.int8(Math.floor(rnd() * 256) - 128);
        const out = w.finish();
        out.writeInt32BE(out.length - 4, 0);
        c.sendRaw(out);
        const frame = await c.next();
        assert.equal(frame.readInt32BE(0), round, `seed ${seed} round ${round}: answered`);
      } else if (kind === 1) {
        // A size below the header or past the frame limit: answered, then closed.
        const size = rnd() < 0.5 ? Math.floor(rnd() * 8) : 0x7fffff00;
        const out = Buffer.alloc(12);
        out.writeInt32BE(size, 0);
        c.sendRaw(out);
        const frame = await c.next();
        assert.ok([2, 10].includes(frame.readInt16BE(frame.length - 2)), `seed ${seed} round ${round}: error code`);
      } else {
        // A produce of a truncated batch or one with a flipped byte (bad CRC).
        const broken = Buffer.from(good);
        const records = kind === 2 ? broken.subarray(0, Math.floor(rnd() * broken.length)) : (broken[21 + Math.floor(rnd() * (broken.length - 21))] ^= 0xff, broken);
        const resp = await c.request<ProduceResponse>(Produce, 3, { transactionalId: null, acks: 1, timeoutMs: 1000, topics: [{ name: 'fuzz', partitions: [{ partitionIndex: 0, records }] }] });
        assert.equal(resp.responses[0].partitions[0].errorCode, 2, `seed ${seed} round ${round}: CORRUPT_MESSAGE`);
      }
      c.close();
      const versions = await bystander.request<{ errorCode: number }>(ApiVersions, 3, { clientSoftwareName: 't', clientSoftwareVersion: '1' });
      assert.equal(versions.errorCode, 0);
    }
    bystander.close();
    assert.deepEqual(await sql(server.bootstrap, 'SELECT count(*) AS n FROM kafka.fuzz'), [{ n: 0 }]);
  });

  it('ListOffsets: -3 (max timestamp) is refused with UNSUPPORTED_VERSION, -1 and -2 answered', async () => {
    const c = await RawKafka.connect(server.kafka);
    await kcat(['-b', server.kafka, '-P', '-t', 'offsets', '-p', '0'], 'a\nb\n');
    const resp = await c.request<ListOffsetsResponse>(ListOffsets, 7, {
      replicaId: -1,
      isolationLevel: 0,
      topics: [{ name: 'offsets', partitions: [-3n, -1n, -2n].map((timestamp) => ({ partitionIndex: 0, currentLeaderEpoch: -1, timestamp })) }],
    });
    assert.deepEqual(
      resp.topics[0].partitions.map((p) => [p.errorCode, p.offset]),
      [
        [35, -1n],
        [0, 2n],
        [0, 0n],
      ],
    );
    c.close();
  });

  it('errors come in the API\'s own response shape: a body that does not decode, an oversized frame', async () => {
    const c = await RawKafka.connect(server.kafka);
    // Produce v9 whose topic array claims more than the frame holds.
    const w = new Writer();
    w.int32(0);
    writeRequestHeader(w, Produce, { apiKey: Produce.key, apiVersion: 9, correlationId: 41, clientId: 'test' });
    w.raw(Buffer.from('00 ffff 00000001 05'.replace(/ /g, ''), 'hex'));
    const bad = w.finish();
    bad.writeInt32BE(bad.length - 4, 0);
    c.sendRaw(bad);
    const r = new Reader(await c.next());
    assert.equal(readResponseHeader(r, 1), 41);
    assert.deepEqual(decodeMessage(Produce.response, 9, r), { responses: [], throttleTimeMs: 0 });
    assert.equal(r.remaining, 0);
    // A Fetch v11 frame past rpc.max-frame-size: the Fetch response with its top-level code, then the end.
    const big = Buffer.alloc(12);
    big.writeInt32BE(0x7fffff00, 0);
    big.writeInt16BE(Fetch.key, 4);
    big.writeInt16BE(11, 6);
    big.writeInt32BE(42, 8);
    c.sendRaw(big);
    const f = new Reader(await c.next());
    assert.equal(readResponseHeader(f, 0), 42);
    const fetch = decodeMessage<{ errorCode: number; responses: unknown[] }>(Fetch.response, 11, f);
    assert.deepEqual([fetch.errorCode, fetch.responses, f.remaining], [10, [], 0]);
    c.close();
  });
});
