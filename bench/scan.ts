/**
 * Scan throughput and the gain of column projection, on a server in another process.
 *
 * A log table of 10 columns of mixed types (about 100 B per row: the workload's five columns of
 * support.ts plus INT, STRING, FLOAT, BOOLEAN and a longer STRING) receives 1M rows through the
 * columnar API. Then, alternating, a LogScanner reads the whole bucket from the earliest offset
 *   all      every column;
 *   project  only `id` (1 of 10 columns), which the server cuts out of each batch without
 *            decoding it;
 * with `pollBatches` until every row has arrived, counting rows and checking the sum of ids. Each
 * batch is CRC-checked, decompressed and decoded into an Arrow RecordBatch by the client: the
 * timer includes all of that, but no conversion into row objects. The baseline is the all-column
 * scan of the same run; the projection speed-up (target ≥ 5×) is its time over the projected scan's.
 *
 * The peers' read-back (docs/benchmarks.md) read 2M records of the 5-column workload and turned
 * each into an object; the same read is measured here on a second table, both as Arrow batches and
 * as row objects (`poll`, BIGINT as bigint, TIMESTAMP as Timestamp), the like-for-like number.
 *
 * Reads are warm: the data was just written and sits in the page cache, as for the peers. A scan
 * during which other work on the machine took more than 0.25 cores is repeated (support.ts).
 *
 *   npm run bench:scan [-- --rows 1000000 --runs 3 --compression ZSTD
 *                       --client client.scanner.log.fetch.max-bytes-for-bucket=16mb]
 */
import { parseArgs } from 'node:util';
import type { ColumnSpec } from '../src/client/index.js';
import type { LogScanner } from '../src/client/log-scanner.js';
import {
  BenchServer,
  clientOptionArgs,
  columnChunks,
  type ColumnValues,
  count,
  generateWorkload,
  logSegmentBytes,
  measure,
  type Measured,
  median,
  medianCores,
  names,
  printHeader,
  printTable,
  random,
  spread,
  untilQuiet,
  verdict,
  WORKLOAD_COLUMNS,
  workloadColumns,
} from './support.js';

const TARGET_SPEEDUP = 5;
const PEER_RECORDS = 2_000_000;
const CHUNK_ROWS = 32_768;

const { values: args } = parseArgs({
  options: {
    rows: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '3' },
    compression: { type: 'string', default: 'ZSTD' },
    client: { type: 'string', multiple: true },
  },
});
const clientOptions = clientOptionArgs(args.client);
const rowCount = Number(args.rows);
const runs = Number(args.runs);
const compression = args.compression;

const WIDE_COLUMNS: ColumnSpec[] = [
  ...WORKLOAD_COLUMNS,
  { name: 'quantity', type: 'INT', nullable: false },
  { name: 'category', type: 'STRING', nullable: false },
  { name: 'discount', type: 'FLOAT', nullable: false },
  { name: 'gift', type: 'BOOLEAN', nullable: false },
  { name: 'note', type: 'STRING', nullable: false },
];

/** The workload plus five more columns: 8 + 8 + 16 + 8 + 8 + 4 + 10 + 4 + 1/8 + 20 B of values, 12 B of string offsets. */
function wideColumns(count: number): Record<string, ColumnValues> {
  const next = random(4242);
  const categories = names(50, 10, next);
  const notes = names(5000, 20, next);
  const quantity = new Int32Array(count);
  const category = new Array<string>(count);
  const discount = new Float32Array(count);
  const gift = new Array<boolean>(count);
  const note = new Array<string>(count);
  for (let i = 0; i < count; i++) {
    quantity[i] = 1 + Math.floor(next() * 20);
    category[i] = categories[Math.floor(next() * categories.length)];
    discount[i] = Math.floor(next() * 50) / 100;
    gift[i] = next() < 0.1;
    note[i] = notes[Math.floor(next() * notes.length)];
  }
  return { ...workloadColumns(generateWorkload(count)), quantity, category, discount, gift, note };
}

printHeader('scan', [
  `table: ${count(rowCount)} rows × ${WIDE_COLUMNS.length} columns (${WIDE_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')}), compression ${compression}, one bucket`,
  `peer comparison: ${count(PEER_RECORDS)} records of the 5-column workload, same compression`,
  `server: defaults; client: ${JSON.stringify(clientOptions)} over the defaults (fetch.max-bytes 16mb, max-bytes-for-bucket 1mb); warm page cache; ${runs} run(s) per scan`,
]);

