/**
 * Shared parts of the benchmarks in this folder: the workload, a server in a child process, the
 * raw-disk baseline, sizes on disk, CPU accounting, statistics and printing.
 *
 * Also a lake tiering worker in a child process (TieringWorkerProcess, over the tests' TieringProcess).
 *
 * The workload is the record shape of the peer measurements (docs/benchmarks.md):
 * `(id BIGINT, user_id BIGINT, item STRING, price DOUBLE, ts TIMESTAMP(6))`, 48 bytes of payload
 * per record when packed as binary (4 × 8 + 16). Records are generated deterministically from a
 * fixed seed, before any timer starts:
 *   id       1, 2, 3, …
 *   user_id  uniform in [1, 1 000 000]
 *   item     one of 10 000 catalogue names of 16 characters [a-z0-9]
 *   price    uniform in [0.00, 1000.00], whole cents
 *   ts       2023-11-14T22:13:20Z + 50 µs per record (20 000 records per second of event time)
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Connection } from '../src/client/index.js';
import type { ColumnSpec, Row, Table } from '../src/client/index.js';
import { memoryMonitors, type MemoryMonitor } from '../src/server/host-checks.js';
import { batchesEnd } from '../src/server/tablet/log/fixtures/segment-files.js';
import { CLI, ServerProcess, TieringProcess } from '../test/support/server-process.js';
import { random } from '../test/support/random.js';

export { random };


/** Bytes per record of the peers' packed binary form. */
export const PAYLOAD_BYTES_PER_RECORD = 48;
export const DATABASE = 'tributary';

export const WORKLOAD_COLUMNS: ColumnSpec[] = [
  { name: 'id', type: 'BIGINT', nullable: false },
  { name: 'user_id', type: 'BIGINT', nullable: false },
  { name: 'item', type: 'STRING', nullable: false },
  { name: 'price', type: 'DOUBLE', nullable: false },
  { name: 'ts', type: 'TIMESTAMP(6)', nullable: false },
];

const TS_BASE_MICROS = 1_700_000_000_000_000n;
const TS_STEP_MICROS = 50n;
const CATALOGUE_SIZE = 10_000;
const ITEM_LENGTH = 16;


/** `count` distinct-looking names of `length` characters of [a-z0-9]. */
export function names(count: number, length: number, next: () => number): string[] {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  const out = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    let s = '';
    for (let c = 0; c < length; c++) s += alphabet[Math.floor(next() * alphabet.length)];
    out[i] = s;
  }
  return out;
}

/** The workload in columns: the columnar API takes these (or slices of them) as they are. */
export interface Workload {
  count: number;
  id: BigInt64Array;
  user_id: BigInt64Array;
  item: string[];
  price: Float64Array;
  ts: BigInt64Array;
}

export function generateWorkload(count: number, seed = 42): Workload {
  const next = random(seed);
  const catalogue = names(CATALOGUE_SIZE, ITEM_LENGTH, next);
  const w: Workload = {
    count,
    id: new BigInt64Array(count),
    user_id: new BigInt64Array(count),
    item: new Array<string>(count),
    price: new Float64Array(count),
    ts: new BigInt64Array(count),
  };
  for (let i = 0; i < count; i++) {
    w.id[i] = BigInt(i + 1);
    w.user_id[i] = BigInt(1 + Math.floor(next() * 1_000_000));
    w.item[i] = catalogue[Math.floor(next() * CATALOGUE_SIZE)];
    w.price[i] = Math.floor(next() * 100_001) / 100;
    w.ts[i] = TS_BASE_MICROS + BigInt(i) * TS_STEP_MICROS;
  }
  return w;
}

/** Row `i` of the workload as the row API takes it. */
export function workloadRow(w: Workload, i: number): Row {
  return { id: w.id[i], user_id: w.user_id[i], item: w.item[i], price: w.price[i], ts: w.ts[i] };
}

/** Values of one column as the columnar API takes them. */
export type ColumnValues = BigInt64Array | Float64Array | Float32Array | Int32Array | string[] | boolean[];

