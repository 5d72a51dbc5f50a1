/**
 * Object storage against its baselines, in one run, on an S3-protocol server on loopback (s3rver).
 *
 *   upload      `--files` files of `--file-mb` MB each go up through the storage layer
 *               (S3ObjectStore.putFile: multipart in s3.multipart.part-size parts, retries,
 *               bounded concurrency), and the same bytes through a raw PutObject loop of the AWS
 *               SDK (one request per file, no storage layer), alternating, `--runs` times.
 *               Target: the layer's throughput ≥ 0.7× the raw loop's.
 *   union read  the same lake-enabled table (`--rows` rows of the bench workload tiered in one
 *               round, 1% more in the log) on two nodes, one with its warehouse in its data
 *               directory, one on S3; the same aggregate through a new SQL session each time:
 *               local; S3 with an empty lake file cache fetching whole files (cold, whole:
 *               datalake.cache.partial-file.max-ratio 0); S3 with an empty cache fetching only the
 *               columns the aggregate uses (cold, columns: the footer and those column chunks by
 *               byte ranges); S3 again (warm: the cache holds those copies); and a query of one
 *               column cold both ways. Target: warm ≤ 1.2× local.
 *
 * Every run is printed, then the medians. What the runs asked of S3 comes from the storage
 * layer's own counters (requests, bytes, cache hits).
 *
 *   npm run bench:object-storage [-- --files 8 --file-mb 16 --rows 1000000 --runs 5]
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
import { S3ObjectStore } from '../src/storage/s3-store.js';
import { storageStats } from '../src/storage/storage-stats.js';
import { configureObjectStorageFrom } from '../src/storage/stores.js';
import { tierOnce } from '../test/support/tiering-rounds.js';
import { BenchServer, columnChunks, count, DATABASE, generateWorkload, median, printHeader, printTable, verdict, WORKLOAD_COLUMNS, workloadColumns } from './support.js';

const TARGET_UPLOAD = 0.7;
const TARGET_WARM = 1.2;
const TABLE = 'storage_bench';
const { values: args } = parseArgs({
  options: { files: { type: 'string', default: '8' }, 'file-mb': { type: 'string', default: '16' }, rows: { type: 'string', default: '1000000' }, runs: { type: 'string', default: '5' } },
});
const files = Number(args.files);
const fileBytes = Number(args['file-mb']) << 20;
const rows = Number(args.rows);
const tail = Math.round(rows / 100);
const runs = Number(args.runs);
// Rounded: sums of doubles differ in their last bits with the order the rows come in.
const AGGREGATE = `SELECT user_id % 100 AS g, count(*) AS n, round(sum(price), 2) AS total FROM ${TABLE} GROUP BY g ORDER BY g`;
/** A query of one column of the five. */
const ONE_COLUMN = `SELECT user_id % 100 AS g, count(*) AS n FROM ${TABLE} GROUP BY g ORDER BY g`;

printHeader('object storage', [
  `S3: s3rver on loopback (a Node process of its own); load before: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')} (1, 5, 15 min), ${os.cpus().length} cores`,
  `upload: ${files} files of ${args['file-mb']} MB, the storage layer against a raw PutObject loop, ${runs} runs each, alternating`,
  `union read: ${count(rows)} lake rows + ${count(tail)} log rows, 4 buckets; ${AGGREGATE}; local warehouse, S3 cold cache (whole files, then columns only), S3 warm cache; then ${ONE_COLUMN}, S3 cold cache (whole files, then columns only)`,
]);

