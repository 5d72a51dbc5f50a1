/**
 * Primary-key tables: upsert throughput, point lookups and recovery from a KV snapshot, each against
 * lmdb, the KV engine of the server, driven directly in the same run.
 *
 * The table is the workload (support.ts) with `PRIMARY KEY (id)` in 4 buckets (`--buckets`); the
 * server runs as a child process with its defaults (every changelog batch is fsynced before it is
 * acknowledged and before lookups see it). The client uses its defaults (2 MB batches, acks = all,
 * idempotent writer).
 *
 *   upsert    `await writer.upsert(row)` per record (rows built before the timer), then `flush()`.
 *             Baseline: the same encoded keys and KV values (schema id + compacted row) put into a
 *             fresh lmdb environment per bucket, `transactionSync` of 10 000 `putSync` each, with
 *             lmdb's default durable commits. Both run again, on a new table and new environments,
 *             while other work on the machine took more than a quarter core (up to three tries).
 *   lookup    point lookups of uniformly random stored ids through one lookuper, every answer
 *             checked against the workload, in two modes:
 *             window  for each size in `--lookup-windows`: that many lookups in flight, each answer
 *                     issuing the next key (a closed loop), `--lookup-keys` keys. This is how one
 *                     client that batches uses a lookuper, and what the target is judged on: its
 *                     keys/s and its per-key p99, latency counted from the issue of a key to its
 *                     answer, so time spent queued behind the window counts.
 *             round   for each size in `--lookup-batches`: rounds of that many lookups issued at once
 *                     (`Promise.all`), one round after the other. Latency per round (first issue to
 *                     last answer) and per key (its issue to its answer); a round of 1 is a lone
 *                     lookup, one round trip.
 *             Baseline: `getBinary` of the same key bytes on the baseline environments, one after
 *             the other (in the same rounds for the round mode). Each case starts with a full
 *             garbage collection of this process, so that what the upserts left behind is not
 *             collected during the lookups.
 *   recovery  a KV snapshot of every bucket, a graceful stop, the local `kv-*` state deleted, then a
 *             start on the same data dir timed to its `ready` line (the server opens every bucket,
 *             restoring its latest snapshot, before it serves) and to the first lookup answered.
 *             Baselines: copying the snapshot files alone (`fs.promises.copyFile`, what a restore
 *             does), and the start of a server on an empty data dir (process and module loading).
 *
 *   npm run bench:pk [-- --records 1000000 --buckets 4 --lookup-windows 64,256,512
 *                     --lookup-batches 1,100,1000 --lookup-keys 200000 --recoveries 3
 *                     --client client.writer.batch-size=4mb]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import { open, type RootDatabase } from 'lmdb';
import { Connection } from '../src/client/index.js';
import type { Lookuper, Row, Table, TablePath } from '../src/client/index.js';
import { KvEncoding } from '../src/client/kv-encoding.js';
import { encodeKvValue } from '../src/common/row-encoder.js';
import { ServerProcess } from '../test/support/server-process.js';
import {
  BenchServer,
  clientOptionArgs,
  count,
  DATABASE,
  dirBytes,
  generateWorkload,
  measure,
  type Measured,
  median,
  medianCores,
  now,
  percentile,
  printHeader,
  printTable,
  random,
  untilQuiet,
  verdict,
  waitForIdle,
  WORKLOAD_COLUMNS,
  workloadRow,
} from './support.js';

const TARGET_UPSERT_ROWS_PER_S = 100_000;
const TARGET_LOOKUP_KEYS_PER_S = 100_000;
const TARGET_LOOKUP_P99_MS = 5;
const TARGET_RECOVERY_S = 10;
const RAW_TXN_PUTS = 10_000;
/** Rounds per lookup batch size: enough keys for stable rates, enough rounds for a p99. */
const MAX_LOOKUP_ROUNDS = 5000;
const WARMUP_ROUNDS = 20;

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    buckets: { type: 'string', default: '4' },
    'lookup-windows': { type: 'string', default: '64,256,512' },
    'lookup-batches': { type: 'string', default: '1,100,1000' },
    'lookup-keys': { type: 'string', default: '200000' },
    recoveries: { type: 'string', default: '3' },
    client: { type: 'string', multiple: true },
  },
});
const records = Number(args.records);
const buckets = Number(args.buckets);
const lookupWindows = args['lookup-windows'].split(',').map(Number);
const lookupBatches = args['lookup-batches'].split(',').map(Number);
const lookupKeyCount = Number(args['lookup-keys']);
const recoveries = Number(args.recoveries);
const clientOptions = clientOptionArgs(args.client);
const tablePath: TablePath = { database: DATABASE, table: 'pk' };
v8.setFlagsFromString('--expose-gc');
/** A full collection of this process: what the upserts left behind must not be collected during the lookups. */
const collectGarbage = vm.runInNewContext('gc') as () => void;
type Env = RootDatabase<Uint8Array, Uint8Array>;