/** Consecutive slices of `chunkRows` records of every column (typed arrays are views, not copies). */
export function columnChunks(columns: Record<string, ColumnValues>, count: number, chunkRows: number): Record<string, ArrayLike<unknown>>[] {
  const chunks: Record<string, ArrayLike<unknown>>[] = [];
  for (let from = 0; from < count; from += chunkRows) {
    const to = Math.min(count, from + chunkRows);
    const chunk: Record<string, ArrayLike<unknown>> = {};
    for (const [name, values] of Object.entries(columns)) chunk[name] = Array.isArray(values) ? values.slice(from, to) : values.subarray(from, to);
    chunks.push(chunk);
  }
  return chunks;
}

export function workloadColumns(w: Workload): Record<string, ColumnValues> {
  return { id: w.id, user_id: w.user_id, item: w.item, price: w.price, ts: w.ts };
}

// ---------------------------------------------------------------------------------- server

/** `--client key=value` (or `--server key=value`) arguments, repeatable, as options. */
export function clientOptionArgs(pairs: string[] | undefined): Record<string, string> {
  const options: Record<string, string> = {};
  for (const pair of pairs ?? []) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`--client expects key=value, got '${pair}'`);
    options[pair.slice(0, eq)] = pair.slice(eq + 1);
  }
  return options;
}

/** A server child process on a fresh temp data dir, and a client connection to it. */
export class BenchServer {
  private stopped = false;

  private constructor(
    readonly server: ServerProcess,
    readonly conn: Connection,
  ) {}

  /** `args` are more flags of `tributary start`, e.g. `--no-tiering`; `logLevel` the server's (warn by default); `nodeArgs` go to its Node. */
  static async start(settings: Record<string, string> = {}, clientOptions: Record<string, string> = {}, args: string[] = [], logLevel?: string, nodeArgs: string[] = []): Promise<BenchServer> {
    const server = await ServerProcess.start({ settings, args, nodeArgs, ...(logLevel ? { logLevel } : {}) });
    try {
      return new BenchServer(server, await Connection.create({ 'bootstrap.servers': server.bootstrap, ...clientOptions }));
    } catch (err) {
      await server.kill();
      throw err;
    }
  }

  get dataDir(): string {
    return this.server.dataDir;
  }

  get pid(): number | undefined {
    return this.server.child.pid;
  }

  /** Creates a table in the default database; returns its log directory (the tablet server's layout). */
  async createTable(table: string, columns: ColumnSpec[], properties: Record<string, string> = {}): Promise<string> {
    const tableId = await this.conn.getAdmin().createTable({ database: DATABASE, table }, { columns, properties });
    return path.join(this.dataDir, 'log', DATABASE, `${table}-${tableId}`);
  }

  table(table: string): Promise<Table> {
    return this.conn.getTable({ database: DATABASE, table });
  }

  /** Another connection to this server, for a second client; the caller closes it. */
  connect(clientOptions: Record<string, string> = {}): Promise<Connection> {
    return Connection.create({ 'bootstrap.servers': this.server.bootstrap, ...clientOptions });
  }

  /** One scrape of the server's `/metrics`: each sample's value by `name{labels}` as written. */
  async metrics(): Promise<Map<string, number>> {
    const res = await fetch(`http://${this.server.http}/metrics`);
    if (!res.ok) throw new Error(`GET /metrics answered ${res.status}`);
    const samples = new Map<string, number>();
    for (const line of (await res.text()).split('\n')) {
      if (line === '' || line.startsWith('#')) continue;
      const space = line.lastIndexOf(' ');
      samples.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
    return samples;
  }

  /** The server's JSON log lines (pino, on stderr) whose message is one of `msgs`. */
  logLines(msgs: readonly string[]): LogLine[] {
    return logLinesOf(this.server.stderr, msgs);
  }

  /** Closes the connection and stops the server gracefully (indexes and checkpoints written); keeps the data. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.conn.close();
    const code = await this.server.stop();
    if (code !== 0) throw new Error(`server exited with ${code}: ${this.server.stderr}`);
  }

  /** Stops the server if it runs and removes its data dir. */
  async dispose(): Promise<void> {
    try {
      await this.stop();
    } finally {
      fs.rmSync(this.dataDir, { recursive: true, force: true });
    }
  }
}

/** One line of a process's JSON log (pino): `time` in ms since the epoch, `msg`, and its fields. */
export interface LogLine {
  time: number;
  msg: string;
  [field: string]: unknown;
}

/**
 * A lake tiering worker in a child process (`tributary tiering`), logging at info level on stderr so
 * that its rounds can be timed from its own log lines. `nodeArgs` go to Node (e.g. `--cpu-prof`).
 */
export class TieringWorkerProcess {
  private constructor(private readonly worker: TieringProcess) {}

