/**
 * The Kafka-protocol listener against Tributary's own client, on the same server, the same bytes
 * and the same kind of table, in the same run.
 *
 * The server runs `tributary start --kafka-port 0` as a child process with its defaults (every
 * acknowledged batch fsynced). For each message size (100 B and 1 KiB values, no key, no headers):
 *   produce  kcat (librdkafka, Debian's) writes `--messages` values from a file into a fresh raw
 *            topic of 4 partitions (acks = all, linger 5 ms, no compression); the timer runs from
 *            its start until it exits, i.e. until every message is acknowledged. The baseline is
 *            the native client appending the same values into a raw topic table of the same shape
 *            through the columnar API (acks = all), then flushing.
 *   consume  kcat reads the topic from the beginning to its end (`-e`); the baseline is a native
 *            LogScanner over all buckets from the earliest offset until it has every record.
 * Then the produce→consume latency of the Kafka path: a kafkajs producer sends one message at a
 * time carrying its send time (acks = all; the next 1 ms after the acknowledgement), a kafkajs
 * group consumer of the topic measures now minus send time for each, for `--latency-seconds`.
 *
 * Target: Kafka produce ≥ 0.7 × the native client's messages/s.
 *
 *   npm run bench:kafka [-- --messages 200000 --runs 3 --latency-seconds 20]
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { RAW_TOPIC_COLUMNS } from '../src/kafka/topic-mapping.js';
import { BenchServer, count, median, now, percentile, printHeader, printTable, spread, verdict } from './support.js';

const TARGET_PRODUCE_RATIO = 0.7;
const PARTITIONS = 4;
const KAFKA_DATABASE = 'kafka';

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '3' },
    'latency-seconds': { type: 'string', default: '20' },
  },
});
const MESSAGES = Number(args.messages);
const RUNS = Number(args.runs);
const LATENCY_SECONDS = Number(args['latency-seconds']);
const SIZES = [100, 1024];

/** `n` printable values of `size` bytes, one per line (kcat splits its input at newlines). */
function valuesFile(n: number, size: number): { file: string; values: Buffer[] } {
  const values: Buffer[] = [];
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  for (let i = 0; i < n; i++) {
    const b = Buffer.alloc(size);
    for (let j = 0; j < size; j++) b[j] = alphabet.charCodeAt((i * 31 + j * 7) % alphabet.length);
    values.push(b);
  }
  const file = path.join(os.tmpdir(), `tributary-bench-kafka-${size}-${process.pid}.txt`);
  fs.writeFileSync(file, Buffer.concat(values.flatMap((v) => [v, Buffer.from('\n')])));
  return { file, values };
}

/** Runs kcat with `stdinFile` as its input; resolves with its stdout once it exits with 0. */
function kcat(kcatArgs: string[], stdinFile?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const input = stdinFile ? fs.openSync(stdinFile, 'r') : 'ignore';
    const child = spawn('kcat', kcatArgs, { stdio: [input, 'pipe', 'pipe'] });
    if (typeof input === 'number') fs.closeSync(input);
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => err.push(d));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(Buffer.concat(out).toString()) : reject(new Error(`kcat ${kcatArgs.join(' ')} exited ${code}: ${Buffer.concat(err).toString()}`))));
  });
}

interface Rates {
  kafkaProduce: number;
  nativeProduce: number;
  kafkaConsume: number;
  nativeConsume: number;
}

async function oneRun(server: BenchServer, broker: string, size: number, values: Buffer[], file: string, run: number): Promise<Rates> {
  const admin = server.conn.getAdmin();
  const kafkaTopic = `k${size}_${run}`;
  const nativeTopic = `n${size}_${run}`;
  for (const table of [kafkaTopic, nativeTopic]) {
    await admin.createTable({ database: KAFKA_DATABASE, table }, { columns: RAW_TOPIC_COLUMNS, properties: { 'bucket.num': String(PARTITIONS), 'kafka.value.format': 'raw' } });
  }

  let t = now();
  await kcat(['-P', '-b', broker, '-t', kafkaTopic, '-X', 'acks=all', '-X', 'linger.ms=5', '-X', 'queue.buffering.max.messages=1000000'], file);
  const kafkaProduce = MESSAGES / ((now() - t) / 1000);

  const table = await server.conn.getTable({ database: KAFKA_DATABASE, table: nativeTopic });
  const writer = await table.newAppend().createWriter();
  const nulls = new Array<null>(MESSAGES).fill(null);
  const stamp = new Date();
  const timestamps = new Array<Date>(MESSAGES).fill(stamp);
  t = now();
  const chunk = 10_000;
  for (let i = 0; i < MESSAGES; i += chunk) {
    const end = Math.min(MESSAGES, i + chunk);
    await writer.appendColumns({ key: nulls.slice(i, end), value: values.slice(i, end), headers: nulls.slice(i, end), timestamp: timestamps.slice(i, end) });
  }
  await writer.flush();
  const nativeProduce = MESSAGES / ((now() - t) / 1000);
  await writer.close();

  t = now();
  const consumed = await kcat(['-C', '-b', broker, '-t', kafkaTopic, '-o', 'beginning', '-e', '-q', '-f', '%o\n']);
  const kafkaConsume = MESSAGES / ((now() - t) / 1000);
  const lines = consumed.split('\n').filter((l) => l !== '').length;
  if (lines !== MESSAGES) throw new Error(`kcat consumed ${lines} of ${MESSAGES} messages`);

  const scanner = table.newScan().createLogScanner();
  for (let b = 0; b < PARTITIONS; b++) await scanner.subscribe(b, 'earliest');
  let read = 0;
  t = now();
  while (read < MESSAGES) read += (await scanner.poll(1000)).length;
  const nativeConsume = MESSAGES / ((now() - t) / 1000);
  scanner.close();
  return { kafkaProduce, nativeProduce, kafkaConsume, nativeConsume };
}