printHeader('pk', [
  `workload: ${count(records)} rows (id BIGINT PRIMARY KEY, user_id BIGINT, item STRING 16 chars, price DOUBLE, ts TIMESTAMP(6)), ${buckets} buckets`,
  'server: child process, defaults (fsync before every ack); baseline: lmdb 3.5.6 in this process, one environment per bucket',
  `client: ${JSON.stringify(clientOptions)} over the defaults (batch-size 2mb, acks all, idempotent)`,
  `lookups: ${lookupWindows.join(', ')} in flight, ${count(lookupKeyCount)} keys each; rounds of ${lookupBatches.join(', ')} keys at once, up to ${count(lookupKeyCount)} keys or ${MAX_LOOKUP_ROUNDS} rounds per size`,
]);

/** Encoded keys and KV values of one bucket, in the order the writer sends them. */
interface BucketKv {
  keys: Uint8Array[];
  values: Uint8Array[];
}

/** Lookups with a fixed number in flight. */
interface WindowCase {
  window: number;
  keys: number;
  m: Measured;
  /** Sorted latencies. */
  keyMs: Float64Array;
  rawKeysPerSecond: number;
}

/** Rounds of lookups issued at once. */
interface LookupCase {
  batch: number;
  keys: number;
  m: Measured;
  /** Sorted latencies. */
  roundMs: Float64Array;
  keyMs: Float64Array;
  rawKeysPerSecond: number;
  rawRoundMs: Float64Array;
}