  static async start(bootstrap: string, options: { threads?: number; pollIntervalMs?: number; nodeArgs?: string[] } = {}): Promise<TieringWorkerProcess> {
    return new TieringWorkerProcess(await TieringProcess.start(bootstrap, { logLevel: 'info', threads: options.threads ?? 1, pollIntervalMs: options.pollIntervalMs ?? 1000, ...(options.nodeArgs ? { nodeArgs: options.nodeArgs } : {}) }));
  }

  get pid(): number | undefined {
    return this.worker.child.pid;
  }

  /** Its complete log lines so far whose message is `msg`. */
  lines(msg: string): LogLine[] {
    return logLinesOf(this.worker.stderr, [msg]);
  }

  /** SIGKILL, for clean-up after a failure. */
  kill(): Promise<void> {
    return this.worker.kill();
  }

  /** SIGTERM: it stops after its current round; throws when it does not exit cleanly. */
  async stop(): Promise<void> {
    const code = await this.worker.stop();
    if (code !== 0) throw new Error(`tiering worker exited with ${code}: ${this.worker.stderr.slice(-2000)}`);
  }
}

/** The complete JSON log lines of `text` whose message is one of `msgs`. */
function logLinesOf(text: string, msgs: readonly string[]): LogLine[] {
  const out: LogLine[] = [];
  for (const line of text.split('\n')) {
    if (!msgs.some((msg) => line.includes(msg))) continue;
    try {
      const parsed = JSON.parse(line) as LogLine;
      if (msgs.includes(parsed.msg)) out.push(parsed);
    } catch {
      // the last line may still be partly written
    }
  }
  return out;
}

/** Sum of `bytesOf` (the file size by default) of the files under `dir` whose name passes `filter`. */
export function dirBytes(dir: string, filter: (name: string) => boolean = () => true, bytesOf: (file: string) => number = (file) => fs.statSync(file).size): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) total += dirBytes(p, filter, bytesOf);
    else if (entry.isFile() && filter(entry.name)) total += bytesOf(p);
  }
  return total;
}

/**
 * Bytes of the batches in the log segments (`*.log`) under a table or bucket directory, without
 * the zeros an active segment holds ahead of its end (log.preallocate.size).
 */
export function logSegmentBytes(dir: string): number {
  return dirBytes(dir, (name) => name.endsWith('.log'), batchesEnd);
}

// ---------------------------------------------------------------------------------- baselines

const RAW_CHUNK = 1 << 20;
let rawChunk: Buffer | undefined;

/** 1 MiB of random bytes, made once. */
function rawChunkBytes(): Buffer {
  if (!rawChunk) {
    const next = random(7);
    rawChunk = Buffer.alloc(RAW_CHUNK);
    for (let i = 0; i < RAW_CHUNK; i++) rawChunk[i] = Math.floor(next() * 256);
  }
  return rawChunk;
}

/**
 * The raw disk baseline of the peers: `bytes` written sequentially to the new file `file` with
 * `fs.writeSync` in 1 MiB chunks, then one `fdatasync`. Returns the seconds it took.
 */
