/**
 * Produce-to-consume latency under a steady load, on a server in another process, with what held
 * the worst latencies back.
 *
 * One producer appends rows of the workload (support.ts, cycled) with the row API at a fixed rate,
 * paced against the clock (every millisecond it appends the rows that are due), with a short
 * linger (`client.writer.batch-timeout`, 5 ms by default) so that small batches go out at once.
 * Each row carries its send time in `ts`: microseconds of `performance.timeOrigin +
 * performance.now()`, taken just before `append`. A scanner on its own connection subscribes from
 * the latest offset before the producer starts and long-polls with `pollBatches`; as each batch
 * arrives, the latency of each of its rows is now − ts. The server defaults stay: every batch is
 * fsynced before it is acknowledged and before readers see it, so each latency includes an fsync.
 *
 * The client processes run with `--no-allocation-site-pretenuring` and `--max-semi-space-size=2`,
 * as docs/client.md recommends to latency-minded clients (the server starts with both).
 * `--client-gc single` (the default on two cores or fewer, `parallel` on more): this process and
 * a producer child also collect garbage on the main thread alone (`node --single-threaded-gc`,
 * recommended there on small machines); the program starts itself again with the flags when they
 * are missing. The server keeps V8's parallel collection.
 *
 * `--processes same` (default): producer and scanner in this process. `--processes separate`: the
 * producer runs in a child process (this program with `--role producer`), as producers and
 * consumers usually do. Both stamp and read `performance.timeOrigin + performance.now()`: each
 * process takes its time origin from the wall clock when it starts, so the two clocks agree to
 * well under a millisecond on one machine, unless the wall clock is stepped or slewed (NTP) while
 * they run; the latencies are then off by that much.
 *
 * `--soak`: one run of 20 minutes by default with the node's background work really running: the
 * table is lake-enabled (`table.datalake.freshness` 10 s, tiered by the server's worker), has a
 * TTL of 2 minutes with retention checked every 15 s and 8 MiB segments, logs checkpoint every
 * 10 s, and a primary-key table (lake-enabled too) is upserted at `--kv-rate` rows/s over 10 000
 * keys with KV snapshots every 30 s.
 *
 * Evidence printed with each run: the latency without the linger (arrival − the send of the
 * batch's last row) and its parts before and after the batch's commit timestamp (RowTimes); the
 * event-loop delay and GC pauses of the server (scraped from `/metrics` before and after the run)
 * and of the client process(es), the server's fsync times on the append path, and the 5 worst
 * latencies (at least 1 s apart) each with everything that overlapped its flight ± 50 ms: GC
 * pauses and event-loop stalls of 5 ms or more in any process, the server's periodic tasks and its
 * fsyncs of 2 ms or more (the server runs at log level debug, which logs them:
 * docs/operations.md#metrics).
 *
 * Rows sent during the warm-up are not counted; a run (or baseline) during which other work on the
 * machine took more than 0.25 cores is repeated (support.ts). Baselines, measured before the load:
 * the round trip of an empty RPC (ListDatabases), of 1 KiB echoed over loopback TCP by another
 * Node process (one a millisecond: the machine's floor under any RPC, without our code) and of a
 * 1-row produce (`append` of one row + `flush`, which waits for its fsync), a loop of 4 KiB
 * writes each followed by fdatasync on the data dir's disk, back to back and again with 2 ms
 * between them (as the server's come), and the event-loop delay of this process while idle.
 * Targets: median p99 < 10 ms, every run's p99 < 20 ms and p99.9 < 50 ms.
 *
 *   npm run bench:latency [-- --rate 10000 --seconds 60 --warmup 2 --runs 3 --processes same|separate
 *                          --client-gc single|parallel --soak --kv-rate 500 --client client.writer.batch-timeout=2ms
 *                          --server log.flush.offset.checkpoint-interval=5s --profile DIR]
 *
 * `--profile DIR` writes a CPU profile of the server into DIR (`node --cpu-prof`).
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Connection, type Row } from '../src/client/index.js';
import type { LogScanner } from '../src/client/log-scanner.js';
import { type DurationStats, GC_KINDS, type Pause, type RuntimeWindow, RuntimeMonitor } from '../src/common/runtime-monitor.js';
import { describeSpikes, tailCauses, type TimedEvent, worstSpikes } from './latency-spikes.js';
import { TRIBUTARY_NODE_OPTIONS } from '../test/support/server-process.js';
import {
  BenchServer,
  clientOptionArgs,
  count,
  DATABASE,
  fdatasyncLoopMs,
  generateWorkload,
  loopbackRoundTripMs,
  measure,
  median,
  type Measured,
  medianCores,
  nodeFlags,
  now,
  percentile,
  printHeader,
  printTable,
  rerunWithNodeFlags,
  spread,
  verdict,
  untilQuiet,
  WORKLOAD_COLUMNS,
  workloadRow,
} from './support.js';

const TARGET_MEDIAN_P99_MS = 10;
const TARGET_P99_MS = 20;
const TARGET_P999_MS = 50;
const BASELINE_ROUND_TRIPS = 1000;
const FDATASYNC_LOOPS = 2000;
/** About 30 s of fsyncs at the server's pace: long enough to see the disk's rare stalls, as the runs do. */
const PACED_FDATASYNC_LOOPS = 10_000;
const LOOPBACK_ROUND_TRIPS = 5000;
const LOOPBACK_GAP_MS = 1;
/** About the idle time between two of the server's fsyncs at 50k rows/s (one every 2.5–3 ms). */
const FDATASYNC_GAP_MS = 2;
const IDLE_LOOP_MS = 5000;
const TABLE = 'latency';
const KV_TABLE = 'latency_state';
const KV_KEYS = 10_000;
/** Rows of the workload, cycled: a run's rows are not all held in memory at once. */
const WORKLOAD_ROWS = 100_000;
/** p50, p90, p99, p99.9 and the maximum. */
const PERCENTILES = [50, 90, 99, 99.9, 100];
const SPIKES = 5;
const SPIKE_SEPARATION_MS = 1000;
const SPIKE_MARGIN_MS = 50;
const EVENTS_PER_SPIKE = 6;
/** Pauses of a client process reported as events (the server logs its own at 5 ms). */
const PAUSE_EVENT_MS = 5;
const SERVER_EVENTS = ['pause', 'background task', 'slow log flush'] as const;

