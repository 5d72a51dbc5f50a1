/**
 * Lake tiering: how fast one tiering worker turns the log into Iceberg data files, and how far the
 * lake lags behind a steady write load. The server and each worker run in child processes; the
 * server is started with `--no-tiering`, so the workers of this program are the only ones. Each
 * worker first tiers a table of 100,000 rows, so that the round measured finds its Parquet writer
 * thread started and the WASM encoder optimized, as in a worker that has been tiering for a while.
 *
 *   throughput  `--rows` rows of the workload (support.ts) are appended as Arrow batches to a
 *               lake-enabled log table of `--buckets` buckets before any worker runs; the table's
 *               freshness is 1 h, so one round takes everything. Then one worker process starts
 *               (`tributary tiering --threads 1`). Timed from the start of the table's round (its
 *               `tiering round planned` log line) until its last `tiering round committed` line,
 *               which the worker logs once the coordinator has registered the snapshot; both times
 *               are the worker's clock (this machine's), so the 20 ms poll of `getLakeTieringStatus`,
 *               which confirms that no record is behind, adds nothing to the time. The time from the
 *               worker's spawn is printed too. In: the
 *               bytes of the log segments the round read (ZSTD, the default) and the uncompressed
 *               Arrow size of the same batches; out: the Parquet files in the lake table's folder.
 *               CPU of the worker (all threads, and by thread: main, Parquet writer, the rest), the
 *               server and the rest of the machine, from /proc, from the moment the status shows
 *               the table being tiered. A try during which other work took more than 0.25 cores
 *               is repeated on a new table (support.ts).
 *               Baseline, same run: DuckDB (@duckdb/node-api, in this process) holds the tiered rows
 *               (all lake columns, read from the data files before the timer) and writes them with
 *               `COPY … TO '….parquet' (FORMAT parquet, COMPRESSION zstd)`, with one thread and with
 *               its default threads, median of 3 each. Target: tiering ≥ 0.5 × DuckDB COPY rows/s.
 *   lag         a table with freshness `--freshness` and a new worker (its poll interval is the CLI
 *               default). One writer appends `--rate` rows/s for `--seconds` (columnar, the rows
 *               due every 10 ms); each row's `ts` is its append time. A scanner in this process
 *               reads every bucket back, so the run knows when each offset of each bucket was
 *               appended. The tiering status is sampled every second; the lag of a sample is the
 *               age of the oldest row not in the lake at that moment: over the buckets, the sample
 *               time minus the append time of the row at the bucket's lake end offset (0 when that
 *               row was not appended yet). The peak before each lake snapshot is its registration
 *               time (coordinator clock, same machine) minus the append time of the oldest row it
 *               brought in. Target: peak lag ≤ freshness + 2 s.
 *   pk          (`--kind pk`, instead of both) a lake-enabled primary-key table on `id`: `--keys`
 *               upserts (one per key) tiered by a first round, then `--rows` upserts of uniformly
 *               random keys, so every key the second round writes existed before it and gets an
 *               equality delete. Both rounds are timed as above; freshness 20 s (a round that
 *               overruns it commits what it has and the next round follows at once). Baseline:
 *               DuckDB COPY of the rows of the lake's data files.
 *
 *   npm run bench:tiering [-- --rows 2000000 --buckets 1 --freshness 5s --rate 50000 --seconds 30
 *                          --kind log|pk --keys 125000 --threads 1 --profile DIR (worker --cpu-prof)]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DuckDBInstance } from '@duckdb/node-api';
import type { Row, TablePath } from '../src/client/index.js';
import { parseDuration } from '../src/common/config.js';
import { tablePathString } from '../src/common/schema.js';
import { encodeArrowPayload } from '../src/record/arrow-payload.js';
import { ColumnBatchBuilder } from '../src/record/column-batch-builder.js';
import {
  BenchServer,
  clientOptionArgs,
  columnChunks,
  count,
  DATABASE,
  generateWorkload,
  logSegmentBytes,
  machineBusySeconds,
  type Measured,
  median,
  now,
  otherCores,
  percentile,
  printHeader,
  printTable,
  processCpuSeconds,
  random,
  threadCpuSeconds,
  TieringWorkerProcess,
  untilQuiet,
  verdict,
  waitForIdle,
  WORKLOAD_COLUMNS,
  workloadColumns,
  workloadRow,
} from './support.js';

const TARGET_VS_DUCKDB = 0.5;
const TARGET_LAG_SLACK_S = 2;
const THROUGHPUT_FRESHNESS = '1h';
const PK_FRESHNESS = '20s';
const CHUNK_ROWS = 32_768;
const STATUS_POLL_MS = 20;
const SAMPLE_MS = 1000;
const PACE_MS = 10;
const DUCKDB_RUNS = 3;
const WARMUP_ROWS = 100_000;

const { values: args } = parseArgs({
  options: {
    kind: { type: 'string', default: 'log' },
    rows: { type: 'string' },
    keys: { type: 'string' },
    buckets: { type: 'string', default: '1' },
    threads: { type: 'string', default: '1' },
    freshness: { type: 'string', default: '5s' },
    rate: { type: 'string', default: '50000' },
    seconds: { type: 'string', default: '30' },
    profile: { type: 'string' },
    client: { type: 'string', multiple: true },
  },
});
if (args.kind !== 'log' && args.kind !== 'pk') throw new Error(`--kind is log or pk, not '${args.kind}'`);
const kind = args.kind;
const rows = Number(args.rows ?? (kind === 'log' ? 2_000_000 : 500_000));
const keys = Number(args.keys ?? Math.max(1, Math.floor(rows / 4)));
const buckets = Number(args.buckets);
const threads = Number(args.threads);
const freshnessMs = parseDuration(args.freshness)!;
const rate = Number(args.rate);
const seconds = Number(args.seconds);
const clientOptions = clientOptionArgs(args.client);
const nodeArgs = args.profile ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(args.profile)] : [];

const mb = (bytes: number): string => (bytes / 1e6).toFixed(1);
const secs = (ms: number): string => (ms / 1000).toFixed(2);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const sqlString = (s: string): string => `'${s.replaceAll("'", "''")}'`;

/** One timed tiering of a table's backlog by a fresh worker (stopped afterwards). */
interface Tiering {
  /** From the status showing the table tiered to the status showing it complete; `otherCpu` excludes the worker. */
  m: Measured;
  /** Records the status showed behind when the worker started. */
  records: number;
  /** Round start (log line) and spawn to lake complete (the last round's commit log line), ms. */
  fromRoundMs: number;
  fromSpawnMs: number;
  workerCpu: number;
  /** The worker's CPU seconds by thread: its main thread, its busiest other thread (the Parquet writer), the rest. */
  threadCpu: ThreadCpu;
  rounds: number;
  dataFiles: number;
  deleteFiles: number;
}