function rawWriteSeconds(bytes: number, file: string): number {
  const chunk = rawChunkBytes();
  const start = now();
  const fd = fs.openSync(file, 'w');
  try {
    for (let left = bytes; left > 0; left -= RAW_CHUNK) fs.writeSync(fd, chunk, 0, Math.min(RAW_CHUNK, left));
    fs.fdatasyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  return (now() - start) / 1000;
}

/** Files of the raw baseline, kept until `removeRawFiles`. */
const rawFiles: string[] = [];

/**
 * Median of `runs` raw writes of `bytes` to new files in `dir`, each started on an idle machine,
 * in MB/s (10^6 bytes). The files stay until `removeRawFiles`, as a log keeps its segments, so
 * raw writes and log appends land in the same kind of memory. On the virtual machines measured,
 * page-cache memory freed a moment before (a deleted file) is reused 3–10× cheaper than memory not
 * recently used: freed memory goes back to the hypervisor within seconds and is slow to touch
 * again. With each raw file deleted right after it was written, the second and third raw writes
 * reused the first one's memory while the log appends never could (docs/benchmarks.md).
 */
export async function rawWriteMBps(bytes: number, dir: string, runs = 3): Promise<number> {
  const rates: number[] = [];
  for (let i = 0; i < runs; i++) {
    await waitForIdle();
    const file = path.join(dir, `raw-${process.pid}-${rawFiles.length}.bin`);
    rawFiles.push(file);
    rates.push(bytes / 1e6 / rawWriteSeconds(bytes, file));
  }
  return median(rates);
}

/**
 * The fsync baseline of a log append: `count` times 4 KiB written at the end of a new file in `dir`
 * and fdatasync'd, each timed (ms, ascending), through Node's file thread pool as the server's are.
 * `gapMs` > 0 waits that long on a timer between them, as a server between two batches does: a
 * disk and a CPU left idle between fsyncs answer more slowly than a loop that keeps them busy.
 * The file is removed afterwards.
 */
export async function fdatasyncLoopMs(dir: string, count: number, gapMs = 0): Promise<Float64Array> {
  const file = path.join(dir, `fdatasync-${process.pid}.bin`);
  const block = rawChunkBytes().subarray(0, 4096);
  const ms = new Float64Array(count);
  const handle = await fs.promises.open(file, 'w');
  try {
    for (let i = 0; i < count; i++) {
      if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
      const start = now();
      await handle.write(block, 0, block.length, i * block.length);
      await handle.datasync();
      ms[i] = now() - start;
    }
  } finally {
    await handle.close();
    fs.rmSync(file, { force: true });
  }
  return ms.sort();
}

/** A TCP echo server on an ephemeral loopback port, run by `node -e`; it prints its port. */
const ECHO_SERVER = `const s = require('node:net').createServer((c) => { c.setNoDelay(true); c.pipe(c); });
s.listen(0, '127.0.0.1', () => console.log(s.address().port));`;

/**
 * The machine's floor under an RPC: `count` round trips of 1 KiB over loopback TCP to an echo
 * server in another Node process, one every `gapMs` on a timer (as requests arrive at a server
 * that otherwise idles), each timed (ms, ascending). No decoding, no work: what is left is the two
 * processes' wake-ups and the kernel's loopback.
 */
export async function loopbackRoundTripMs(count: number, gapMs: number): Promise<Float64Array> {
  const echo = spawn(process.execPath, ['-e', ECHO_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve, reject) => {
      echo.stdout.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
      echo.once('exit', (code) => reject(new Error(`the echo server exited with ${code}`)));
    });
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    const message = Buffer.alloc(1024, 1);
    const ms = new Float64Array(count);
    try {
      for (let i = 0; i < count; i++) {
        await new Promise((resolve) => setTimeout(resolve, gapMs));
        const start = now();
        let received = 0;
        await new Promise<void>((resolve) => {
          const onData = (d: Buffer): void => {
            received += d.length;
            if (received < message.length) return;
            socket.off('data', onData);
            resolve();
          };
          socket.on('data', onData);
          socket.write(message);
        });
        ms[i] = now() - start;
      }
    } finally {
      socket.destroy();
    }
    return ms.sort();
  } finally {
    echo.kill();
  }
}

/** Deletes the raw baseline's files. */
export function removeRawFiles(): void {
  for (const file of rawFiles.splice(0)) fs.rmSync(file, { force: true });
}

// ---------------------------------------------------------------------------------- time, CPU, statistics

/** Milliseconds, monotonic, sub-microsecond resolution. */
export const now = (): number => performance.now();

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds (user + system, all threads) used so far by process `pid`, from /proc; undefined where there is none. */
export function processCpuSeconds(pid: number): number | undefined {
  return statCpuSeconds(`/proc/${pid}/stat`);
}

/** CPU seconds (user + system) so far of each thread of process `pid`, by thread id. */
export function threadCpuSeconds(pid: number): Map<number, number> {
  const cpu = new Map<number, number>();
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    const seconds = statCpuSeconds(`/proc/${pid}/task/${tid}/stat`);
    if (seconds !== undefined) cpu.set(Number(tid), seconds);
  }
  return cpu;
}

