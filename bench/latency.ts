/**
 * Produce-to-consume latency under a steady load, on a server in another process.
 *
 * One producer appends rows of the workload (support.ts) with the row API at a fixed rate, paced
 * against the clock (every millisecond it appends the rows that are due), with a short linger
 * (`client.writer.batch-timeout`, 5 ms by default) so that small batches go out at once. Each row
 * carries its send time in `ts`: microseconds of `performance.timeOrigin + performance.now()`,
 * taken just before `append`. A scanner on its own connection in the same process (so both read
 * the same clock) subscribes from the latest offset before the producer starts and long-polls
 * with `pollBatches`; as each batch arrives, the latency of each of its rows is now − ts. The
 * server defaults stay: every batch is fsynced before it is acknowledged and before readers see
 * it, so each latency includes an fsync.
 *
 * Rows sent during the warm-up are not counted; a run (or baseline) during which other work on the
 * machine took more than 0.25 cores is repeated (support.ts). Baselines, measured before the load:
 * the round trip of an empty RPC (ListDatabases) and of a 1-row produce (`append` of one row +
 * `flush`, which waits for its fsync). Target: p99 < 20 ms at 10k rows/s.
 *
 *   npm run bench:latency [-- --rate 10000 --seconds 20 --warmup 2 --runs 3
 *                          --client client.writer.batch-timeout=2ms]
 */
import { parseArgs } from 'node:util';
import type { AppendWriter } from '../src/client/index.js';
import type { LogScanner } from '../src/client/log-scanner.js';
import {
  BenchServer,
  clientOptionArgs,
  count,
  DATABASE,
  generateWorkload,
  measure,
  median,
  type Measured,
  medianCores,
  now,
  percentile,
  printHeader,
  printTable,
  spread,
  verdict,
  untilQuiet,
  type Workload,
  WORKLOAD_COLUMNS,
  workloadRow,
} from './support.js';

const TARGET_P99_MS = 20;
const BASELINE_ROUND_TRIPS = 1000;
const TABLE = 'latency';
/** p50, p90, p99 and the maximum. */
const PERCENTILES = [50, 90, 99, 100];

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '20' },
    warmup: { type: 'string', default: '2' },
    runs: { type: 'string', default: '3' },
    client: { type: 'string', multiple: true },
  },
});
const rate = Number(args.rate);
const seconds = Number(args.seconds);
const warmupSeconds = Number(args.warmup);
const runs = Number(args.runs);
const clientOptions = { 'client.writer.batch-timeout': '5ms', ...clientOptionArgs(args.client) };

const millis = (n: number): string => n.toFixed(2);

interface SteadyRun {
  m: Measured;
  /** Ascending, of the rows after the warm-up. */
  latenciesMs: Float64Array;
  /** Rows per second achieved after the warm-up, and over how long. */
  rate: number;
  seconds: number;
}

/** The shared clock of producer and scanner, in microseconds. */
const clockMicros = (): number => (performance.timeOrigin + now()) * 1000;

printHeader('latency', [
  `load: ${count(rate)} rows/s for ${seconds} s after ${warmupSeconds} s of warm-up, ${runs} run(s), row API, workload rows (ts = send time)`,
  `server: child process, defaults (fsync before ack and before readers see a batch); client: ${JSON.stringify(clientOptions)} over the defaults`,
  'scanner: own connection in the same process, subscribed from latest, pollBatches',
]);