interface CopyBaseline {
  threads: number;
  rows: number;
  seconds: number;
  /** CPU seconds of this process during the COPY, median. */
  cpu: number;
  bytes: number;
}

printHeader('tiering', [
  `workload: ${kind === 'log' ? `${count(rows)} rows` : `${count(keys)} keys, then ${count(rows)} upserts of random keys`} (id BIGINT${kind === 'pk' ? ' PRIMARY KEY' : ''}, user_id BIGINT, item STRING 16 chars, price DOUBLE, ts TIMESTAMP(6)), ${buckets} bucket(s), log ZSTD`,
  `server: child process, --no-tiering, defaults; worker: child process, tributary tiering --threads ${threads}${nodeArgs.length ? ' --cpu-prof' : ''}`,
  kind === 'log' ? `lag: ${count(rate)} rows/s for ${seconds} s, freshness ${args.freshness}` : `pk: freshness ${PK_FRESHNESS}`,
  `baseline: DuckDB COPY TO parquet (zstd) in this process; client: ${JSON.stringify(clientOptions)} over the defaults`,
]);

const bench = await BenchServer.start({}, clientOptions, ['--no-tiering']);
const admin = bench.conn.getAdmin();
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-tiering-bench-'));
/** Workers running, killed if the program fails. */
const workers = new Set<TieringWorkerProcess>();
let warmups = 0;
try {
  if (kind === 'log') await logTables();
  else await pkTable();
} finally {
  await Promise.all([...workers].map((w) => w.kill()));
  await bench.dispose();
  fs.rmSync(scratch, { recursive: true, force: true });
}

// ---------------------------------------------------------------- log tables