const workload = generateWorkload(records);
const nextId = random(11);
/** Ids to look up, uniform over the stored ones; every batch size walks the same list from the start. */
const ids = Array.from({ length: lookupKeyCount + WARMUP_ROUNDS * Math.max(...lookupBatches, ...lookupWindows) }, () => 1 + Math.floor(nextId() * records));
const lookupKeys: Row[] = ids.map((id) => ({ id: BigInt(id) }));
const rawDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-pk-lmdb-'));
let bench: BenchServer | undefined = await BenchServer.start({}, clientOptions);
const dataDir = bench.dataDir;
let restarted: ServerProcess | undefined;
try {
  // ---------------------------------------------------------------- upsert
  // On a fresh table and fresh lmdb environments, again while other work took over a quarter core.
  let previous: { envs: Env[]; dir: string } | undefined;
  const { table, tableDir, encoding, envs, m: upsert, rawPut } = await untilQuiet(async (tryNumber) => {
    if (previous) {
      for (const env of previous.envs) await env.close();
      fs.rmSync(previous.dir, { recursive: true, force: true });
      await bench!.conn.getAdmin().dropTable(tablePath);
    }
    const tableId = await bench!.conn.getAdmin().createTable(tablePath, { columns: WORKLOAD_COLUMNS, primaryKey: ['id'], properties: { 'bucket.num': String(buckets) } });
    const table = await bench!.table(tablePath.table);
    const encoding = new KvEncoding(table.info, bench!.conn.metadata);
    const dir = path.join(rawDir, `try-${tryNumber}`);
    const envs = Array.from({ length: buckets }, (_, b) => open<Uint8Array, Uint8Array>({ path: path.join(dir, `kv-${b}`), keyEncoding: 'binary', encoding: 'binary', compression: false }));
    previous = { envs, dir };
    const { upsert, rawPut } = await upsertCase(table, encoding, envs);
    return { table, tableDir: path.join(dataDir, 'log', DATABASE, `${tablePath.table}-${tableId}`), encoding, envs, m: upsert, rawPut };
  });
  const upsertRate = records / upsert.seconds;
  const rawPutRate = records / rawPut.seconds;

  // ---------------------------------------------------------------- lookup
  const lookuper = table.newLookup().createLookuper();
  // The same keys, encoded and assigned to their bucket's environment before any timer.
  const rawKeys = lookupKeys.map((key) => {
    const values = encoding.keyRow(key);
    return { env: envs[encoding.assigner.bucketOf(values)], key: encoding.keyEncoder.encode(values) };
  });
  const windows: WindowCase[] = [];
  for (const window of lookupWindows) {
    const c = await windowCase(lookuper, rawKeys, window);
    console.log(`lookup ${window} in flight: ${count(c.keys / c.m.seconds)} keys/s, key p50 ${percentile(c.keyMs, 50).toFixed(2)} ms p99 ${percentile(c.keyMs, 99).toFixed(2)} ms; lmdb ${count(c.rawKeysPerSecond)} keys/s`);
    windows.push(c);
  }
  const lookups: LookupCase[] = [];
  for (const batch of lookupBatches) {
    const c = await lookupCase(lookuper, rawKeys, batch);
    console.log(`lookup ${batch} at once: ${count(c.keys / c.m.seconds)} keys/s, round p50 ${percentile(c.roundMs, 50).toFixed(2)} ms p99 ${percentile(c.roundMs, 99).toFixed(2)} ms; lmdb ${count(c.rawKeysPerSecond)} keys/s`);
    lookups.push(c);
  }
  for (const env of envs) await env.close();

  // ---------------------------------------------------------------- recovery
  const snapshotStart = now();
  const snapshots = await bench.conn.getAdmin().triggerKvSnapshot(tablePath);
  const snapshotSeconds = (now() - snapshotStart) / 1000;
  const snapshotRows = snapshots.reduce((n, s) => n + (s.rowCount ?? 0), 0);
  if (snapshotRows !== records) throw new Error(`the KV snapshots hold ${snapshotRows} rows, expected ${records}`);
  // Each bucket's snapshot: its _METADATA and the chunks of its lmdb copy (snap-<id>/, shared/).
  const metadataFiles = filesNamed(path.join(dataDir, 'remote'), '_METADATA');
  if (metadataFiles.length !== buckets) throw new Error(`expected ${buckets} snapshots, found ${metadataFiles.length}`);
  const snapshotFiles = metadataFiles.flatMap((m) => {
    const { chunks } = JSON.parse(fs.readFileSync(m, 'utf8')) as { chunks: string[] };
    return chunks.map((hash) => path.join(path.dirname(path.dirname(m)), 'shared', hash));
  });
  const snapshotBytes = snapshotFiles.reduce((n, f) => n + fs.statSync(f).size, 0);
  console.log(`snapshot: ${buckets} buckets, ${snapshotFiles.length} chunks, ${(snapshotBytes / 1e6).toFixed(1)} MB, taken in ${snapshotSeconds.toFixed(2)} s`);
  await bench.stop();
  bench = undefined;

  const emptyStartSeconds: number[] = [];
  const copySeconds: number[] = [];
  const readySeconds: number[] = [];
  const firstLookupSeconds: number[] = [];
  for (let run = 0; run < recoveries; run++) {
    await waitForIdle();
    let start = now();
    const empty = await ServerProcess.start();
    emptyStartSeconds.push((now() - start) / 1000);
    await empty.stopAndRemove();

    const copyDir = path.join(rawDir, `copy-${run}`);
    await waitForIdle();
    start = now();
    await fs.promises.mkdir(copyDir, { recursive: true });
    for (const [i, file] of snapshotFiles.entries()) await fs.promises.copyFile(file, path.join(copyDir, String(i)));
    copySeconds.push((now() - start) / 1000);
    fs.rmSync(copyDir, { recursive: true });

    for (const d of fs.readdirSync(tableDir).filter((d) => d.startsWith('kv-'))) fs.rmSync(path.join(tableDir, d), { recursive: true });
    await waitForIdle();
    start = now();
    restarted = await ServerProcess.start({ dataDir });
    readySeconds.push((now() - start) / 1000);
    const conn = await Connection.create({ 'bootstrap.servers': restarted.bootstrap, ...clientOptions });
    const id = ids[run];
    const found = await (await conn.getTable(tablePath)).newLookup().createLookuper().lookup({ id: BigInt(id) });
    firstLookupSeconds.push((now() - start) / 1000);
    if (found?.item !== workload.item[id - 1]) throw new Error(`after recovery, key ${id} reads ${JSON.stringify(found)}`);
    const recovered = (await conn.getAdmin().getTableStats(tablePath)).rowCount;
    if (recovered !== BigInt(records)) throw new Error(`after recovery the table holds ${recovered} rows, expected ${records}`);
    await conn.close();
    const code = await restarted.stop();
    restarted = undefined;
    if (code !== 0) throw new Error(`server exited with ${code}`);
    console.log(`recovery run ${run + 1}: ready after ${readySeconds[run].toFixed(2)} s, first lookup after ${firstLookupSeconds[run].toFixed(2)} s`);
  }

  // ---------------------------------------------------------------- report
  const ms = (sorted: Float64Array, p: number): string => percentile(sorted, p).toFixed(3);
  const s = (values: number[]): string => median(values).toFixed(2);
  const restoreSeconds = median(readySeconds) - median(emptyStartSeconds);
  console.log(`\nstate on disk: ${(dirBytes(tableDir, (n) => n.endsWith('.mdb')) / 1e6).toFixed(1)} MB lmdb, ${(dirBytes(tableDir, (n) => n.endsWith('.log')) / 1e6).toFixed(1)} MB changelog; lmdb baseline ${(dirBytes(rawDir) / 1e6).toFixed(1)} MB`);
  console.log(`cores used during upserts: client ${medianCores([upsert], 'client')}, server ${medianCores([upsert], 'server')}, other ${medianCores([upsert], 'other')}`);
  // CPU time per row or key, all threads of each process: what other load on the machine changes least.
  const micros = (cpu: number | undefined, n: number): string => (((cpu ?? NaN) * 1e6) / n).toFixed(1);
  const perItem = (m: Measured, n: number): string => `client ${micros(m.clientCpu, n)} µs, server ${micros(m.serverCpu, n)} µs`;
  console.log(`CPU per upserted row: ${perItem(upsert, records)}`);
  console.log(`CPU per key looked up: ${[...windows.map((c) => `${c.window} in flight ${perItem(c.m, c.keys)}`), ...lookups.map((c) => `${c.batch} at once ${perItem(c.m, c.keys)}`)].join('; ')}\n`);
  printTable(
    ['upsert', 'rows/s', 'lmdb puts rows/s', 'ratio', 'target'],
    [[`${count(records)} rows, ${buckets} buckets`, count(upsertRate), count(rawPutRate), (upsertRate / rawPutRate).toFixed(3), verdict(upsertRate, TARGET_UPSERT_ROWS_PER_S)]],
  );
  console.log('');
  // The target is judged on the window mode: one client keeping lookups in flight, each key's
  // latency counted from its issue. Rounds wait for their slowest key before the next is issued.
  printTable(
    ['lookups in flight', 'keys/s', 'lmdb keys/s', 'ratio', 'target', 'key p50 / p99 / max ms', 'target', 'CPU per key client / server', 'client / server cores'],
    windows.map((c) => {
      const rate = c.keys / c.m.seconds;
      return [
        c.window,
        count(rate),
        count(c.rawKeysPerSecond),
        (rate / c.rawKeysPerSecond).toFixed(3),
        verdict(rate, TARGET_LOOKUP_KEYS_PER_S),
        `${ms(c.keyMs, 50)} / ${ms(c.keyMs, 99)} / ${ms(c.keyMs, 100)}`,
        verdict(percentile(c.keyMs, 99), TARGET_LOOKUP_P99_MS, false, ' ms'),
        `${micros(c.m.clientCpu, c.keys)} / ${micros(c.m.serverCpu, c.keys)} µs`,
        `${medianCores([c.m], 'client')} / ${medianCores([c.m], 'server')}`,
      ];
    }),
  );
  const meeting = windows.filter((c) => c.keys / c.m.seconds >= TARGET_LOOKUP_KEYS_PER_S && percentile(c.keyMs, 99) < TARGET_LOOKUP_P99_MS);
  console.log(
    `lookup target (≥ ${count(TARGET_LOOKUP_KEYS_PER_S)} keys/s with key p99 < ${TARGET_LOOKUP_P99_MS} ms, one client): ${meeting.length > 0 ? `met with ${meeting.map((c) => c.window).join(', ')} in flight` : 'MISSED at every window'}`,
  );
  console.log('');
  printTable(
    ['lookup keys at once', 'keys/s', 'lmdb keys/s', 'ratio', 'round p50 / p99 ms', 'lmdb round p50 / p99 ms', 'key p50 / p99 ms', 'client / server cores'],
    lookups.map((c) => {
      const rate = c.keys / c.m.seconds;
      return [
        c.batch,
        count(rate),
        count(c.rawKeysPerSecond),
        (rate / c.rawKeysPerSecond).toFixed(3),
        `${ms(c.roundMs, 50)} / ${ms(c.roundMs, 99)}`,
        `${ms(c.rawRoundMs, 50)} / ${ms(c.rawRoundMs, 99)}`,
        `${ms(c.keyMs, 50)} / ${ms(c.keyMs, 99)}`,
        `${medianCores([c.m], 'client')} / ${medianCores([c.m], 'server')}`,
      ];
    }),
  );
  console.log('');
  printTable(
    ['recovery of a snapshot', 'seconds', 'copy of the snapshot files s', 'ratio', 'target'],
    [
      ['start to ready', s(readySeconds), s(copySeconds), (median(readySeconds) / median(copySeconds)).toFixed(1), verdict(median(readySeconds), TARGET_RECOVERY_S, false, ' s')],
      ['start to first lookup answered', s(firstLookupSeconds), s(copySeconds), (median(firstLookupSeconds) / median(copySeconds)).toFixed(1), verdict(median(firstLookupSeconds), TARGET_RECOVERY_S, false, ' s')],
      ['ready minus empty-server start', restoreSeconds.toFixed(2), s(copySeconds), (restoreSeconds / median(copySeconds)).toFixed(1), ''],
      ['empty server: start to ready', s(emptyStartSeconds), '', '', ''],
    ],
  );
  console.log(`\nsnapshot of ${count(records)} rows: ${(snapshotBytes / 1e6).toFixed(1)} MB taken in ${snapshotSeconds.toFixed(2)} s; recovery times are medians of ${recoveries} run(s)`);
  console.log('ratios: Tributary / lmdb for rates (1.0 = as fast as lmdb alone), Tributary / copy for times');
} finally {
  await bench?.stop().catch(() => undefined);
  await restarted?.kill();
  fs.rmSync(dataDir, { recursive: true, force: true });
  fs.rmSync(rawDir, { recursive: true, force: true });
}