/** utime + stime of a /proc stat file, in seconds; undefined when the process or thread is gone. */
function statCpuSeconds(file: string): number | undefined {
  try {
    const stat = fs.readFileSync(file, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/** CPU seconds used so far by the DAMON monitors of `monitors` (kernel threads, in /proc like any). */
function memoryMonitorCpuSeconds(monitors: MemoryMonitor[]): number {
  return monitors.reduce((sum, m) => sum + (processCpuSeconds(m.pid) ?? 0), 0);
}

/** Busy CPU seconds of the whole machine so far (every state of /proc/stat but idle and iowait). */
export function machineBusySeconds(): number | undefined {
  try {
    const [user, nice, system, , , irq, softirq, steal] = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

const IDLE_CORES = 0.15;
const IDLE_SAMPLE_MS = 500;
const IDLE_MAX_WAIT_MS = 60_000;

/**
 * Waits until the machine is quiet (under 0.15 busy cores over half a second), so that a measured
 * section does not start in the middle of someone else's work; gives up after a minute and says so.
 */
export async function waitForIdle(): Promise<void> {
  const deadline = now() + IDLE_MAX_WAIT_MS;
  for (;;) {
    const before = machineBusySeconds();
    if (before === undefined) return;
    await new Promise((resolve) => setTimeout(resolve, IDLE_SAMPLE_MS));
    const busyCores = (machineBusySeconds()! - before) / (IDLE_SAMPLE_MS / 1000);
    if (busyCores < IDLE_CORES) return;
    if (now() > deadline) {
      console.log(`warning: the machine stayed busy (${busyCores.toFixed(2)} cores) for ${IDLE_MAX_WAIT_MS / 1000} s; measuring anyway`);
      return;
    }
  }
}

/** Wall time and CPU time over one measured section. */
export interface Measured {
  seconds: number;
  /** This process. */
  clientCpu: number;
  serverCpu: number | undefined;
  /** Everything else on the machine: kernel threads (disk flushes) and any outside load. */
  otherCpu: number | undefined;
  /**
   * The kernel's DAMON monitors running when the section started: the CPU they used (part of
   * the other CPU) and their samples meanwhile; unset where none ran or it was not measured.
   */
  memoryMonitors?: { cpu: number; samples: number };
}

/** Runs `section` once the machine is idle, timing it and accounting for CPU. */
export async function measure(serverPid: number | undefined, section: () => Promise<void>): Promise<Measured> {
  await waitForIdle();
  const monitors = memoryMonitors();
  const monitorsBefore = memoryMonitorCpuSeconds(monitors);
  const machineBefore = machineBusySeconds();
  const serverBefore = serverPid === undefined ? undefined : processCpuSeconds(serverPid);
  const cpuBefore = process.cpuUsage();
  const start = now();
  await section();
  const seconds = (now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const serverAfter = serverPid === undefined ? undefined : processCpuSeconds(serverPid);
  const machineAfter = machineBusySeconds();
  const memoryMonitorCpu = memoryMonitorCpuSeconds(monitors) - monitorsBefore;
  const clientCpu = (cpu.user + cpu.system) / 1e6;
  const serverCpu = serverBefore === undefined || serverAfter === undefined ? undefined : serverAfter - serverBefore;
  const otherCpu = machineBefore === undefined || machineAfter === undefined ? undefined : machineAfter - machineBefore - clientCpu - (serverCpu ?? 0);
  const samples = monitors.reduce((n, m) => n + (seconds * 1000) / m.sampleMs, 0);
  return { seconds, clientCpu, serverCpu, otherCpu, ...(monitors.length > 0 ? { memoryMonitors: { cpu: memoryMonitorCpu, samples } } : {}) };
}

const QUIET_OTHER_CORES = 0.25;
const QUIET_TRIES = 3;

/** Cores used by neither client nor server during a measured section. */
export function otherCores(m: Measured): number {
  return (m.otherCpu ?? 0) / m.seconds;
}

/** Whether other work stayed under 0.25 cores during a measured section. */
function wasQuiet(m: Measured): boolean {
  return otherCores(m) < QUIET_OTHER_CORES;
}

/**
 * Runs `attempt` (a measured section and what it needs, made afresh each time) again while other
 * work took more than 0.25 cores during it, at most three times; returns the last result.
 */
export async function untilQuiet<T extends { m: Measured }>(attempt: (tryNumber: number) => Promise<T>): Promise<T> {
  for (let tryNumber = 1; ; tryNumber++) {
    const result = await attempt(tryNumber);
    const other = otherCores(result.m).toFixed(2);
    if (wasQuiet(result.m)) return result;
    if (tryNumber === QUIET_TRIES) {
      console.log(`warning: outside load (${other} cores) in all ${QUIET_TRIES} tries; keeping the last`);
      return result;
    }
    console.log(`outside load of ${other} cores during the measurement; repeating it`);
  }
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The p-th percentile (0 ≤ p ≤ 100, nearest rank) of ascending `sorted`. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

// ---------------------------------------------------------------------------------- printing

/** A flag that loads a module: `--import=x`, or `--import` with `x` the next argument. */
const LOADER_FLAG = /^--(import|require|loader|experimental-loader)(=|$)/;

/** This process's Node and V8 flags (e.g. `--no-incremental-marking-task`) without its module loaders. */
export function nodeFlags(): string[] {
  return process.execArgv.filter((arg, i, all) => !LOADER_FLAG.test(arg) && !(i > 0 && LOADER_FLAG.test(all[i - 1]) && !all[i - 1].includes('=')));
}

/**
 * For a benchmark whose client processes' pauses count (bench:latency): when this process lacks
 * `flags` (V8 reads them only at start), runs the benchmark again in a child started with them and
 * returns its exit code; undefined when this process has them.
 */
export function rerunWithNodeFlags(flags: readonly string[]): number | undefined {
  const missing = flags.filter((f) => !process.execArgv.includes(f));
  if (missing.length === 0) return undefined;
  return spawnSync(process.execPath, [...process.execArgv, ...missing, ...process.argv.slice(1)], { stdio: 'inherit' }).status ?? 1;
}

export function printHeader(title: string, lines: string[]): void {
  console.log(`\n== ${title}`);
  const flags = nodeFlags();
  console.log(`machine: ${os.cpus().length} cores (${os.cpus()[0]?.model.trim() ?? 'unknown'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}${flags.length > 0 ? ` (${flags.join(' ')})` : ''}, ${os.platform()} ${os.release()}`);
  for (const m of memoryMonitors()) console.log(`kernel: a DAMON memory monitor runs (kdamond, pid ${m.pid}), sampling every ${m.sampleMs} ms`);
  for (const line of lines) console.log(line);
}

/** Prints rows as an aligned text table (also valid Markdown). */
export function printTable(headers: string[], rows: (string | number)[][]): void {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => r[c].length)));
  const line = (r: string[]): string => `| ${r.map((v, c) => v.padEnd(widths[c])).join(' | ')} |`;
  console.log(line(cells[0]));
  console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
  for (const r of cells.slice(1)) console.log(line(r));
}

/** 1234567 → '1.23M', 45678 → '45.7k'. */
export function count(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return n.toFixed(0);
}

/** Median and range of repeated measurements: '1.23M (1.10M–1.30M)'; just the value for one run. */
export function spread(values: number[], format: (n: number) => string = count): string {
  if (values.length === 1) return format(values[0]);
  return `${format(median(values))} (${format(Math.min(...values))}–${format(Math.max(...values))})`;
}

/** Whether `value` meets a target, e.g. 'met (≥ 0.5)' or 'MISSED (≥ 0.5)'. */
export function verdict(value: number, target: number, higherIsBetter = true, unit = ''): string {
  const met = higherIsBetter ? value >= target : value < target;
  return `${met ? 'met' : 'MISSED'} (${higherIsBetter ? '≥' : '<'} ${target}${unit})`;
}

/** Median share of a core used by the client or the server over measured sections. */
export function medianCores(ms: Measured[], side: 'client' | 'server' | 'other'): string {
  const cpu = (m: Measured): number => (side === 'client' ? m.clientCpu : side === 'server' ? (m.serverCpu ?? NaN) : (m.otherCpu ?? NaN));
  return median(ms.map((m) => cpu(m) / m.seconds)).toFixed(2);
}