async function logTables(): Promise<void> {
  const workload = generateWorkload(rows);
  const chunks = columnChunks(workloadColumns(workload), rows, CHUNK_ROWS);
  let arrowBytes = 0;
  // A fresh table per try: the backlog is tiered once.
  const { tiering, logBytes, tablePath } = await untilQuiet(async (tryNumber) => {
    await warmupTable();
    const tablePath: TablePath = { database: DATABASE, table: `tiered_${tryNumber}` };
    const tableDir = await bench.createTable(tablePath.table, WORKLOAD_COLUMNS, lakeProperties(THROUGHPUT_FRESHNESS));
    const table = await bench.table(tablePath.table);
    const batches = chunks.map((chunk) => {
      const builder = new ColumnBatchBuilder(table.info.schema);
      builder.appendColumns(chunk);
      return builder.build();
    });
    arrowBytes = batches.reduce((n, b) => n + encodeArrowPayload(b, 'NONE').byteLength, 0);
    const writer = await table.newAppend().createWriter();
    const loadStart = now();
    for (const batch of batches) await writer.appendColumns(batch);
    await writer.close();
    console.log(`loaded ${count(rows)} rows in ${secs(now() - loadStart)} s (not tiered: no worker runs)`);
    const tiering = await timeTiering(tablePath);
    return { m: tiering.m, tiering, logBytes: logSegmentBytes(tableDir), tablePath };
  });
  const files = await lakeFiles(tablePath);
  const parquetBytes = files.reduce((n, f) => n + fs.statSync(f).size, 0);
  const copies = await duckdbCopy(files, rows);
  const lag = await lagUnderLoad();

  const roundSeconds = tiering.fromRoundMs / 1000;
  const rowsPerSecond = tiering.records / roundSeconds;
  console.log(`\nthroughput: ${count(tiering.records)} rows, ${tiering.rounds} round(s), ${tiering.dataFiles} data file(s); DuckDB: median of ${DUCKDB_RUNS}\n`);
  printTable(
    ['', 'rows/s', 's', 'in: log MB (ZSTD)', 'in: Arrow MB', 'Arrow MB/s', 'out: Parquet MB', 'B/row out', 'CPU µs/row', 'cores'],
    [
      ['tiering, round start → lake complete', count(rowsPerSecond), roundSeconds.toFixed(2), mb(logBytes), mb(arrowBytes), (arrowBytes / 1e6 / roundSeconds).toFixed(1), mb(parquetBytes), (parquetBytes / rows).toFixed(1), microsPerRow(tiering.workerCpu, tiering.records), cores(tiering)],
      ['tiering, worker spawn → lake complete', count(tiering.records / (tiering.fromSpawnMs / 1000)), secs(tiering.fromSpawnMs), '', '', '', '', '', '', ''],
      ...copies.map((c) => [`DuckDB COPY, ${c.threads} thread(s)`, count(c.rows / c.seconds), c.seconds.toFixed(2), '', mb(arrowBytes), (arrowBytes / 1e6 / c.seconds).toFixed(1), mb(c.bytes), (c.bytes / c.rows).toFixed(1), microsPerRow(c.cpu, c.rows), (c.cpu / c.seconds).toFixed(2)]),
    ],
  );
  console.log('\nCPU µs/row: the worker process (all threads) from the status showing the table tiered; DuckDB: this process during the COPY');
  const t = tiering.threadCpu;
  console.log(`worker CPU µs/row by thread: main ${microsPerRow(t.main, tiering.records)}, Parquet writer ${microsPerRow(t.writer, tiering.records)}, others ${microsPerRow(t.rest, tiering.records)}`);
  reportRatios(rowsPerSecond, tiering.workerCpu / tiering.records, copies);
  reportLag(lag);
}

/** Properties of a lake-enabled table of `buckets` buckets. */
function lakeProperties(freshness: string): Record<string, string> {
  return { 'bucket.num': String(buckets), 'table.datalake.enabled': 'true', 'table.datalake.freshness': freshness };
}

function microsPerRow(cpuSeconds: number, rowCount: number): string {
  return ((cpuSeconds / rowCount) * 1e6).toFixed(2);
}

function cores(t: Tiering): string {
  return `worker ${(t.workerCpu / t.m.seconds).toFixed(2)}, server ${((t.m.serverCpu ?? NaN) / t.m.seconds).toFixed(2)}, other ${otherCores(t.m).toFixed(2)}`;
}