/**
 * Upserts every row through the server, then puts the same keys and values into lmdb directly. The
 * rows and their encodings are dropped on return, so that they do not weigh on later measurements.
 */
async function upsertCase(table: Table, encoding: KvEncoding, envs: Env[]): Promise<{ upsert: Measured; rawPut: Measured }> {
  const rows = Array.from({ length: records }, (_, i) => workloadRow(workload, i));
  const writer = await table.newUpsert().createWriter();
  const upsert = await measure(bench!.pid, async () => {
    for (const row of rows) await writer.upsert(row);
    await writer.flush();
  });
  await writer.close();
  const stored = (await bench!.conn.getAdmin().getTableStats(tablePath)).rowCount;
  if (stored !== BigInt(records)) throw new Error(`the table holds ${stored} rows after ${records} upserts`);
  console.log(`upsert: ${count(records / upsert.seconds)} rows/s in ${upsert.seconds.toFixed(2)} s`);

  // Keys and KV values by bucket, encoded as the writer and the server encode them.
  const kv: BucketKv[] = Array.from({ length: buckets }, () => ({ keys: [], values: [] }));
  for (const row of rows) {
    const values = encoding.internalRow(row);
    const bucket = kv[encoding.assigner.bucketOf(values)];
    bucket.keys.push(encoding.keyEncoder.encode(values));
    bucket.values.push(encodeKvValue(table.info.schemaId, encoding.rowEncoder.encode(values)));
  }
  const rawPut = await measure(undefined, async () => {
    kv.forEach((bucket, b) => {
      for (let from = 0; from < bucket.keys.length; from += RAW_TXN_PUTS) {
        envs[b].transactionSync(() => {
          for (let i = from; i < Math.min(bucket.keys.length, from + RAW_TXN_PUTS); i++) envs[b].putSync(bucket.keys[i], bucket.values[i]);
        });
      }
    });
  });
  console.log(`baseline lmdb puts: ${count(records / rawPut.seconds)} rows/s in ${rawPut.seconds.toFixed(2)} s`);
  return { upsert, rawPut };
}