const { values: args } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string' },
    warmup: { type: 'string', default: '2' },
    runs: { type: 'string' },
    processes: { type: 'string', default: 'same' },
    'client-gc': { type: 'string', default: os.availableParallelism() <= 2 ? 'single' : 'parallel' },
    soak: { type: 'boolean', default: false },
    'kv-rate': { type: 'string', default: '500' },
    client: { type: 'string', multiple: true },
    server: { type: 'string', multiple: true },
    profile: { type: 'string' },
    // A producer child of --processes separate.
    role: { type: 'string' },
    bootstrap: { type: 'string' },
    rows: { type: 'string' },
    'warmup-rows': { type: 'string' },
  },
});
const rate = Number(args.rate);
const soak = args.soak;
const kvRate = soak ? Number(args['kv-rate']) : 0;
const clientOptions = { 'client.writer.batch-timeout': '5ms', ...clientOptionArgs(args.client) };

/** The shared clock of producer and scanner, in microseconds. */
const clockMicros = (): number => (performance.timeOrigin + now()) * 1000;
const millis = (n: number): string => n.toFixed(2);

/** What a producer reports: the rate achieved after the warm-up, and its process's runtime. */
interface Produced {
  rate: number;
  seconds: number;
  /** CPU seconds of a producer child (for the quiet check), 0 in this process. */
  childCpu: number;
  runtime?: RuntimeWindow;
  pauses: Pause[];
}