/** Tiering against each COPY: rows/s (the target is against DuckDB's default threads), and CPU per row, which outside load moves less. */
function reportRatios(rowsPerSecond: number, cpuPerRow: number, copies: CopyBaseline[]): void {
  for (const c of copies) {
    const ratio = rowsPerSecond / (c.rows / c.seconds);
    const target = c === copies[copies.length - 1] ? `: ${verdict(ratio, TARGET_VS_DUCKDB)}` : '';
    console.log(`tiering / DuckDB COPY (${c.threads} thread(s)) rows/s: ${ratio.toFixed(2)}${target}; CPU per row, DuckDB / tiering: ${(c.cpu / c.rows / cpuPerRow).toFixed(2)}`);
  }
}

// ---------------------------------------------------------------- timing a backlog

/**
 * A lake table for the next worker's first round, so that starting its Parquet writer thread (and
 * compiling and optimizing WebAssembly) is not part of the round measured. Create it before the measured table is due:
 * the coordinator hands out due tables in order.
 */
async function warmupTable(): Promise<void> {
  const name = `warmup_${++warmups}`;
  await bench.createTable(name, WORKLOAD_COLUMNS, lakeProperties(THROUGHPUT_FRESHNESS));
  const writer = await (await bench.table(name)).newAppend().createWriter();
  await writer.appendColumns(columnChunks(workloadColumns(generateWorkload(WARMUP_ROWS)), WARMUP_ROWS, WARMUP_ROWS)[0]);
  await writer.close();
}

/**
 * Starts a worker on an idle machine (after warmupTable), times it until the table's lake holds
 * every record, and stops it. CPU counts from the moment the status shows the table being tiered.
 */
async function timeTiering(tablePath: TablePath, dueWithinMs = 0): Promise<Tiering> {
  const records = Number(behind(await admin.getLakeTieringStatus(tablePath)));
  await waitForIdle();
  const spawnedAt = Date.now();
  const worker = await startWorker();
  await untilStarted(tablePath, dueWithinMs + 60_000);
  const startedAt = Date.now();
  const before = cpuNow(worker);
  const threadsBefore = threadCpuSeconds(worker.pid!);
  await untilCaughtUp(tablePath, 10 * 60_000, worker);
  const caughtUpAt = Date.now();
  const used = cpuSince(before, worker);
  const threadCpu = threadCpuSince(threadsBefore, worker.pid!);
  // The worker logs asynchronously: give its last lines a moment to arrive.
  const name = tablePathString(tablePath);
  const lines = (msg: string) => worker.lines(msg).filter((l) => l.table === name);
  let planned = lines('tiering round planned');
  let committed = lines('tiering round committed');
  for (let i = 0; i < 100 && (planned.length === 0 || committed.length < planned.length); i++) {
    await sleep(20);
    planned = lines('tiering round planned');
    committed = lines('tiering round committed');
  }
  await stopWorker(worker);
  if (planned.length === 0 || committed.length === 0) throw new Error(`the worker logged no ${planned.length === 0 ? 'round' : 'committed round'} of ${name}`);
  const doneAt = committed[committed.length - 1].time;
  const m: Measured = { seconds: (caughtUpAt - startedAt) / 1000, clientCpu: used.client, serverCpu: used.server, otherCpu: used.other };
  console.log(`tiered ${count(records)} records: round start → lake complete ${secs(doneAt - planned[0].time)} s, spawn → lake complete ${secs(doneAt - spawnedAt)} s; outside load ${otherCores(m).toFixed(2)} cores`);
  return {
    m,
    records,
    fromRoundMs: doneAt - planned[0].time,
    fromSpawnMs: doneAt - spawnedAt,
    workerCpu: used.worker,
    threadCpu,
    rounds: planned.length,
    dataFiles: committed.reduce((n, l) => n + Number(l.dataFiles), 0),
    deleteFiles: committed.reduce((n, l) => n + Number(l.deleteFiles), 0),
  };
}

async function startWorker(): Promise<TieringWorkerProcess> {
  const worker = await TieringWorkerProcess.start(bench.server.bootstrap, { threads, nodeArgs });
  workers.add(worker);
  return worker;
}

async function stopWorker(worker: TieringWorkerProcess): Promise<void> {
  await worker.stop();
  workers.delete(worker);
}

interface CpuMark {
  worker: number;
  server: number;
  machine: number;
  client: NodeJS.CpuUsage;
}

function cpuNow(worker: TieringWorkerProcess): CpuMark {
  return { worker: processCpuSeconds(worker.pid!) ?? NaN, server: processCpuSeconds(bench.pid!) ?? NaN, machine: machineBusySeconds() ?? NaN, client: process.cpuUsage() };
}