const s3 = await startS3Server('bench');
const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-object-storage-'));
const servers: BenchServer[] = [];
const duck = await DuckSession.create();
const format = lakeFormat('iceberg', { writerThreads: 2 });
try {
  // ---- upload
  const sources = Array.from({ length: files }, (_, i) => {
    const file = path.join(scratch, `upload-${i}`);
    fs.writeFileSync(file, crypto.randomBytes(fileBytes));
    return file;
  });
  const store = new S3ObjectStore({ ...s3.settings, partSize: 8 << 20, maxConnections: 32 });
  const raw = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: s3.settings.accessKeyId!, secretAccessKey: s3.settings.secretAccessKey! } });
  const totalMb = (files * fileBytes) / (1 << 20);
  const timed = async (upload: () => Promise<void>): Promise<number> => {
    const start = performance.now();
    await upload();
    return totalMb / ((performance.now() - start) / 1000);
  };
  const layer: number[] = [];
  const rawLoop: number[] = [];
  const requestsBefore = new Map(storageStats().requests);
  for (let run = 0; run < runs; run++) {
    layer.push(await timed(async () => {
      for (const [i, f] of sources.entries()) await store.putFile(s3.location(`layer/${run}/${i}`), f);
    }));
    rawLoop.push(await timed(async () => {
      for (const [i, f] of sources.entries()) await raw.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `raw/${run}/${i}`, Body: fs.readFileSync(f) }));
    }));
    console.log(`upload run ${run + 1}: storage layer ${layer[run].toFixed(0)} MB/s, raw PutObject ${rawLoop[run].toFixed(0)} MB/s`);
  }
  raw.destroy();
  const layerRequests = [...storageStats().requests].map(([op, n]) => `${op} ${n - (requestsBefore.get(op) ?? 0)}`).join(', ');
  console.log(`storage layer requests: ${layerRequests}`);

  // ---- union read
  const w = generateWorkload(rows + tail);
  const columns = workloadColumns(w);
  const load = async (bench: BenchServer): Promise<void> => {
    await bench.createTable(TABLE, WORKLOAD_COLUMNS, { 'bucket.num': '4', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1h' });
    const append = async (from: number, to: number): Promise<void> => {
      const part = Object.fromEntries(Object.entries(columns).map(([k, v]) => [k, Array.isArray(v) ? v.slice(from, to) : v.subarray(from, to)])) as typeof columns;
      const writer = await (await bench.table(TABLE)).newAppend().createWriter();
      for (const chunk of columnChunks(part, to - from, 32_768)) await writer.appendColumns(chunk);
      await writer.close();
    };
    await append(0, rows);
    await tierOnce(bench.conn, { database: DATABASE, table: TABLE }, format, 600_000);
    await append(rows, rows + tail);
  };
  const local = await BenchServer.start({}, {}, ['--no-tiering']);
  servers.push(local);
  // The client reads the S3 lake with the same options (and sets this process's object storage).
  const onS3 = await BenchServer.start({ ...s3.options, 'datalake.iceberg.warehouse': s3.location('warehouse') }, s3.options, ['--no-tiering']);
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
    configureObjectStorageFrom({ ...s3.options, 'datalake.cache.dir': path.join(scratch, `cache-${name}`), ...(wholeFiles ? { 'datalake.cache.partial-file.max-ratio': '0' } : {}) }, scratch);
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
  const mb = (bytes: number): string => `${(bytes / (1 << 20)).toFixed(2)} MB`;
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

  console.log(`\nmedians of ${runs} runs; load after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}\n`);
  const uploadRatio = layer.map((v, i) => v / rawLoop[i]);
  const warmRatio = times.warm.map((v, i) => v / times.local[i]);
  printTable(
    ['measure', 'median', 'ratio'],
    [
      ['upload, storage layer', `${median(layer).toFixed(0)} MB/s`, `${median(uploadRatio).toFixed(2)}× raw`],
      ['upload, raw PutObject loop', `${median(rawLoop).toFixed(0)} MB/s`, ''],
      ['union read, local warehouse', `${median(times.local).toFixed(0)} ms`, ''],
      ['union read, S3 cold cache, whole files', `${median(times.whole).toFixed(0)} ms, ${mb(median(fetched.whole))}`, `${median(times.whole.map((v, i) => v / times.local[i])).toFixed(2)}× local`],
      ['union read, S3 cold cache, columns only', `${median(times.columns).toFixed(0)} ms, ${mb(median(fetched.columns))}`, `${median(times.columns.map((v, i) => v / times.whole[i])).toFixed(2)}× whole`],
      ['one column, S3 cold cache, whole files', `${median(times.oneWhole).toFixed(0)} ms, ${mb(median(fetched.oneWhole))}`, ''],
      ['one column, S3 cold cache, columns only', `${median(times.oneColumns).toFixed(0)} ms, ${mb(median(fetched.oneColumns))}`, `${median(times.oneColumns.map((v, i) => v / times.oneWhole[i])).toFixed(2)}× whole`],
      ['union read, S3 warm cache', `${median(times.warm).toFixed(0)} ms`, `${median(warmRatio).toFixed(2)}× local`],
    ],
  );
  console.log(`\nupload: ${verdict(median(uploadRatio), TARGET_UPLOAD, true, '×')}`);
  console.log(`warm-cache union read: ${verdict(median(warmRatio), TARGET_WARM, false, '×')}`);
} finally {
  format.close();
  duck.close();
  for (const s of servers) await s.dispose();
  await s3.stop();
  fs.rmSync(scratch, { recursive: true, force: true });
}