/** kafkajs producer → kafkajs consumer, one message at a time: each message's latency in ms. */
async function latency(broker: string, seconds: number): Promise<Float64Array> {
  const kafka = new Kafka({ clientId: 'bench', brokers: [broker], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic: 'latency', numPartitions: 1 }] });
  await admin.disconnect();
  const consumer = kafka.consumer({ groupId: 'bench-latency', maxWaitTimeInMs: 500 });
  await consumer.connect();
  await consumer.subscribe({ topic: 'latency', fromBeginning: false });
  const latencies: number[] = [];
  let measuring = false;
  let joined!: () => void;
  const ready = new Promise<void>((r) => (joined = r));
  consumer.on(consumer.events.GROUP_JOIN, () => joined());
  await consumer.run({
    eachMessage: async ({ message }) => {
      const sent = Number(message.value!.toString());
      if (measuring) latencies.push(performance.timeOrigin + performance.now() - sent);
    },
  });
  await ready;
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  const stamp = (): string => String(performance.timeOrigin + performance.now());
  // A warm-up second, not counted.
  const end = Date.now() + 1000 + seconds * 1000;
  const warm = Date.now() + 1000;
  while (Date.now() < end) {
    measuring = Date.now() >= warm;
    await producer.send({ topic: 'latency', acks: -1, messages: [{ value: stamp() }] });
    await new Promise((r) => setTimeout(r, 1));
  }
  await new Promise((r) => setTimeout(r, 1000));
  measuring = false;
  await producer.disconnect();
  await consumer.disconnect();
  return Float64Array.from(latencies).sort();
}

const server = await BenchServer.start({}, {}, ['--kafka-port', '0', '--no-tiering']);
try {
  const broker = server.server.kafka;
  printHeader('kafka: kcat (librdkafka) on the Kafka listener against the native client, same server', [
    `messages per run: ${count(MESSAGES)} into ${PARTITIONS} partitions; ${RUNS} runs per size; acks = all on both sides`,
  ]);
  const rows: (string | number)[][] = [];
  for (const size of SIZES) {
    const { file, values } = valuesFile(MESSAGES, size);
    const runs: Rates[] = [];
    for (let run = 0; run < RUNS; run++) runs.push(await oneRun(server, broker, size, values, file, run));
    fs.rmSync(file, { force: true });
    const mb = (rate: number): string => `${((rate * size) / 1e6).toFixed(1)} MB/s`;
    const ratios = runs.map((r) => r.kafkaProduce / r.nativeProduce);
    const ratio = median(ratios);
    rows.push([
      `${size} B`,
      'produce',
      `${spread(runs.map((r) => r.kafkaProduce))} (${mb(median(runs.map((r) => r.kafkaProduce)))})`,
      `${spread(runs.map((r) => r.nativeProduce))} (${mb(median(runs.map((r) => r.nativeProduce)))})`,
      `${ratio.toFixed(2)} (${ratios.map((x) => x.toFixed(2)).join(', ')})`,
      verdict(ratio, TARGET_PRODUCE_RATIO),
    ]);
    const consumeRatios = runs.map((r) => r.kafkaConsume / r.nativeConsume);
    rows.push([
      `${size} B`,
      'consume',
      `${spread(runs.map((r) => r.kafkaConsume))} (${mb(median(runs.map((r) => r.kafkaConsume)))})`,
      `${spread(runs.map((r) => r.nativeConsume))} (${mb(median(runs.map((r) => r.nativeConsume)))})`,
      `${median(consumeRatios).toFixed(2)} (${consumeRatios.map((x) => x.toFixed(2)).join(', ')})`,
      '',
    ]);
  }
  console.log('\nthroughput (messages/s, median (min–max) of the runs)');
  printTable(['value size', 'path', 'Kafka (kcat)', 'native client', 'Kafka / native, each run', 'target'], rows);

  const l = await latency(broker, LATENCY_SECONDS);
  console.log(`\nproduce → consume, kafkajs both ends, one message at a time for ${LATENCY_SECONDS} s (ms)`);
  printTable(
    ['messages', 'p50', 'p99', 'p99.9', 'max'],
    [[count(l.length), percentile(l, 50).toFixed(2), percentile(l, 99).toFixed(2), percentile(l, 99.9).toFixed(2), (l[l.length - 1] ?? NaN).toFixed(2)]],
  );
} finally {
  await server.dispose();
}