const bench = await BenchServer.start({}, clientOptions);
try {
  await bench.createTable(TABLE, WORKLOAD_COLUMNS);
  const writer = await (await bench.table(TABLE)).newAppend().createWriter();
  const rpc = await untilQuiet(() => roundTrips(() => bench.conn.getAdmin().listDatabases().then(() => undefined)));
  const oneRow = workloadRow(generateWorkload(1), 0);
  const oneRowProduce = await untilQuiet(() =>
    roundTrips(async () => {
      await writer.append(oneRow);
      await writer.flush();
    }),
  );
  await writer.close();
  const loads: SteadyRun[] = [];
  for (let run = 0; run < runs; run++) {
    const load = await untilQuiet(steadyLoad);
    console.log(`run ${run + 1}: ${count(load.rate)} rows/s over ${load.seconds.toFixed(1)} s, p50 ${percentile(load.latenciesMs, 50).toFixed(2)} ms, p99 ${percentile(load.latenciesMs, 99).toFixed(2)} ms`);
    loads.push(load);
  }

  const measured = loads.map((l) => l.m);
  const across = (p: number): number[] => loads.map((l) => percentile(l.latenciesMs, p));
  const p50 = median(across(50));
  const p99 = median(across(99));
  console.log(`\nachieved: ${spread(loads.map((l) => l.rate))} rows/s (asked ${count(rate)}), ${count(loads[0].latenciesMs.length)} rows measured per run`);
  console.log(`cores used during the load: client ${medianCores(measured, 'client')}, server ${medianCores(measured, 'server')}, other ${medianCores(measured, 'other')}`);
  console.log(`produce → consume: median (min–max) of ${runs} run(s); baselines: one series each\n`);
  printTable(
    ['', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
    [
      [`produce → consume at ${count(rate)} rows/s`, ...PERCENTILES.map((p) => spread(across(p), millis))],
      ['baseline: empty RPC (ListDatabases)', ...PERCENTILES.map((p) => millis(percentile(rpc.ms, p)))],
      ['baseline: 1-row produce (append + flush)', ...PERCENTILES.map((p) => millis(percentile(oneRowProduce.ms, p)))],
    ],
  );
  console.log(`\np99 ${p99.toFixed(2)} ms: ${verdict(p99, TARGET_P99_MS, false, ' ms')}`);
  console.log(`ratio to empty RPC: p50 ${(p50 / percentile(rpc.ms, 50)).toFixed(1)}×, p99 ${(p99 / percentile(rpc.ms, 99)).toFixed(1)}×`);
  console.log(`ratio to 1-row produce: p50 ${(p50 / percentile(oneRowProduce.ms, 50)).toFixed(2)}×, p99 ${(p99 / percentile(oneRowProduce.ms, 99)).toFixed(2)}×`);
} finally {
  await bench.dispose();
}

/** Sorted durations (ms) of `BASELINE_ROUND_TRIPS` sequential calls, after a few unmeasured ones. */
async function roundTrips(call: () => Promise<void>): Promise<{ m: Measured; ms: Float64Array }> {
  for (let i = 0; i < 20; i++) await call();
  const ms = new Float64Array(BASELINE_ROUND_TRIPS);
  const m = await measure(bench.pid, async () => {
    for (let i = 0; i < ms.length; i++) {
      const start = now();
      await call();
      ms[i] = now() - start;
    }
  });
  return { m, ms: ms.sort() };
}

/** One steady run with a fresh writer and scanner. */
async function steadyLoad(): Promise<SteadyRun> {
  const writer = await (await bench.table(TABLE)).newAppend().createWriter();
  const scannerConn = await bench.connect(clientOptions);
  try {
    const scanner = (await scannerConn.getTable({ database: DATABASE, table: TABLE })).newScan().createLogScanner();
    await scanner.subscribe(0, 'latest');
    const total = Math.round(rate * (warmupSeconds + seconds));
    const warmupRows = Math.round(rate * warmupSeconds);
    const latenciesMs = new Float64Array(total - warmupRows);
    const workload = generateWorkload(total);
    let produced = { rate: 0, seconds: 0 };
    const m = await measure(bench.pid, async () => {
      const consumed = consume(scanner, total, warmupRows, latenciesMs);
      produced = await produce(writer, workload, warmupRows);
      await writer.close();
      await consumed;
    });
    scanner.close();
    return { m, latenciesMs: latenciesMs.sort(), ...produced };
  } finally {
    await scannerConn.close();
  }
}

/** Appends the workload's rows at `rate`, stamping each with the clock; returns the rate achieved after the warm-up. */
async function produce(writer: AppendWriter, workload: Workload, warmupRows: number): Promise<{ rate: number; seconds: number }> {
  const total = workload.count;
  const start = now();
  let measuredFrom = start;
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((now() - start) * rate) / 1000));
    for (; sent < due; sent++) {
      if (sent === warmupRows) measuredFrom = now();
      const row = workloadRow(workload, sent);
      row.ts = BigInt(Math.round(clockMicros()));
      await writer.append(row);
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const elapsed = (now() - measuredFrom) / 1000;
  return { rate: (total - warmupRows) / elapsed, seconds: elapsed };
}

/** Polls until `total` rows arrived, recording the latency of each row after the warm-up ones. */
async function consume(scanner: LogScanner, total: number, warmupRows: number, latenciesMs: Float64Array): Promise<void> {
  let received = 0;
  while (received < total) {
    for (const { batch } of await scanner.pollBatches(1000)) {
      const arrived = clockMicros();
      for (const data of batch.getChild('ts')!.data) {
        const sentAt = data.values as BigInt64Array;
        for (let i = 0; i < data.length; i++, received++) {
          if (received >= warmupRows) latenciesMs[received - warmupRows] = (arrived - Number(sentAt[i])) / 1000;
        }
      }
    }
  }
}