/** CPU seconds since `mark` of the worker, the server, this process, and everything else. */
function cpuSince(mark: CpuMark, worker: TieringWorkerProcess): { worker: number; server: number; client: number; other: number } {
  const now = cpuNow(worker);
  const c = process.cpuUsage(mark.client);
  const used = { worker: now.worker - mark.worker, server: now.server - mark.server, client: (c.user + c.system) / 1e6 };
  return { ...used, other: now.machine - mark.machine - used.worker - used.server - used.client };
}

interface ThreadCpu {
  main: number;
  writer: number;
  rest: number;
}

/** The CPU of process `pid`'s threads since `before`: the main thread, the busiest other one, the rest. */
function threadCpuSince(before: Map<number, number>, pid: number): ThreadCpu {
  const used = [...threadCpuSeconds(pid)].map(([tid, s]) => ({ tid, s: s - (before.get(tid) ?? 0) }));
  const main = used.find((t) => t.tid === pid)?.s ?? NaN;
  const others = used.filter((t) => t.tid !== pid).map((t) => t.s);
  const writer = Math.max(0, ...others);
  return { main, writer, rest: others.reduce((a, b) => a + b, 0) - writer };
}

function behind(status: { buckets: { recordsBehind: bigint }[] }): bigint {
  return status.buckets.reduce((n, b) => n + b.recordsBehind, 0n);
}

/** Polls the tiering status until a lake snapshot holds every record of the table; fails when the worker reports a failed round. */
async function untilCaughtUp(tablePath: TablePath, timeoutMs: number, worker: TieringWorkerProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await admin.getLakeTieringStatus(tablePath);
    if (status.snapshotId !== undefined && behind(status) === 0n) return;
    const failed = worker.lines('tiering round failed');
    if (failed.length > 0) throw new Error(`tiering round failed: ${String(failed[0].err)}`);
    if (Date.now() > deadline) throw new Error(`the lake of ${tablePathString(tablePath)} is still ${behind(status)} records behind after ${timeoutMs / 1000} s`);
    await sleep(STATUS_POLL_MS);
  }
}

/** Waits until the table is being tiered (or, after a round too short to see, has nothing behind). */
async function untilStarted(tablePath: TablePath, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await admin.getLakeTieringStatus(tablePath);
    if (status.state === 'TIERING' || behind(status) === 0n) return;
    if (Date.now() > deadline) throw new Error(`no round of ${tablePathString(tablePath)} started in ${timeoutMs / 1000} s`);
    await sleep(STATUS_POLL_MS);
  }
}

/** The Parquet files in the lake table's folder (data files, and delete files named `…-deletes.parquet`). */
async function lakeFiles(tablePath: TablePath): Promise<string[]> {
  const { warehouse } = await admin.getLakeTieringStatus(tablePath);
  const dir = path.join(warehouse, tablePath.database, tablePath.table, 'data');
  return fs
    .readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.parquet'))
    .map((f) => path.join(dir, f));
}

// ---------------------------------------------------------------- DuckDB baseline

/** DuckDB writing the rows of `files` (loaded before the timer) as one ZSTD Parquet file: 1 thread, then its default. */
async function duckdbCopy(files: string[], expectedRows: number): Promise<CopyBaseline[]> {
  const duck = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const con = await duck.connect();
  try {
    const defaultThreads = Number((await con.runAndReadAll("SELECT current_setting('threads')")).getRows()[0][0]);
    await con.run(`CREATE TABLE lake AS SELECT * FROM read_parquet([${files.map(sqlString).join(', ')}])`);
    const stored = Number((await con.runAndReadAll('SELECT count(*) FROM lake')).getRows()[0][0]);
    if (stored !== expectedRows) throw new Error(`the lake holds ${stored} rows, expected ${expectedRows}`);
    const out = path.join(scratch, 'copy.parquet');
    const baselines: CopyBaseline[] = [];
    for (const t of [...new Set([1, defaultThreads])]) {
      await con.run(`SET threads = ${t}`);
      const runs: number[] = [];
      const cpu: number[] = [];
      let bytes = 0;
      await waitForIdle();
      for (let i = 0; i < DUCKDB_RUNS; i++) {
        const cpuBefore = process.cpuUsage();
        const start = now();
        await con.run(`COPY lake TO ${sqlString(out)} (FORMAT parquet, COMPRESSION zstd)`);
        runs.push((now() - start) / 1000);
        const used = process.cpuUsage(cpuBefore);
        cpu.push((used.user + used.system) / 1e6);
        bytes = fs.statSync(out).size;
        fs.rmSync(out);
      }
      baselines.push({ threads: t, rows: stored, seconds: median(runs), cpu: median(cpu), bytes });
      console.log(`DuckDB COPY, ${t} thread(s): ${count(stored / median(runs))} rows/s (runs ${runs.map((s) => s.toFixed(2)).join(', ')} s)`);
    }
    return baselines;
  } finally {
    con.closeSync();
    duck.closeSync();
  }
}