if (args['client-gc'] !== 'single' && args['client-gc'] !== 'parallel') throw new Error(`--client-gc is single or parallel, got '${args['client-gc']}'`);
const rerun = rerunWithNodeFlags(['--no-allocation-site-pretenuring', '--max-semi-space-size=2', ...(args['client-gc'] === 'single' ? ['--single-threaded-gc'] : [])]);
if (rerun !== undefined) process.exitCode = rerun;
else if (args.role === 'producer') await producerChild();
else await main();

async function main(): Promise<void> {
  const separate = args.processes === 'separate';
  if (!separate && args.processes !== 'same') throw new Error(`--processes is same or separate, got '${args.processes}'`);
  const seconds = Number(args.seconds ?? (soak ? 1200 : 60));
  const warmupSeconds = Number(args.warmup);
  const runs = Number(args.runs ?? (soak ? 1 : 3));

  const settings: Record<string, string> = {
    ...(soak ? { 'log.retention.check-interval': '15s', 'log.flush.offset.checkpoint-interval': '10s', 'kv.snapshot.interval': '30s', 'log.segment.file-size': '8mb' } : {}),
    ...clientOptionArgs(args.server),
  };
  const lake = { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '10s' };
  printHeader(soak ? 'latency soak' : 'latency', [
    `load: ${count(rate)} rows/s for ${seconds} s after ${warmupSeconds} s of warm-up, ${runs} run(s), row API, workload rows (ts = send time)`,
    `server: child process (node ${TRIBUTARY_NODE_OPTIONS.join(' ')}) at log level debug, defaults (fsync before ack and before readers see a batch)${Object.keys(settings).length > 0 ? ` with ${JSON.stringify(settings)}` : ''}; client: ${JSON.stringify(clientOptions)} over the defaults`,
    ...(soak ? [`soak: table ${JSON.stringify({ ...lake, 'table.log.ttl': '2min' })}; primary-key table upserted at ${count(kvRate)} rows/s over ${count(KV_KEYS)} keys, lake-enabled; tiering worker in the server`] : []),
    `producer: ${separate ? 'a child process' : 'this process'}; scanner: own connection in this process, subscribed from latest, pollBatches`,
  ]);

  const pauses: TimedEvent[] = [];
  const monitor = new RuntimeMonitor({ pauseThresholdMs: PAUSE_EVENT_MS, onPause: (p) => pauses.push(pauseEvent(separate ? 'consumer' : 'client', p)) });
  const bench = await BenchServer.start(settings, clientOptions, [], 'debug', args.profile ? ['--cpu-prof', `--cpu-prof-dir=${args.profile}`] : []);
  try {
    await bench.createTable(TABLE, WORKLOAD_COLUMNS, soak ? { ...lake, 'table.log.ttl': '2min' } : {});
    if (soak) await bench.conn.getAdmin().createTable({ database: DATABASE, table: KV_TABLE }, { columns: WORKLOAD_COLUMNS, primaryKey: ['id'], properties: lake });

    const writer = await (await bench.table(TABLE)).newAppend().createWriter();
    /** A baseline loop that times its own iterations (ms, ascending), measured for the quiet check. */
    const timedLoop = async (loop: () => Promise<Float64Array>): Promise<{ m: Measured; ms: Float64Array }> => {
      let ms: Float64Array = new Float64Array(0);
      const m = await measure(bench.pid, async () => void (ms = await loop()));
      return { m, ms };
    };
    const roundTrips = async (call: () => Promise<void>): Promise<{ m: Measured; ms: Float64Array }> => {
      for (let i = 0; i < 20; i++) await call();
      return timedLoop(async () => {
        const ms = new Float64Array(BASELINE_ROUND_TRIPS);
        for (let i = 0; i < ms.length; i++) {
          const start = now();
          await call();
          ms[i] = now() - start;
        }
        return ms.sort();
      });
    };
    const rpc = await untilQuiet(() => roundTrips(() => bench.conn.getAdmin().listDatabases().then(() => undefined)));
    const oneRow = workloadRow(generateWorkload(1), 0);
    const oneRowProduce = await untilQuiet(() =>
      roundTrips(async () => {
        await writer.append(oneRow);
        await writer.flush();
      }),
    );
    await writer.close();
    const loopback = await untilQuiet(() => timedLoop(() => loopbackRoundTripMs(LOOPBACK_ROUND_TRIPS, LOOPBACK_GAP_MS)));
    const fdatasync = await untilQuiet(() => timedLoop(() => fdatasyncLoopMs(bench.dataDir, FDATASYNC_LOOPS, 0)));
    const pacedFdatasync = await untilQuiet(() => timedLoop(() => fdatasyncLoopMs(bench.dataDir, PACED_FDATASYNC_LOOPS, FDATASYNC_GAP_MS)));
    const idle = await untilQuiet(async () => {
      monitor.take();
      const m = await measure(bench.pid, () => new Promise((resolve) => setTimeout(resolve, IDLE_LOOP_MS)));
      return { m, loop: monitor.take().loopDelay };
    });

    const loads: SteadyRun[] = [];
    for (let run = 0; run < runs; run++) {
      const load = await untilQuiet(() => steadyLoad(bench, monitor, pauses, separate, seconds, warmupSeconds));
      printRun(run + 1, load, separate);
      loads.push(load);
    }

    const measured = loads.map((l) => l.m);
    const across = (p: number): number[] => loads.map((l) => percentile(l.latenciesMs, p));
    console.log(`\nachieved: ${spread(loads.map((l) => l.rate))} rows/s (asked ${count(rate)}), ${count(loads[0].latenciesMs.length)} rows measured per run`);
    console.log(`cores used during the load: client ${medianCores(measured, 'client')}, server ${medianCores(measured, 'server')}, other ${medianCores(measured, 'other')}`);
    console.log(`produce → consume: median (min–max) of ${runs} run(s); baselines: one series each\n`);
    const loopRow = (s: DurationStats): string[] => [millis(s.p50Ms), '', millis(s.p99Ms), millis(s.p999Ms), millis(s.maxMs)];
    printTable(
      ['', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9 ms', 'max ms'],
      [
        [`produce → consume at ${count(rate)} rows/s`, ...PERCENTILES.map((p) => spread(across(p), millis))],
        ['baseline: empty RPC (ListDatabases)', ...PERCENTILES.map((p) => millis(percentile(rpc.ms, p)))],
        [`baseline: loopback TCP echo of 1 KiB, another process, one a ms (${count(LOOPBACK_ROUND_TRIPS)})`, ...PERCENTILES.map((p) => millis(percentile(loopback.ms, p)))],
        ['baseline: 1-row produce (append + flush)', ...PERCENTILES.map((p) => millis(percentile(oneRowProduce.ms, p)))],
        [`baseline: 4 KiB write + fdatasync (${count(FDATASYNC_LOOPS)})`, ...PERCENTILES.map((p) => millis(percentile(fdatasync.ms, p)))],
        [`baseline: the same, one every ${FDATASYNC_GAP_MS} ms (${count(PACED_FDATASYNC_LOOPS)})`, ...PERCENTILES.map((p) => millis(percentile(pacedFdatasync.ms, p)))],
        [`baseline: event-loop delay, idle process (${IDLE_LOOP_MS / 1000} s)`, ...loopRow(idle.loop)],
      ],
    );
    const p99s = across(99);
    const p999s = across(99.9);
    console.log(`\nmedian p99 ${median(p99s).toFixed(2)} ms: ${verdict(median(p99s), TARGET_MEDIAN_P99_MS, false, ' ms')}`);
    console.log(`worst run p99 ${Math.max(...p99s).toFixed(2)} ms: ${verdict(Math.max(...p99s), TARGET_P99_MS, false, ' ms')}`);
    console.log(`worst run p99.9 ${Math.max(...p999s).toFixed(2)} ms: ${verdict(Math.max(...p999s), TARGET_P999_MS, false, ' ms')}`);
    console.log(`ratio to 1-row produce: p50 ${(median(across(50)) / percentile(oneRowProduce.ms, 50)).toFixed(2)}×, p99 ${(median(p99s) / percentile(oneRowProduce.ms, 99)).toFixed(2)}×`);
  } finally {
    monitor.close();
    await bench.dispose();
  }
}

interface SteadyRun {
  m: Measured;
  /** Ascending, of the rows after the warm-up. */
  latenciesMs: Float64Array;
  /** Ascending, each: the latency without the linger, and its parts before and after the commit timestamp (RowTimes). */
  phases: { withoutLinger: Float64Array; toCommit: Float64Array; afterCommit: Float64Array };
  /** Rows per second achieved after the warm-up, and over how long. */
  rate: number;
  seconds: number;
  /** When the run started (wall clock, ms). */
  originMs: number;
  spikes: string[];
  /** What the rows over the run's p99 flew through. */
  tail: ReturnType<typeof tailCauses>;
  server: ServerWindow;
  /** The client processes' runtime during the run, by name. */
  clients: [string, RuntimeWindow][];
}

/** One steady run with a fresh writer and scanner. */
async function steadyLoad(bench: BenchServer, monitor: RuntimeMonitor, pauses: TimedEvent[], separate: boolean, seconds: number, warmupSeconds: number): Promise<SteadyRun> {
  const scannerConn = await bench.connect(clientOptions);
  try {
    const scanner = (await scannerConn.getTable({ database: DATABASE, table: TABLE })).newScan().createLogScanner();
    await scanner.subscribe(0, 'latest');
    const total = Math.round(rate * (warmupSeconds + seconds));
    const warmupRows = Math.round(rate * warmupSeconds);
    const measured = total - warmupRows;
    const rows: RowTimes = {
      sentMs: new Float64Array(measured),
      latenciesMs: new Float64Array(measured),
      afterLastSentMs: new Float64Array(measured),
      toCommitMs: new Float64Array(measured),
      afterCommitMs: new Float64Array(measured),
    };
    const { sentMs, latenciesMs } = rows;
    let before = new Map<string, number>();
    let originMs = 0;
    let produced!: Produced;
    const m = await measure(bench.pid, async () => {
      // Both processes' windows start with the run.
      before = await bench.metrics();
      monitor.take();
      pauses.length = 0;
      originMs = performance.timeOrigin + now();
      const consumed = consume(scanner, total, warmupRows, rows);
      produced = separate ? await produceInChild(bench.server.bootstrap, total, warmupRows) : await produce(bench.conn, total, warmupRows);
      await consumed;
    });
    // A producer child's CPU is the benchmark's, not outside load.
    m.clientCpu += produced.childCpu;
    if (m.otherCpu !== undefined) m.otherCpu -= produced.childCpu;
    const server = serverWindow(before, await bench.metrics());
    const clients: [string, RuntimeWindow][] = [[separate ? 'consumer' : 'client', monitor.take()]];
    const events = [...pauses, ...serverEvents(bench, originMs), ...produced.pauses.map((p) => pauseEvent('producer', p))];
    if (produced.runtime) clients.push(['producer', produced.runtime]);
    scanner.close();
    const spikes = describeSpikes(worstSpikes(sentMs, latenciesMs, SPIKES, SPIKE_SEPARATION_MS), events, SPIKE_MARGIN_MS, originMs, EVENTS_PER_SPIKE);
    const sorted = Float64Array.from(latenciesMs).sort();
    const tail = tailCauses(sentMs, latenciesMs, percentile(sorted, 99), events);
    const phases = { withoutLinger: rows.afterLastSentMs.sort(), toCommit: rows.toCommitMs.sort(), afterCommit: rows.afterCommitMs.sort() };
    return { m, latenciesMs: sorted, phases, rate: produced.rate, seconds: produced.seconds, originMs, spikes, tail, server, clients };
  } finally {
    await scannerConn.close();
  }
}

/**
 * Appends `total` rows at `rate` on `conn`, stamping each with the clock, and in a soak upserts
 * the primary-key table at `kvRate` alongside; returns the rate achieved after the warm-up.
 */
async function produce(conn: Connection, total: number, warmupRows: number): Promise<Produced> {
  const writer = await (await conn.getTable({ database: DATABASE, table: TABLE })).newAppend().createWriter();
  const upserter = kvRate > 0 ? await (await conn.getTable({ database: DATABASE, table: KV_TABLE })).newUpsert().createWriter() : undefined;
  const workload = generateWorkload(WORKLOAD_ROWS);
  const start = now();
  let measuredFrom = start;
  let sent = 0;
  let upserted = 0;
  while (sent < total) {
    const elapsed = now() - start;
    const due = Math.min(total, Math.floor((elapsed * rate) / 1000));
    for (; sent < due; sent++) {
      if (sent === warmupRows) measuredFrom = now();
      const row = workloadRow(workload, sent % WORKLOAD_ROWS);
      row.ts = BigInt(Math.round(clockMicros()));
      await writer.append(row);
    }
    if (upserter) {
      for (const kvDue = Math.floor((elapsed * kvRate) / 1000); upserted < kvDue; upserted++) {
        const row: Row = workloadRow(workload, upserted % WORKLOAD_ROWS);
        row.id = BigInt(upserted % KV_KEYS);
        await upserter.upsert(row);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const elapsed = (now() - measuredFrom) / 1000;
  await writer.close();
  await upserter?.close();
  return { rate: (total - warmupRows) / elapsed, seconds: elapsed, childCpu: 0, pauses: [] };
}

/** Runs `produce` in a child process (this program, `--role producer`); its last stdout line is its result. */
async function produceInChild(bootstrap: string, total: number, warmupRows: number): Promise<Produced> {
  const self = fileURLToPath(import.meta.url);
  const childArgs = [...nodeFlags(), '--import', 'tsx', self, '--role', 'producer', '--bootstrap', bootstrap, '--rate', String(rate), '--rows', String(total), '--warmup-rows', String(warmupRows), '--client-gc', args['client-gc']!];
  if (soak) childArgs.push('--soak', '--kv-rate', String(kvRate));
  for (const [k, v] of Object.entries(clientOptions)) childArgs.push('--client', `${k}=${v}`);
  const child = spawn(process.execPath, childArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`producer process exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as Produced;
}

/** The producer child: produces as told, then prints its result with its CPU time and runtime. */
async function producerChild(): Promise<void> {
  const pauses: Pause[] = [];
  const monitor = new RuntimeMonitor({ pauseThresholdMs: PAUSE_EVENT_MS, onPause: (p) => pauses.push(p) });
  const conn = await Connection.create({ 'bootstrap.servers': args.bootstrap!, ...clientOptions });
  try {
    const cpu = process.cpuUsage();
    const produced = await produce(conn, Number(args.rows), Number(args['warmup-rows']));
    const used = process.cpuUsage(cpu);
    console.log(JSON.stringify({ ...produced, childCpu: (used.user + used.system) / 1e6, runtime: monitor.take(), pauses }));
  } finally {
    monitor.close();
    await conn.close();
  }
}

/** Polls until `total` rows arrived, recording the times of each row after the warm-up ones (RowTimes). */
async function consume(scanner: LogScanner, total: number, warmupRows: number, rows: RowTimes): Promise<void> {
  let received = 0;
  while (received < total) {
    for (const { batch, timestamp } of await scanner.pollBatches(1000)) {
      const arrived = clockMicros();
      const committed = timestamp * 1000;
      const chunks = batch.getChild('ts')!.data;
      // The writer closed the batch within a millisecond of its last row (rows come every
      // millisecond): what follows is the request, the server, its fsync and the fetch.
      let lastSent = -Infinity;
      for (const data of chunks) for (const sent of data.values as BigInt64Array) lastSent = Math.max(lastSent, Number(sent));
      for (const data of chunks) {
        const sentAt = data.values as BigInt64Array;
        for (let i = 0; i < data.length; i++, received++) {
          if (received < warmupRows) continue;
          const sent = Number(sentAt[i]);
          rows.sentMs[received - warmupRows] = sent / 1000;
          rows.latenciesMs[received - warmupRows] = (arrived - sent) / 1000;
          rows.afterLastSentMs[received - warmupRows] = (arrived - lastSent) / 1000;
          rows.toCommitMs[received - warmupRows] = (committed - lastSent) / 1000;
          rows.afterCommitMs[received - warmupRows] = (arrived - committed) / 1000;
        }
      }
    }
  }
}

/**
 * Per measured row: when it was sent, its latency, and that latency without the linger
 * (arrival − the send of its batch's last row), split at the batch's commit timestamp (the
 * server's wall clock when it began writing the batch, in whole milliseconds): before it the
 * request and the server's queue, after it the write, the fsync, the fetch and the decode.
 */
interface RowTimes {
  sentMs: Float64Array;
  latenciesMs: Float64Array;
  afterLastSentMs: Float64Array;
  toCommitMs: Float64Array;
  afterCommitMs: Float64Array;
}

// ---------------------------------------------------------------------------------- evidence

/** The server's runtime and fsyncs over a run, from two scrapes of /metrics. */
interface ServerWindow {
  loop: { p99Ms: number; maxMs: number };
  gc: Record<string, { count: number; totalMs: number; maxMs: number }>;
  flush: { count: number; p50Ms: number; p99Ms: number; maxMs: number };
  /** Runs of each periodic task and the longest. */
  tasks: { task: string; count: number; maxMs: number }[];
}

function serverWindow(before: Map<string, number>, after: Map<string, number>): ServerWindow {
  const ms = (key: string): number => (after.get(key) ?? NaN) * 1000;
  const grew = (key: string): number => (after.get(key) ?? 0) - (before.get(key) ?? 0);
  const gc: ServerWindow['gc'] = {};
  for (const kind of GC_KINDS) {
    gc[kind] = { count: grew(`tributary_gc_pause_seconds_count{kind="${kind}"}`), totalMs: grew(`tributary_gc_pause_seconds_sum{kind="${kind}"}`) * 1000, maxMs: ms(`tributary_gc_pause_seconds{kind="${kind}",quantile="1"}`) };
  }
  const tasks: ServerWindow['tasks'] = [];
  for (const key of after.keys()) {
    const task = /^tributary_background_task_seconds_count\{task="([^"]+)"\}$/.exec(key)?.[1];
    if (task && grew(key) > 0) tasks.push({ task, count: grew(key), maxMs: ms(`tributary_background_task_seconds{task="${task}",quantile="1"}`) });
  }
  return {
    tasks,
    loop: { p99Ms: ms('tributary_event_loop_delay_seconds{quantile="0.99"}'), maxMs: ms('tributary_event_loop_delay_seconds{quantile="1"}') },
    gc,
    flush: {
      count: grew('tributary_log_flush_seconds_count'),
      p50Ms: ms('tributary_log_flush_seconds{quantile="0.5"}'),
      p99Ms: ms('tributary_log_flush_seconds{quantile="0.99"}'),
      maxMs: ms('tributary_log_flush_seconds{quantile="1"}'),
    },
  };
}

/** The server's logged pauses, periodic tasks and slow fsyncs since `fromMs`. */
function serverEvents(bench: BenchServer, fromMs: number): TimedEvent[] {
  const events: TimedEvent[] = [];
  for (const line of bench.logLines(SERVER_EVENTS)) {
    const startMs = line.startMs as number;
    if (startMs < fromMs - SPIKE_MARGIN_MS) continue;
    const ms = line.ms as number;
    if (line.msg === 'pause') events.push(pauseEvent('server', { kind: line.kind as Pause['kind'], startMs, ms, ...(line.cpuMs !== undefined ? { cpuMs: line.cpuMs as number } : {}) }));
    else if (line.msg === 'slow log flush') events.push({ who: 'server', what: 'fsync', kind: 'fsync', startMs, ms });
    else events.push({ who: 'server', what: `task ${line.task as string} (sync ${(line.syncMs as number).toFixed(1)} ms)`, kind: `task ${line.task as string}`, startMs, ms });
  }
  return events;
}

function pauseEvent(who: string, p: Pause): TimedEvent {
  return { who, what: p.kind === 'stall' ? `event-loop stall (cpu ${p.cpuMs!.toFixed(0)} ms)` : `gc ${p.kind}`, kind: p.kind === 'stall' ? 'stall' : `gc ${p.kind}`, startMs: p.startMs, ms: p.ms };
}

/** The collections of each kind over a run of `seconds`, with their rate: full ones by the minute are what the server's allocation is judged by. */
function gcLine(gc: Record<string, { count: number; totalMs: number; maxMs: number }>, seconds: number): string {
  return GC_KINDS.filter((k) => gc[k].count > 0)
    .map((k) => `${k} ${gc[k].count}× (${((gc[k].count * 60) / seconds).toFixed(1)}/min) ${gc[k].totalMs.toFixed(0)} ms (max ${gc[k].maxMs.toFixed(1)})`)
    .join(', ') || 'none';
}

function printRun(n: number, load: SteadyRun, separate: boolean): void {
  const p = (q: number): string => percentile(load.latenciesMs, q).toFixed(2);
  console.log(`run ${n}: ${count(load.rate)} rows/s over ${load.seconds.toFixed(1)} s: p50 ${p(50)}, p99 ${p(99)}, p99.9 ${p(99.9)}, max ${p(100)} ms`);
  const phase = (ms: Float64Array): string => [50, 90, 99, 99.9].map((q) => `p${q} ${percentile(ms, q).toFixed(2)}`).join(', ');
  console.log(`  without the linger (arrival − send of the batch's last row): ${phase(load.phases.withoutLinger)} ms`);
  console.log(`    of it, to the commit timestamp (request, server queue; ±1 ms): ${phase(load.phases.toCommit)}; after it (write, fsync, fetch, decode): ${phase(load.phases.afterCommit)} ms`);
  const { server } = load;
  console.log(`  server: event loop p99 ${millis(server.loop.p99Ms)}, max ${millis(server.loop.maxMs)} ms; GC ${gcLine(server.gc, load.m.seconds)}; fsync p50 ${millis(server.flush.p50Ms)}, p99 ${millis(server.flush.p99Ms)}, max ${millis(server.flush.maxMs)} ms (${count(server.flush.count)})`);
  console.log(`  server tasks: ${server.tasks.map((t) => `${t.task} ${t.count}× (max ${t.maxMs.toFixed(1)} ms)`).join(', ') || 'none'}`);
  const monitors = load.m.memoryMonitors;
  if (monitors) console.log(`  kernel: DAMON memory monitor ${(monitors.cpu * 1000).toFixed(0)} ms of CPU in ${count(monitors.samples)} samples (${((monitors.cpu * 1000) / monitors.samples).toFixed(1)} ms each, on one core)`);
  for (const [who, runtime] of load.clients) {
    const gc = Object.fromEntries(GC_KINDS.map((k) => [k, runtime.gc[k]]));
    console.log(`  ${who}${separate ? '' : ' (producer and scanner)'}: event loop p99 ${millis(runtime.loopDelay.p99Ms)}, max ${millis(runtime.loopDelay.maxMs)} ms; GC ${gcLine(gc, load.m.seconds)}`);
  }
  const { tail } = load;
  const share = (rows: number): string => `${((rows * 100) / Math.max(1, tail.rows)).toFixed(0)}%`;
  console.log(`  rows over the p99 (${count(tail.rows)}), by what was in flight with them (fsyncs ≥ 2 ms, pauses ≥ ${PAUSE_EVENT_MS} ms; a row may count twice): ${[...tail.causes.map((c) => `${c.cause} ${share(c.rows)}`), `nothing recorded ${share(tail.unexplained)}`].join(', ')}`);
  console.log(`  worst latencies (sent at, latency: what overlapped them ± ${SPIKE_MARGIN_MS} ms):`);
  for (const line of load.spikes) console.log(`    ${line}`);
}