/** `window` lookups in flight through the server for `--lookup-keys` keys, then the same keys on lmdb directly. */
async function windowCase(lookuper: Lookuper, rawKeys: { env: Env; key: Uint8Array }[], window: number): Promise<WindowCase> {
  const first = WARMUP_ROUNDS * window;
  const keyMs = new Float64Array(lookupKeyCount);
  collectGarbage();
  await lookupWindow(lookuper, 0, first, window, undefined);
  const m = await measure(bench!.pid, () => lookupWindow(lookuper, first, lookupKeyCount, window, keyMs));
  const raw = await measure(undefined, async () => rawGets(rawKeys, first, lookupKeyCount));
  return { window, keys: lookupKeyCount, m, keyMs: keyMs.sort(), rawKeysPerSecond: lookupKeyCount / raw.seconds };
}

/**
 * Looks up the `keys` keys from `from` with `window` of them in flight: the answer of each issues
 * the next. Checks every answer and records each key's latency, from its issue to its answer.
 */
function lookupWindow(lookuper: Lookuper, from: number, keys: number, window: number, latencyMs: Float64Array | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    let next = from;
    let answered = 0;
    const issue = (): void => {
      const i = next++;
      const start = now();
      lookuper.lookup(lookupKeys[i]).then((row) => {
        if (latencyMs) latencyMs[i - from] = now() - start;
        checkAnswer(i, row);
        if (++answered === keys) resolve();
        else if (next < from + keys) issue();
      }).catch(reject);
    };
    for (let k = 0; k < Math.min(window, keys); k++) issue();
  });
}