// ---------------------------------------------------------------- lag under a steady load

interface Sample {
  t: number;
  /** Lake end offset per bucket. */
  ends: bigint[];
  snapshotId?: bigint;
  /** When the coordinator registered `snapshotId` (the first sample that saw it). */
  commitMs?: number;
}

interface LagResult {
  rowsPerSecond: number;
  writeMs: number;
  /** Sorted lags of the samples taken while the writer ran, ms. */
  sampledMs: Float64Array;
  /** Peak before each commit after the writer started, ms. */
  peaksMs: number[];
  drainMs: number;
  /** Rounds of the table: records planned, planned → committed ms. */
  rounds: { records: number; ms: number }[];
  /** Appending until the lake is complete; `otherCpu` excludes the worker. */
  m: Measured;
  workerCpu: number;
}

async function lagUnderLoad(): Promise<LagResult> {
  const tablePath: TablePath = { database: DATABASE, table: 'lag' };
  await warmupTable();
  await bench.createTable(tablePath.table, WORKLOAD_COLUMNS, lakeProperties(args.freshness));
  const worker = await startWorker();
  // Its first round finds nothing and schedules the next one a freshness later.
  for (const deadline = Date.now() + 60_000; (await admin.getLakeTieringStatus(tablePath)).state !== 'SCHEDULED'; await sleep(STATUS_POLL_MS)) {
    if (Date.now() > deadline) throw new Error('the lag table was never scheduled');
  }
  const total = Math.round(rate * seconds);
  const workload = generateWorkload(total);
  const columns = workloadColumns(workload);
  /** Append time (ms since the epoch) per bucket and offset, as read back. */
  const appendedMs = Array.from({ length: buckets }, () => new Float64Array(total));
  const readBack = new Array<number>(buckets).fill(0);
  const table = await bench.table(tablePath.table);
  const writer = await table.newAppend().createWriter();
  const scanConn = await bench.connect(clientOptions);
  const scanner = (await scanConn.getTable(tablePath)).newScan().createLogScanner();
  for (let b = 0; b < buckets; b++) await scanner.subscribe(b, 0n);

  let readTotal = 0;
  const reading = (async () => {
    while (readTotal < total) {
      for (const sb of await scanner.pollBatches(500)) {
        let offset = Number(sb.baseOffset);
        for (const data of sb.batch.getChild('ts')!.data) {
          const ts = data.values as BigInt64Array;
          for (let i = 0; i < data.length; i++) appendedMs[sb.bucket][offset++] = Number(ts[i]) / 1000;
        }
        readTotal += offset - Number(sb.baseOffset);
        readBack[sb.bucket] = Math.max(readBack[sb.bucket], offset);
      }
    }
  })();

  const samples: Sample[] = [];
  const takeSample = async (): Promise<void> => {
    const t = Date.now();
    const status = await admin.getLakeTieringStatus(tablePath);
    const ends = new Array<bigint>(buckets).fill(0n);
    for (const b of status.buckets) ends[b.bucket] = b.lakeEndOffset;
    const sample: Sample = { t, ends, ...(status.snapshotId !== undefined ? { snapshotId: status.snapshotId } : {}) };
    if (status.snapshotId !== undefined && status.snapshotId !== samples.at(-1)?.snapshotId) {
      const snapshot = await admin.getLakeSnapshot(tablePath);
      if (snapshot.snapshotId === status.snapshotId) sample.commitMs = snapshot.commitTimestamp;
    }
    samples.push(sample);
  };
  let sampling = true;
  const sampler = (async () => {
    for (let next = Date.now(); sampling; next += SAMPLE_MS) {
      await takeSample();
      await sleep(next + SAMPLE_MS - Date.now());
    }
    await takeSample(); // the commit that completed the lake
  })();

  await waitForIdle();
  const before = cpuNow(worker);
  const writeStart = Date.now();
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((Date.now() - writeStart) * rate) / 1000));
    if (due > sent) {
      const chunk: Record<string, ArrayLike<unknown>> = {};
      for (const [name, values] of Object.entries(columns)) chunk[name] = Array.isArray(values) ? values.slice(sent, due) : values.subarray(sent, due);
      chunk.ts = new BigInt64Array(due - sent).fill(BigInt(Date.now()) * 1000n);
      await writer.appendColumns(chunk);
      sent = due;
    }
    await sleep(PACE_MS);
  }
  await writer.flush();
  const writeEnd = Date.now();
  await untilCaughtUp(tablePath, 2 * freshnessMs + 120_000, worker);
  const drainEnd = Date.now();
  const used = cpuSince(before, worker);
  sampling = false;
  await sampler;
  await reading;
  scanner.close();
  await scanConn.close();
  await writer.close();

  /** Age at `t` of the oldest row beyond `ends`: 0 when no such row was appended by then. */
  const lagAt = (t: number, ends: bigint[]): number => {
    let lag = 0;
    for (let b = 0; b < buckets; b++) {
      const end = Number(ends[b]);
      if (end < readBack[b] && appendedMs[b][end] <= t) lag = Math.max(lag, t - appendedMs[b][end]);
    }
    return lag;
  };
  const sampledMs = Float64Array.from(samples.filter((s) => s.t >= writeStart && s.t <= writeEnd).map((s) => lagAt(s.t, s.ends))).sort();
  // A commit's peak counts from the lake end of the sample before it: exact while commits are further
  // apart than the sample interval, as they are when the freshness is longer than it.
  const peaksMs: number[] = [];
  for (let i = 1; i < samples.length; i++) {
    const s = samples[i];
    if (s.commitMs !== undefined && s.commitMs >= writeStart) peaksMs.push(lagAt(s.commitMs, samples[i - 1].ends));
  }
  const name = tablePathString(tablePath);
  const planned = worker.lines('tiering round planned').filter((l) => l.table === name);
  const committed = worker.lines('tiering round committed').filter((l) => l.table === name);
  const rounds = planned.slice(0, committed.length).map((p, i) => ({ records: Number(p.records), ms: committed[i].time - p.time }));
  await stopWorker(worker);
  return {
    rowsPerSecond: total / ((writeEnd - writeStart) / 1000),
    writeMs: writeEnd - writeStart,
    sampledMs,
    peaksMs,
    drainMs: drainEnd - writeEnd,
    rounds,
    m: { seconds: (drainEnd - writeStart) / 1000, clientCpu: used.client, serverCpu: used.server, otherCpu: used.other },
    workerCpu: used.worker,
  };
}

