/**
 * Object storage against its baselines, in one run, on an S3-protocol server on loopback (s3rver).
 * `--phases` picks which of these run (all by default):
 *
 *   upload      `--files` files of `--file-mb` MB each go up through the storage layer
 *               (S3ObjectStore.putFile with the default s3.multipart.* options: a file below
 *               s3.multipart.threshold as one streamed PutObject), through the layer with every
 *               file as a multipart upload (the threshold at the part size), and the same bytes
 *               through a raw PutObject loop of the AWS SDK (one request per file from a buffer, no
 *               storage layer), alternating, `--runs` times.
 *               Target: the layer's throughput ≥ 0.7× the raw loop's.
 *   union-read  the same lake-enabled table (`--rows` rows of the bench workload tiered in one
 *               round, 1% more in the log) on two nodes, one with its warehouse in its data
 *               directory, one on S3; the same aggregate through a new SQL session each time:
 *               local; S3 with an empty lake file cache fetching whole files (cold, whole:
 *               datalake.cache.partial-file.max-ratio 0); S3 with an empty cache fetching only the
 *               columns the aggregate uses (cold, columns: the footer and those column chunks by
 *               byte ranges); S3 again (warm: the cache holds those copies); and a query of one
 *               column cold both ways. Target: warm ≤ 1.2× local.
 *   row-groups  a lake table on S3 of one file of `--rows` rows (an id and a 128-character hex
 *               string) in row groups of `--row-group-rows`, as compaction makes them; a read of
 *               the rows with id = one value, with an empty lake file cache, its copy pruned to
 *               the row groups whose statistics may hold the value, and not pruned (the same
 *               columns, every row group); what each fetched, its GET requests and its time.
 *   hours       "hours locally, history in the lake": a lake-enabled log table with its remote
 *               log and its lake on S3, 256 KB segments, table.log.ttl 7 days, two local
 *               segments a bucket, is fed one hour of traffic at `--hour-rate` rows/s (the
 *               volume, appended as fast as it goes); once the lake holds every row and the
 *               remote log and local retention have caught up: the log's bytes on local disk (as
 *               the server reports them, and a walk of its data directory), in the remote log, in
 *               the lake, and the local share of the whole.
 *
 * Every run is printed, then the medians. What the runs asked of S3 comes from the storage
 * layer's own counters (requests, bytes, cache hits).
 *
 *   npm run bench:object-storage [-- --phases upload,union-read,row-groups,hours --files 8
 *                                    --file-mb 16 --rows 1000000 --row-group-rows 100000
 *                                    --runs 5 --hour-rate 1000]
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { lakeFormat } from '../src/lake/formats/index.js';
import { DuckSession } from '../src/query/duckdb/session.js';
import { SqlExecutor } from '../src/query/executor.js';
import { startS3Server } from '../src/storage/fixtures/s3-server.js';
import { s3SettingsOf } from '../src/storage/s3-settings.js';
import { S3ObjectStore } from '../src/storage/s3-store.js';
import { storageStats } from '../src/storage/storage-stats.js';
import { configureObjectStorageFrom, objectStoreFor } from '../src/storage/stores.js';
import { FileSystemCatalog } from '../src/lake/iceberg/catalog.js';
import { FileContent } from '../src/lake/iceberg/data-file.js';
import { batchOf } from '../src/lake/iceberg/fixtures/lake-files.js';
import { IcebergFormat } from '../src/lake/iceberg/iceberg-format.js';
import { computeMetrics } from '../src/lake/iceberg/metrics.js';
import { writeParquet } from '../src/lake/iceberg/parquet.js';
import { commitRowDelta } from '../src/lake/iceberg/snapshot-producer.js';
import { newTableMetadata } from '../src/lake/iceberg/table-metadata.js';
import type { IcebergSchema } from '../src/lake/iceberg/types.js';
import { lakePartFilter } from '../src/query/lake-pruning.js';
import { tierOnce, waitTiered } from '../test/support/tiering-rounds.js';
import { BenchServer, columnChunks, count, DATABASE, generateWorkload, median, printHeader, printTable, verdict, WORKLOAD_COLUMNS, workloadColumns } from './support.js';

const TARGET_UPLOAD = 0.7;
const TARGET_WARM = 1.2;
const TABLE = 'storage_bench';
const HOURS_TABLE = 'storage_hours';
const PHASES = ['upload', 'union-read', 'row-groups', 'hours'] as const;
const { values: args } = parseArgs({
  options: {
    phases: { type: 'string', default: PHASES.join(',') },
    files: { type: 'string', default: '8' },
    'file-mb': { type: 'string', default: '16' },
    rows: { type: 'string', default: '1000000' },
    'row-group-rows': { type: 'string', default: '100000' },
    runs: { type: 'string', default: '5' },
    'hour-rate': { type: 'string', default: '1000' },
    'hour-buckets': { type: 'string', default: '4' },
    'hour-segment': { type: 'string', default: '256kb' },
    'hour-freshness': { type: 'string', default: '10s' },
    'hour-remote-interval': { type: 'string', default: '2s' },
  },
});
const phases = new Set(args.phases.split(','));
for (const p of phases) if (!(PHASES as readonly string[]).includes(p)) throw new Error(`unknown phase '${p}': expected ${PHASES.join(', ')}`);
const files = Number(args.files);
const fileBytes = Number(args['file-mb']) << 20;
const rows = Number(args.rows);
const tail = Math.round(rows / 100);
const runs = Number(args.runs);
const hourRows = Number(args['hour-rate']) * 3600;
const hourBuckets = Number(args['hour-buckets']);
// Rounded: sums of doubles differ in their last bits with the order the rows come in.
const AGGREGATE = `SELECT user_id % 100 AS g, count(*) AS n, round(sum(price), 2) AS total FROM ${TABLE} GROUP BY g ORDER BY g`;
/** A query of one column of the five. */
const ONE_COLUMN = `SELECT user_id % 100 AS g, count(*) AS n FROM ${TABLE} GROUP BY g ORDER BY g`;
const loadAverage = (): string => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const mb = (bytes: number | bigint): string => `${(Number(bytes) / (1 << 20)).toFixed(2)} MB`;