/** The lmdb baseline: `getBinary` of `n` keys from `from`, one after the other. */
function rawGets(rawKeys: { env: Env; key: Uint8Array }[], from: number, n: number): void {
  for (let i = from; i < from + n; i++) {
    if (rawKeys[i].env.getBinary(rawKeys[i].key) === undefined) throw new Error(`lmdb lost key ${ids[i]}`);
  }
}

/** Throws unless `row` is the stored row of lookup key `i`. */
function checkAnswer(i: number, row: Row | null): void {
  const id = ids[i];
  if (row?.id !== BigInt(id) || row.item !== workload.item[id - 1] || row.price !== workload.price[id - 1]) throw new Error(`key ${id} reads ${JSON.stringify(row, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
}

/** Rounds of `batch` lookups through the server, then the same rounds on lmdb directly. */
async function lookupCase(lookuper: Lookuper, rawKeys: { env: Env; key: Uint8Array }[], batch: number): Promise<LookupCase> {
  const rounds = Math.min(MAX_LOOKUP_ROUNDS, Math.floor(lookupKeyCount / batch));
  const first = WARMUP_ROUNDS * batch;
  const roundMs = new Float64Array(rounds);
  const keyMs = new Float64Array(rounds * batch);
  collectGarbage();
  for (let r = 0; r < WARMUP_ROUNDS; r++) await lookupRound(lookuper, r * batch, batch, undefined);
  const m = await measure(bench!.pid, async () => {
    for (let r = 0; r < rounds; r++) {
      const start = now();
      await lookupRound(lookuper, first + r * batch, batch, keyMs.subarray(r * batch, (r + 1) * batch));
      roundMs[r] = now() - start;
    }
  });
  const rawRoundMs = new Float64Array(rounds);
  const raw = await measure(undefined, async () => {
    for (let r = 0; r < rounds; r++) {
      const start = now();
      rawGets(rawKeys, first + r * batch, batch);
      rawRoundMs[r] = now() - start;
    }
  });
  return { batch, keys: rounds * batch, m, roundMs: roundMs.sort(), keyMs: keyMs.sort(), rawKeysPerSecond: (rounds * batch) / raw.seconds, rawRoundMs: rawRoundMs.sort() };
}

/** Looks up `batch` keys from `from` at once, checks every answer, records each key's latency. */
async function lookupRound(lookuper: Lookuper, from: number, batch: number, latencyMs: Float64Array | undefined): Promise<void> {
  const pending = new Array<Promise<void>>(batch);
  for (let j = 0; j < batch; j++) {
    const start = now();
    pending[j] = lookuper.lookup(lookupKeys[from + j]).then((row) => {
      if (latencyMs) latencyMs[j] = now() - start;
      checkAnswer(from + j, row);
    });
  }
  await Promise.all(pending);
}

/** Paths of the files called `name` under `dir`. */
function filesNamed(dir: string, name: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return filesNamed(p, name);
    return e.isFile() && e.name === name ? [p] : [];
  });
}