function reportLag(lag: LagResult): void {
  const targetS = freshnessMs / 1000 + TARGET_LAG_SLACK_S;
  const maxPeakS = Math.max(...lag.peaksMs) / 1000;
  const roundMs = lag.rounds.map((r) => r.ms);
  console.log(`\nlag: ${count(lag.rowsPerSecond)} rows/s appended for ${secs(lag.writeMs)} s, freshness ${args.freshness}; ${lag.sampledMs.length} samples (every ${SAMPLE_MS / 1000} s), ${lag.peaksMs.length} commits\n`);
  printTable(
    ['', 'p50 s', 'p90 s', 'max s', 'target s'],
    [
      ['lag, sampled while writing', secs(percentile(lag.sampledMs, 50)), secs(percentile(lag.sampledMs, 90)), secs(percentile(lag.sampledMs, 100)), ''],
      ['lag, peak before each commit', secs(median(lag.peaksMs)), secs(percentile(Float64Array.from(lag.peaksMs).sort(), 90)), maxPeakS.toFixed(2), `≤ ${targetS}`],
    ],
  );
  console.log(`\npeak lag ${maxPeakS.toFixed(2)} s: ${verdict(maxPeakS, targetS, false, ' s')} — that is freshness + ${(maxPeakS - freshnessMs / 1000).toFixed(2)} s`);
  console.log(`rounds: ${lag.rounds.length}, records per round median ${count(median(lag.rounds.map((r) => r.records)))}, planned → committed median ${secs(median(roundMs))} s, max ${secs(Math.max(...roundMs))} s`);
  console.log(`lake complete ${secs(lag.drainMs)} s after the last append`);
  const m = lag.m;
  console.log(`cores while appending until the lake was complete: worker ${(lag.workerCpu / m.seconds).toFixed(2)}, server ${((m.serverCpu ?? NaN) / m.seconds).toFixed(2)}, this process (writer + read-back) ${(m.clientCpu / m.seconds).toFixed(2)}, other ${otherCores(m).toFixed(2)}`);
}