printHeader('object storage', [
  `S3: s3rver on loopback (a Node process of its own); load before: ${loadAverage()} (1, 5, 15 min), ${os.cpus().length} cores`,
  ...(phases.has('upload') ? [`upload: ${files} files of ${args['file-mb']} MB, the storage layer (default multipart options, and every file multipart) against a raw PutObject loop, ${runs} runs each, alternating`] : []),
  ...(phases.has('union-read') ? [`union read: ${count(rows)} lake rows + ${count(tail)} log rows, 4 buckets; ${AGGREGATE}; local warehouse, S3 cold cache (whole files, then columns only), S3 warm cache; then ${ONE_COLUMN}, S3 cold cache (whole files, then columns only)`] : []),
  ...(phases.has('row-groups') ? [`row groups: one file of ${count(rows)} rows in row groups of ${count(Number(args['row-group-rows']))}; id = one value, cold cache, pruned and not pruned`] : []),
  ...(phases.has('hours') ? [`hours: one hour at ${args['hour-rate']} rows/s (${count(hourRows)} rows), ${hourBuckets} buckets, ${args['hour-segment']} segments, lake freshness ${args['hour-freshness']}, remote log rounds every ${args['hour-remote-interval']}`] : []),
]);

const s3 = await startS3Server('bench');
// The servers run with the declared s3.multipart.* defaults, not the test server's small ones.
const s3Options = Object.fromEntries(Object.entries(s3.options).filter(([k]) => !k.startsWith('s3.multipart.')));
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-object-storage-'));
const servers: BenchServer[] = [];
const duck = await DuckSession.create();
const format = lakeFormat('iceberg', { writerThreads: 2 });
const summary: string[][] = [];
const verdicts: string[] = [];

/** Bytes of the files under `dir`, at any depth (a file deleted meanwhile counts 0). */
function diskBytes(dir: string): number {
  let total = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) if (e.isFile()) total += fs.statSync(path.join(e.parentPath, e.name), { throwIfNoEntry: false })?.size ?? 0;
  return total;
}