const bench = await BenchServer.start({}, clientOptions);
try {
  const wideDir = await load('scan_wide', WIDE_COLUMNS, wideColumns(rowCount), rowCount);
  const peerDir = await load('scan_peer', WORKLOAD_COLUMNS, workloadColumns(generateWorkload(PEER_RECORDS)), PEER_RECORDS);
  const wideBytes = logSegmentBytes(wideDir);
  console.log(`log: ${(wideBytes / rowCount).toFixed(1)} B/row (wide), ${(logSegmentBytes(peerDir) / PEER_RECORDS).toFixed(1)} B/record (peer workload)`);

  const expectedIdSum = (rowCount * (rowCount + 1)) / 2;
  const peerIdSum = (PEER_RECORDS * (PEER_RECORDS + 1)) / 2;
  const all: Measured[] = [];
  const projected: Measured[] = [];
  const peer: Measured[] = [];
  const peerRows: Measured[] = [];
  await scan('scan_wide', undefined, rowCount, expectedIdSum); // warm-up: JIT and page cache
  const quiet = async (...args: Parameters<typeof scan>): Promise<Measured> => (await untilQuiet(async () => ({ m: await scan(...args) }))).m;
  for (let run = 0; run < runs; run++) {
    all.push(await quiet('scan_wide', undefined, rowCount, expectedIdSum));
    projected.push(await quiet('scan_wide', ['id'], rowCount, expectedIdSum));
    peer.push(await quiet('scan_peer', undefined, PEER_RECORDS, peerIdSum));
    peerRows.push(await quiet('scan_peer', undefined, PEER_RECORDS, peerIdSum, 'rows'));
  }

  console.log(`\nmedian (min–max) of ${runs} run(s)\n`);
  const rate = (ms: Measured[], n: number): number[] => ms.map((m) => n / m.seconds);
  const speedups = all.map((m, i) => m.seconds / projected[i].seconds);
  const row = (name: string, ms: Measured[], n: number, bytesPerRow: number): string[] => [
    name,
    spread(rate(ms, n)),
    ((median(rate(ms, n)) * bytesPerRow) / 1e6).toFixed(0),
    medianCores(ms, 'client'),
    medianCores(ms, 'server'),
    medianCores(ms, 'other'),
  ];
  printTable(
    ['scan', 'rows/s', 'log MB/s', 'client cores', 'server cores', 'other cores'],
    [
      row(`all ${WIDE_COLUMNS.length} columns`, all, rowCount, wideBytes / rowCount),
      row('project id (1 of 10)', projected, rowCount, wideBytes / rowCount),
      row(`peer workload (${count(PEER_RECORDS)}), Arrow batches`, peer, PEER_RECORDS, logSegmentBytes(peerDir) / PEER_RECORDS),
      row(`peer workload (${count(PEER_RECORDS)}), row objects (poll)`, peerRows, PEER_RECORDS, logSegmentBytes(peerDir) / PEER_RECORDS),
    ],
  );
  console.log(`\nprojection speed-up (all-column time / projected time): ${spread(speedups, (n) => `${n.toFixed(2)}×`)}, ${verdict(median(speedups), TARGET_SPEEDUP)}`);
  const peers: [string, number][] = [
    ['PostgreSQL COPY TO', 1_010_000],
    ['Redis XRANGE', 438_000],
    ['PostgreSQL cursor', 243_000],
    ['NATS ordered consumer', 134_000],
  ];
  for (const [what, ms] of [['Arrow batches', peer], ['row objects', peerRows]] as const) {
    const r = median(rate(ms, PEER_RECORDS));
    console.log(`peer workload read-back as ${what}: ${count(r)} rec/s vs ${peers.map(([name, p]) => `${name} ${count(p)} (${(r / p).toFixed(2)}×)`).join(', ')}`);
  }
} finally {
  await bench.dispose();
}

/** Creates a table and appends `columns` in chunks through the columnar API; returns its log dir. */
async function load(table: string, specs: ColumnSpec[], columns: Record<string, ColumnValues>, n: number): Promise<string> {
  const dir = await bench.createTable(table, specs, { 'table.log.arrow.compression.type': compression });
  const writer = await (await bench.table(table)).newAppend().createWriter();
  const m = await measure(bench.pid, async () => {
    for (const chunk of columnChunks(columns, n, CHUNK_ROWS)) await writer.appendColumns(chunk);
    await writer.close();
  });
  console.log(`loaded ${table}: ${count(n)} rows in ${m.seconds.toFixed(2)} s (${count(n / m.seconds)} rows/s)`);
  return dir;
}

/**
 * Reads bucket 0 of `table` from the start until `n` rows arrived, as Arrow batches (`pollBatches`)
 * or as row objects (`poll`); checks the count and the sum of ids.
 */
async function scan(table: string, projection: string[] | undefined, n: number, expectedIdSum: number, as: 'batches' | 'rows' = 'batches'): Promise<Measured> {
  const builder = (await bench.table(table)).newScan();
  const scanner: LogScanner = (projection ? builder.project(projection) : builder).createLogScanner();
  await scanner.subscribe(0, 'earliest');
  let rows = 0;
  let idSum = 0;
  const m = await measure(bench.pid, async () => {
    while (rows < n) {
      if (as === 'rows') {
        const records = await scanner.poll(1000);
        rows += records.length;
        for (const r of records) idSum += Number(r.row.id as bigint);
        continue;
      }
      for (const { batch } of await scanner.pollBatches(1000)) {
        rows += batch.numRows;
        for (const data of batch.getChild('id')!.data) idSum += lowWordSum(data.values as BigInt64Array);
      }
    }
  });
  scanner.close();
  if (rows !== n || idSum !== expectedIdSum) throw new Error(`${table}: read ${rows} rows with id sum ${idSum}, expected ${n} and ${expectedIdSum}`);
  return m;
}

/** Sum of int64 values below 2^31 (ids here), read as their low 32-bit words to avoid a BigInt per value. */
function lowWordSum(values: BigInt64Array): number {
  const words = new Int32Array(values.buffer, values.byteOffset, values.length * 2);
  let sum = 0;
  for (let i = 0; i < words.length; i += 2) sum += words[i];
  return sum;
}