// ---------------------------------------------------------------- primary-key table

async function pkTable(): Promise<void> {
  const tablePath: TablePath = { database: DATABASE, table: 'tiered_pk' };
  await warmupTable();
  await admin.createTable(tablePath, { columns: WORKLOAD_COLUMNS, primaryKey: ['id'], properties: lakeProperties(PK_FRESHNESS) });
  const table = await bench.table(tablePath.table);
  const workload = generateWorkload(Math.max(rows, keys));
  const nextKey = random(13);
  const inserts: Row[] = Array.from({ length: keys }, (_, i) => workloadRow(workload, i));
  const updates: Row[] = Array.from({ length: rows }, (_, i) => ({ ...workloadRow(workload, i), id: BigInt(1 + Math.floor(nextKey() * keys)) }));
  const writer = await table.newUpsert().createWriter();
  let start = now();
  for (const row of inserts) await writer.upsert(row);
  await writer.flush();
  console.log(`upserted ${count(keys)} keys in ${secs(now() - start)} s`);
  const first = await timeTiering(tablePath);
  const before = new Set(await lakeFiles(tablePath));
  await warmupTable(); // queued before the table's next round is due

  start = now();
  for (const row of updates) await writer.upsert(row);
  await writer.close();
  console.log(`upserted ${count(rows)} updates in ${secs(now() - start)} s; the next round is due ${PK_FRESHNESS} after the first`);
  const second = await timeTiering(tablePath, parseDuration(PK_FRESHNESS)!);
  const files = await lakeFiles(tablePath);
  const added = files.filter((f) => !before.has(f));
  const deleteBytes = added.filter((f) => f.endsWith('-deletes.parquet')).reduce((n, f) => n + fs.statSync(f).size, 0);
  const dataBytes = added.filter((f) => !f.endsWith('-deletes.parquet')).reduce((n, f) => n + fs.statSync(f).size, 0);
  const dataFiles = files.filter((f) => !f.endsWith('-deletes.parquet'));
  const duckdb = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
  const con = await duckdb.connect();
  const lakeRows = Number((await con.runAndReadAll(`SELECT count(*) FROM read_parquet([${dataFiles.map(sqlString).join(', ')}])`)).getRows()[0][0]);
  con.closeSync();
  duckdb.closeSync();
  const copies = await duckdbCopy(dataFiles, lakeRows);

  const upsertsPerSecond = rows / (second.fromRoundMs / 1000);
  console.log(`\nprimary-key table: round 1 tiered ${count(first.records)} changelog records (${count(keys)} inserts); round 2 ${count(second.records)} changelog records (${count(rows)} upserts of existing keys)\n`);
  printTable(
    ['', 'upserts/s', 'changelog records/s', 's', 'rounds', 'data files (MB)', 'delete files (MB)', 'cores'],
    [
      ['round 1: inserts, round start → lake complete', count(keys / (first.fromRoundMs / 1000)), count(first.records / (first.fromRoundMs / 1000)), secs(first.fromRoundMs), first.rounds, first.dataFiles, first.deleteFiles, cores(first)],
      ['round 2: updates, round start → lake complete', count(upsertsPerSecond), count(second.records / (second.fromRoundMs / 1000)), secs(second.fromRoundMs), second.rounds, `${second.dataFiles} (${mb(dataBytes)})`, `${second.deleteFiles} (${mb(deleteBytes)})`, cores(second)],
      ...copies.map((c) => [`DuckDB COPY of the ${count(c.rows)} lake rows, ${c.threads} thread(s)`, '', `${count(c.rows / c.seconds)} rows/s`, c.seconds.toFixed(2), '', `1 (${mb(c.bytes)})`, '', `${c.threads} thread(s)`]),
    ],
  );
  console.log(`\nworker CPU in round 2: ${microsPerRow(second.workerCpu, rows)} µs per upsert; DuckDB COPY: ${copies.map((c) => `${microsPerRow(c.cpu, c.rows)} µs per row with ${c.threads} thread(s)`).join(', ')}`);
  reportRatios(upsertsPerSecond, second.workerCpu / rows, copies);
}