async function upload(): Promise<void> {
  const sources = Array.from({ length: files }, (_, i) => {
    const file = path.join(scratch, `upload-${i}`);
    fs.writeFileSync(file, crypto.randomBytes(fileBytes));
    return file;
  });
  const defaults = s3SettingsOf(undefined, {});
  const store = new S3ObjectStore({ ...s3.settings, partSize: defaults.partSize, multipartThreshold: defaults.multipartThreshold, maxConnections: 32 });
  const multipart = new S3ObjectStore({ ...s3.settings, partSize: defaults.partSize, multipartThreshold: defaults.partSize, maxConnections: 32 });
  // The raw loop asks for checksums as the storage layer does: only where S3 requires them.
  const raw = new S3Client({
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    requestChecksumCalculation: 'WHEN_REQUIRED',
    credentials: { accessKeyId: s3.settings.accessKeyId!, secretAccessKey: s3.settings.secretAccessKey! },
  });
  const totalMb = (files * fileBytes) / (1 << 20);
  const timed = async (upload: () => Promise<void>): Promise<number> => {
    const start = performance.now();
    await upload();
    return totalMb / ((performance.now() - start) / 1000);
  };
  const speeds: Record<'layer' | 'multipart' | 'raw', number[]> = { layer: [], multipart: [], raw: [] };
  const requests: Record<'layer' | 'multipart', Map<string, number>> = { layer: new Map(), multipart: new Map() };
  const counted = async (way: 'layer' | 'multipart', upload: () => Promise<void>): Promise<number> => {
    const before = new Map(storageStats().requests);
    const speed = await timed(upload);
    for (const [op, n] of storageStats().requests) requests[way].set(op, (requests[way].get(op) ?? 0) + n - (before.get(op) ?? 0));
    return speed;
  };
  for (let run = 0; run < runs; run++) {
    speeds.layer.push(await counted('layer', async () => {
      for (const [i, f] of sources.entries()) await store.putFile(s3.location(`layer/${run}/${i}`), f);
    }));
    speeds.raw.push(await timed(async () => {
      for (const [i, f] of sources.entries()) await raw.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `raw/${run}/${i}`, Body: fs.readFileSync(f) }));
    }));
    speeds.multipart.push(await counted('multipart', async () => {
      for (const [i, f] of sources.entries()) await multipart.putFile(s3.location(`multipart/${run}/${i}`), f);
    }));
    console.log(`upload run ${run + 1}: storage layer ${speeds.layer[run].toFixed(0)} MB/s, raw PutObject ${speeds.raw[run].toFixed(0)} MB/s, storage layer all multipart ${speeds.multipart[run].toFixed(0)} MB/s`);
  }
  raw.destroy();
  const listed = (m: Map<string, number>): string => [...m].filter(([, n]) => n > 0).map(([op, n]) => `${op} ${n}`).join(', ');
  console.log(`storage layer requests: ${listed(requests.layer)}; all multipart: ${listed(requests.multipart)}`);
  const ratio = speeds.layer.map((v, i) => v / speeds.raw[i]);
  summary.push(
    ['upload, storage layer', `${median(speeds.layer).toFixed(0)} MB/s`, `${median(ratio).toFixed(2)}× raw`],
    ['upload, raw PutObject loop', `${median(speeds.raw).toFixed(0)} MB/s`, ''],
    ['upload, storage layer, all multipart', `${median(speeds.multipart).toFixed(0)} MB/s`, `${median(speeds.multipart.map((v, i) => v / speeds.raw[i])).toFixed(2)}× raw`],
  );
  verdicts.push(`upload: ${verdict(median(ratio), TARGET_UPLOAD, true, '×')}`);
}

async function unionRead(): Promise<void> {
  const w = generateWorkload(rows + tail);
  const columns = workloadColumns(w);
  const load = async (bench: BenchServer): Promise<void> => {
    await bench.createTable(TABLE, WORKLOAD_COLUMNS, { 'bucket.num': '4', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1h' });
    await appendRows(bench, TABLE, columns, 0, rows);
    await tierOnce(bench.conn, { database: DATABASE, table: TABLE }, format, 600_000);
    await appendRows(bench, TABLE, columns, rows, rows + tail);
  };
  const local = await BenchServer.start({}, {}, ['--no-tiering']);
  servers.push(local);
  // The client reads the S3 lake with the same options (and sets this process's object storage).
  const onS3 = await BenchServer.start({ ...s3Options, 'datalake.iceberg.warehouse': s3.location('warehouse') }, s3Options, ['--no-tiering']);
  servers.push(onS3);
  await load(local);
  await load(onS3);

  const read = async (bench: BenchServer, query = AGGREGATE): Promise<{ ms: number; result: string }> => {
    const sql = new SqlExecutor(bench.conn, duck, DATABASE);
    const start = performance.now();
    const out = await sql.execute(query);
    const ms = performance.now() - start;
    await sql.close();
    return { ms, result: JSON.stringify(out.result!.rows, (_, v) => (typeof v === 'bigint' ? String(v) : v)) };
  };
  const emptyCache = (name: string, wholeFiles = false): void =>
    configureObjectStorageFrom({ ...s3Options, 'datalake.cache.dir': path.join(scratch, `cache-${name}`), ...(wholeFiles ? { 'datalake.cache.partial-file.max-ratio': '0' } : {}) }, scratch);
  emptyCache('warm-up');
  const expected = new Map([AGGREGATE, ONE_COLUMN].map((q) => [q, '']));
  for (const q of expected.keys()) expected.set(q, (await read(local, q)).result);
  await read(onS3); // warm-up: JIT, DuckDB's first reads
  type Measure = 'local' | 'whole' | 'columns' | 'warm' | 'oneWhole' | 'oneColumns';
  const times: Record<Measure, number[]> = { local: [], whole: [], columns: [], warm: [], oneWhole: [], oneColumns: [] };
  const fetched: Record<Measure, number[]> = { local: [], whole: [], columns: [], warm: [], oneWhole: [], oneColumns: [] };
  /** A read of `query` on S3, checked against the local one, its time and what the lake file cache fetched for it kept under `measure`. */
  const measure = async (m: Measure, query: string, cache?: { name: string; wholeFiles: boolean }): Promise<string> => {
    if (cache) emptyCache(cache.name, cache.wholeFiles);
    const before = storageStats().cacheFetchedBytes;
    const r = await read(onS3, query);
    if (r.result !== expected.get(query)) throw new Error('the reads disagree');
    times[m].push(r.ms);
    fetched[m].push(storageStats().cacheFetchedBytes - before);
    return `${r.ms.toFixed(0)} ms (${mb(fetched[m][fetched[m].length - 1])})`;
  };
  for (let run = 0; run < runs; run++) {
    const l = await read(local);
    if (l.result !== expected.get(AGGREGATE)) throw new Error('the reads disagree');
    times.local.push(l.ms);
    const whole = await measure('whole', AGGREGATE, { name: `${run}-whole`, wholeFiles: true });
    const columns = await measure('columns', AGGREGATE, { name: `${run}-columns`, wholeFiles: false });
    const warm = await measure('warm', AGGREGATE);
    const oneWhole = await measure('oneWhole', ONE_COLUMN, { name: `${run}-one-whole`, wholeFiles: true });
    const oneColumns = await measure('oneColumns', ONE_COLUMN, { name: `${run}-one-columns`, wholeFiles: false });
    console.log(
      `union read run ${run + 1}: local ${l.ms.toFixed(0)} ms; aggregate on S3: cold whole files ${whole}, cold columns only ${columns}, warm ${warm}; ` +
        `one column on S3: cold whole files ${oneWhole}, cold columns only ${oneColumns}`,
    );
  }
  const stats = storageStats();
  console.log(`lake file cache: ${stats.cacheHits} hits, ${stats.cacheMisses} misses`);
  const warmRatio = times.warm.map((v, i) => v / times.local[i]);
  summary.push(
    ['union read, local warehouse', `${median(times.local).toFixed(0)} ms`, ''],
    ['union read, S3 cold cache, whole files', `${median(times.whole).toFixed(0)} ms, ${mb(median(fetched.whole))}`, `${median(times.whole.map((v, i) => v / times.local[i])).toFixed(2)}× local`],
    ['union read, S3 cold cache, columns only', `${median(times.columns).toFixed(0)} ms, ${mb(median(fetched.columns))}`, `${median(times.columns.map((v, i) => v / times.whole[i])).toFixed(2)}× whole`],
    ['one column, S3 cold cache, whole files', `${median(times.oneWhole).toFixed(0)} ms, ${mb(median(fetched.oneWhole))}`, ''],
    ['one column, S3 cold cache, columns only', `${median(times.oneColumns).toFixed(0)} ms, ${mb(median(fetched.oneColumns))}`, `${median(times.oneColumns.map((v, i) => v / times.oneWhole[i])).toFixed(2)}× whole`],
    ['union read, S3 warm cache', `${median(times.warm).toFixed(0)} ms`, `${median(warmRatio).toFixed(2)}× local`],
  );
  verdicts.push(`warm-cache union read: ${verdict(median(warmRatio), TARGET_WARM, false, '×')}`);
  for (const s of servers.splice(0)) await s.dispose();
}

async function rowGroups(): Promise<void> {
  configureObjectStorageFrom({ ...s3Options, 'datalake.cache.dir': path.join(scratch, 'cache-groups') }, scratch);
  const catalog = new FileSystemCatalog(s3.location('row-groups'));
  const schema: IcebergSchema = { type: 'struct', 'schema-id': 0, fields: [{ id: 1, name: 'id', required: true, type: 'long' }, { id: 2, name: 'v', required: false, type: 'string' }] };
  const table = 'grouped';
  await catalog.createTable('db', table, newTableMetadata({ location: catalog.tableLocation('db', table), schema, spec: { 'spec-id': 0, fields: [] }, sortOrder: { 'order-id': 0, fields: [] }, properties: {} }));
  const batch = batchOf(schema, [Array.from({ length: rows }, (_, i) => BigInt(i)), Array.from({ length: rows }, (_, i) => crypto.createHash('sha512').update(String(i)).digest('hex'))]);
  const bytes = writeParquet([batch], { maxRowGroupRows: Number(args['row-group-rows']) });
  const location = `${catalog.tableLocation('db', table)}/data/grouped.parquet`;
  await objectStoreFor(location).put(location, bytes);
  const m = computeMetrics([batch], schema);
  await commitRowDelta(catalog, 'db', table, { dataFiles: [{ content: FileContent.DATA, filePath: location, fileFormat: 'PARQUET', partition: [], recordCount: m.recordCount, fileSizeInBytes: bytes.length, valueCounts: m.valueCounts, nullValueCounts: m.nullValueCounts, lowerBounds: m.lowerBounds, upperBounds: m.upperBounds }], deleteFiles: [] });
  const wanted = String(Math.floor(rows * 0.61));
  type Way = 'pruned' | 'whole';
  const seen: Record<Way, { ms: number[]; bytes: number[]; gets: number[] }> = { pruned: { ms: [], bytes: [], gets: [] }, whole: { ms: [], bytes: [], gets: [] } };
  const gets = (): number => storageStats().requests.get('GetObject') ?? 0;
  const read = async (way: Way, run: number): Promise<string> => {
    configureObjectStorageFrom({ ...s3Options, 'datalake.cache.dir': path.join(scratch, `cache-groups-${way}-${run}`) }, scratch);
    const [before, requests, cpu, start] = [storageStats().cacheFetchedBytes, gets(), process.cpuUsage(), performance.now()];
    const plan = await (await new IcebergFormat().open(catalog.warehouse).loadTable({ database: 'db', table })).planRead();
    try {
      const filter = way === 'pruned' ? lakePartFilter(duck, plan.columns, [{ column: 'id', op: '=', literals: [wanted] }]) : undefined;
      const result = await duck.run(`SELECT id, v FROM (${await plan.rowsSql(plan.splits, ['id', 'v'], filter)}) WHERE id = ${wanted}`);
      if (result.rows.length !== 1) throw new Error(`${way}: ${result.rows.length} rows, not 1`);
    } finally {
      plan.release();
    }
    const ms = performance.now() - start;
    const used = process.cpuUsage(cpu);
    seen[way].ms.push(ms);
    seen[way].bytes.push(storageStats().cacheFetchedBytes - before);
    seen[way].gets.push(gets() - requests);
    return `${way} ${ms.toFixed(0)} ms (CPU ${((used.user + used.system) / 1000).toFixed(0)} ms), ${mb(seen[way].bytes.at(-1)!)}, ${seen[way].gets.at(-1)} GETs`;
  };
  console.log(`row groups: a file of ${mb(bytes.length)}, ${Math.ceil(rows / Number(args['row-group-rows']))} row groups`);
  for (let run = 0; run < runs; run++) console.log(`row groups run ${run + 1}: ${await read('whole', run)}; ${await read('pruned', run)}; load ${loadAverage()}`);
  summary.push(
    ['id = value, S3 cold cache, every row group', `${median(seen.whole.ms).toFixed(0)} ms, ${mb(median(seen.whole.bytes))}, ${median(seen.whole.gets)} GETs`, ''],
    ['id = value, S3 cold cache, row groups pruned', `${median(seen.pruned.ms).toFixed(0)} ms, ${mb(median(seen.pruned.bytes))}, ${median(seen.pruned.gets)} GETs`, `${median(seen.pruned.bytes.map((v, i) => v / seen.whole.bytes[i])).toFixed(3)}× the bytes, ${median(seen.pruned.ms.map((v, i) => v / seen.whole.ms[i])).toFixed(2)}× the time`],
  );
}

/** Appends rows `from` to `to` of `columns` in chunks of `chunkRows` rows, and waits for their acknowledgement. */
async function appendRows(bench: BenchServer, table: string, columns: ReturnType<typeof workloadColumns>, from: number, to: number, chunkRows = 32_768): Promise<void> {
  const part = Object.fromEntries(Object.entries(columns).map(([k, v]) => [k, Array.isArray(v) ? v.slice(from, to) : v.subarray(from, to)])) as typeof columns;
  const writer = await (await bench.table(table)).newAppend().createWriter();
  for (const chunk of columnChunks(part, to - from, chunkRows)) await writer.appendColumns(chunk);
  await writer.close();
}

async function hours(): Promise<void> {
  const keepLocal = 2;
  const bench = await BenchServer.start(
    {
      ...s3Options,
      'datalake.iceberg.warehouse': s3.location('hours/warehouse'),
      'remote.data.dir': s3.location('hours/remote'),
      'log.segment.file-size': args['hour-segment'],
      'remote.log.task-interval-duration': args['hour-remote-interval'],
    },
    // Batches well below a segment: a batch never spans two.
    { ...s3Options, 'client.writer.batch-size': '64kb' },
  );
  servers.push(bench);
  const tablePath = { database: DATABASE, table: HOURS_TABLE };
  const logDir = await bench.createTable(HOURS_TABLE, WORKLOAD_COLUMNS, {
    'bucket.num': String(hourBuckets),
    'bucket.key': 'id',
    'table.datalake.enabled': 'true',
    'table.datalake.freshness': args['hour-freshness'],
    'table.log.ttl': '7d',
    'table.log.tiered.local-segments': String(keepLocal),
  });
  // Sampled: the local log's peak (what waits for the lake or the remote log stays local meanwhile),
  // and each segment's largest size, whose sum is the hour's log.
  let peak = 0;
  const segments = new Map<string, number>();
  const sampler = setInterval(() => {
    peak = Math.max(peak, diskBytes(logDir));
    for (const e of fs.readdirSync(logDir, { withFileTypes: true, recursive: true })) {
      const file = path.join(e.parentPath, e.name);
      if (e.isFile() && e.name.endsWith('.log')) segments.set(file, Math.max(segments.get(file) ?? 0, fs.statSync(file, { throwIfNoEntry: false })?.size ?? 0));
    }
  }, 500);
  const start = performance.now();
  await appendRows(bench, HOURS_TABLE, workloadColumns(generateWorkload(hourRows)), 0, hourRows, 2048);
  const appendedS = (performance.now() - start) / 1000;
  await waitTiered(bench.conn, tablePath, 600_000);
  const tieredS = (performance.now() - start) / 1000;
  // Caught up: every bucket keeps its newest segments only and its remote log nothing the lake holds.
  const admin = bench.conn.getAdmin();
  let storage = await admin.getTableStorage(tablePath);
  for (let i = 0; i < 600 && !storage.every((b) => b.localSegments <= keepLocal + 1 && (b.remoteBytes ?? 0n) === 0n); i++) {
    await new Promise((r) => setTimeout(r, 200));
    storage = await admin.getTableStorage(tablePath);
  }
  const settledS = (performance.now() - start) / 1000;
  clearInterval(sampler);
  const sql = new SqlExecutor(bench.conn, duck, DATABASE);
  const shown = (await sql.execute(`SHOW TABLE STORAGE ${HOURS_TABLE}`)).result!;
  const column = (name: string): number => shown.rows.reduce((sum, r) => sum + Number(r[shown.columns.findIndex((c) => c.name === name)] ?? 0), 0);
  const local = column('local_bytes');
  const remote = column('remote_bytes');
  const lake = column('lake_bytes');
  const onDisk = diskBytes(logDir);
  const dataDir = diskBytes(bench.dataDir);
  const parts = fs.readdirSync(bench.dataDir, { withFileTypes: true }).map((e) => ({ name: e.name, bytes: e.isDirectory() ? diskBytes(path.join(bench.dataDir, e.name)) : fs.statSync(path.join(bench.dataDir, e.name)).size }));
  const metrics = await bench.metrics();
  const remoteUploaded = metrics.get('tributary_remote_log_uploaded_bytes_total') ?? 0;
  const logOffsets = [...(await admin.listOffsets(tablePath, Array.from({ length: hourBuckets }, (_, b) => b), 'latest')).values()].reduce((a, b) => a + b, 0n);
  console.log(`hours: ${count(hourRows)} rows appended in ${appendedS.toFixed(1)} s; the lake held them all at ${tieredS.toFixed(1)} s, remote log and local retention settled at ${settledS.toFixed(1)} s`);
  console.log(`hours: SHOW TABLE STORAGE: local ${mb(local)} in ${column('local_segments')} segments, remote ${mb(remote)} in ${column('remote_segments')} segments, lake ${mb(lake)} in ${column('lake_files')} files`);
  console.log(`hours: on disk: the table's log directory ${mb(onDisk)} (${mb(peak)} at its peak, sampled every 0.5 s), the whole data directory ${mb(dataDir)}: ${parts.filter((p) => p.bytes > 0).sort((a, b) => b.bytes - a.bytes).map((p) => `${p.name} ${mb(p.bytes)}`).join(', ')}`);
  const logVolume = [...segments.values()].reduce((a, b) => a + b, 0);
  console.log(`hours: the hour's log: ${logOffsets} records, ${mb(logVolume)} in ${segments.size} segments; uploaded to the remote log: ${mb(remoteUploaded)}; load after: ${loadAverage()}`);
  const total = local + remote + lake;
  summary.push(
    ['hours: local log bytes (server / disk walk)', `${mb(local)} / ${mb(onDisk)}`, `${((100 * local) / total).toFixed(1)}% of all`],
    ['hours: remote log bytes (now / uploaded over the hour)', `${mb(remote)} / ${mb(remoteUploaded)}`, `${((100 * remote) / total).toFixed(1)}% of all`],
    ['hours: lake bytes', mb(lake), `${((100 * lake) / total).toFixed(1)}% of all`],
    ["hours: the hour's log / local log peak / whole data directory", `${mb(logVolume)} / ${mb(peak)} / ${mb(dataDir)}`, ''],
  );
  verdicts.push(`hours locally: local/total ${(local / total).toFixed(3)}; remote bytes ${remote === 0 ? '0: the lake alone holds the history' : `${mb(remote)}: not 0`}`);
}

try {
  if (phases.has('upload')) await upload();
  if (phases.has('union-read')) await unionRead();
  if (phases.has('row-groups')) await rowGroups();
  if (phases.has('hours')) await hours();
  console.log(`\nmedians of ${runs} runs; load after: ${loadAverage()}\n`);
  printTable(['measure', 'median', 'ratio'], summary);
  console.log('');
  for (const v of verdicts) console.log(v);
} finally {
  format.close();
  duck.close();
  for (const s of servers) await s.dispose();
  await s3.stop();
  fs.rmSync(scratch, { recursive: true, force: true });
}
