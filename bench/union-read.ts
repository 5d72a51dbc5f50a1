/**
 * Union read latency against DuckDB reading the same lake files directly, in one run.
 *
 * A lake-enabled log table of the workload (support.ts), 4 buckets, receives `--lake-rows` rows
 * (default 2M) through the columnar API; one tiering round, run in this process, moves them all
 * into the lake (Parquet, one file per bucket and 1M rows). Then `--tail-rows` more rows (default
 * 1% of the lake rows) are appended and stay in the log only. Alternating, each on an idle
 * machine, the same aggregate runs as
 *
 *   union   `SELECT user_id % 100 AS g, count(*), sum(price) FROM t GROUP BY g` through the SQL
 *           executor: lake snapshot and offsets from the coordinator, scan planning of the lake
 *           table, the tail read from the log and loaded into DuckDB, then the query over the
 *           view of both (everything a `tributary sql` query does but printing). Before each
 *           run, untimed, `--trickle` more rows (default 1% of the tail) are appended, so each
 *           run reads rows the log gained since the last one, as a dashboard refreshing over a
 *           table being written does; the session appends those to the tail it kept
 *   first   the same union read by a new SQL session (a new executor over the same DuckDB): the
 *           whole tail read and loaded, the lake's metadata read and planned, the view created
 *   lake    the same over `t$lake` (the lake rows alone: planning, no tail)
 *   duckdb  the same over `read_parquet([<the lake's data files>])` in the same DuckDB: the
 *           baseline, whose files are listed once, before timing
 *
 * and each result is checked against the others (the union counts lake + tail rows). The overhead
 * of union read is union time / duckdb time (target ≤ 1.3× with a 1% tail).
 *
 * Freshness: then, `--freshness-samples` times, one row is appended (acks=all) and the time until a
 * union read `SELECT count(*) FROM t WHERE id = <its id>` returns it is measured from the append
 * (p50/p99, target p99 < 1 s).
 *
 *   npm run bench:union [-- --lake-rows 2000000 --tail-rows 20000 --trickle 200 --runs 11 --freshness-samples 50]
 */
import { parseArgs } from 'node:util';
import { lakeFormat } from '../src/lake/formats/index.js';
import { DuckSession } from '../src/query/duckdb/session.js';
import { SqlExecutor } from '../src/query/executor.js';
import { tierOnce } from '../test/support/tiering-rounds.js';
import {
  BenchServer,
  columnChunks,
  count,
  DATABASE,
  generateWorkload,
  measure,
  type Measured,
  median,
  medianCores,
  now,
  percentile,
  printHeader,
  printTable,
  spread,
  untilQuiet,
  verdict,
  WORKLOAD_COLUMNS,
  workloadColumns,
} from './support.js';

const TARGET_OVERHEAD = 1.3;
const TARGET_FRESHNESS_P99_MS = 1000;
const CHUNK_ROWS = 32_768;
const TABLE = 'union_bench';

const { values: args } = parseArgs({
  options: {
    'lake-rows': { type: 'string', default: '2000000' },
    'tail-rows': { type: 'string' },
    trickle: { type: 'string' },
    runs: { type: 'string', default: '11' },
    'freshness-samples': { type: 'string', default: '50' },
  },
});
const lakeRows = Number(args['lake-rows']);
const tailRows = args['tail-rows'] === undefined ? Math.round(lakeRows / 100) : Number(args['tail-rows']);
const trickleRows = args.trickle === undefined ? Math.round(tailRows / 100) : Number(args.trickle);
const runs = Number(args.runs);
const freshnessSamples = Number(args['freshness-samples']);
const AGGREGATE = (from: string): string => `SELECT user_id % 100 AS g, count(*) AS n, sum(price) AS total FROM ${from} GROUP BY g ORDER BY g`;

printHeader('union read', [
  `table: the workload (${WORKLOAD_COLUMNS.map((c) => `${c.name} ${c.type}`).join(', ')}), 4 buckets, lake-enabled`,
  `lake: ${count(lakeRows)} rows tiered in one round; tail: ${count(tailRows)} rows in the log only (${((tailRows / lakeRows) * 100).toFixed(1)}%), ${count(trickleRows)} more before each union read`,
  `query: ${AGGREGATE('…')}; ${runs} run(s) of each, alternating; warm page cache`,
]);

const bench = await BenchServer.start({}, {}, ['--no-tiering']);
const format = lakeFormat('iceberg', { writerThreads: 4 });
const duck = await DuckSession.create();
try {
  await bench.createTable(TABLE, WORKLOAD_COLUMNS, { 'bucket.num': '4', 'bucket.key': 'id', 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1h' });
  const w = generateWorkload(lakeRows + tailRows + trickleRows * runs + freshnessSamples);
  const columns = workloadColumns(w);
  await append(columns, 0, lakeRows);
  const tiered = await measure(bench.pid, async () => {
    await tierOnce(bench.conn, { database: DATABASE, table: TABLE }, format, 600_000);
  });
  console.log(`tiered ${count(lakeRows)} rows in ${tiered.seconds.toFixed(1)} s`);
  await append(columns, lakeRows, lakeRows + tailRows);

  const sql = new SqlExecutor(bench.conn, duck, DATABASE);
  const files = (await sql.execute(`SELECT file_path FROM ${TABLE}$lake$files WHERE content = 'data'`)).result!.rows.map((r) => `'${String(r[0]).replaceAll("'", "''")}'`);
  console.log(`lake: ${files.length} data files`);
  const direct = AGGREGATE(`read_parquet([${files.join(', ')}])`);

  const expected = await groups(() => duck.run(direct).then((r) => r.rows));
  const time = async (what: string, query: () => Promise<unknown[][]>, rows: number): Promise<Measured> => {
    let result: Map<number, bigint> | undefined;
    const { m } = await untilQuiet(async () => ({ m: await measure(bench.pid, async () => void (result = await groups(query))) }));
    const total = [...result!.values()].reduce((a, b) => a + b, 0n);
    if (total !== BigInt(rows)) throw new Error(`${what}: counted ${total} rows, expected ${rows}`);
    if (what !== 'union') for (const [g, n] of expected) if (result!.get(g) !== n) throw new Error(`${what}: group ${g} has ${result!.get(g)} rows, not ${n}`);
    return m;
  };
  const union = (executor = sql): Promise<unknown[][]> => executor.execute(AGGREGATE(TABLE)).then((r) => r.result!.rows);
  const trickleWriter = await (await bench.table(TABLE)).newAppend().createWriter();
  let logRows = lakeRows + tailRows;
  /** Appends the next `trickleRows` rows of the workload (untimed) and returns the union's row count after them. */
  const trickle = async (): Promise<number> => {
    const appended: Promise<unknown>[] = [];
    for (let row = logRows; row < logRows + trickleRows; row++) appended.push(trickleWriter.append({ id: w.id[row], user_id: w.user_id[row], item: w.item[row], price: w.price[row], ts: w.ts[row] }));
    await trickleWriter.flush();
    await Promise.all(appended);
    logRows += trickleRows;
    return logRows;
  };
  const lakeOnly = (): Promise<unknown[][]> => sql.execute(AGGREGATE(`${TABLE}$lake`)).then((r) => r.result!.rows);
  const baseline = (): Promise<unknown[][]> => duck.run(direct).then((r) => r.rows);
  await union(); // warm-up: JIT, page cache, DuckDB's file metadata
  const measured: Record<'union' | 'first' | 'lake' | 'duckdb', Measured[]> = { union: [], first: [], lake: [], duckdb: [] };
  for (let run = 0; run < runs; run++) {
    const rows = await trickle();
    measured.union.push(await time('union', () => union(), rows));
    measured.first.push(await time('union', () => union(new SqlExecutor(bench.conn, duck, DATABASE)), rows));
    measured.lake.push(await time('lake', lakeOnly, lakeRows));
    measured.duckdb.push(await time('duckdb', baseline, lakeRows));
  }

  console.log(`\nmedian (min–max) of ${runs} run(s)\n`);
  const ms = (list: Measured[]): number[] => list.map((m) => m.seconds * 1000);
  const row = (name: string, list: Measured[]): string[] => [name, spread(ms(list), (n) => n.toFixed(0)), medianCores(list, 'client'), medianCores(list, 'server')];
  printTable(
    ['read', 'ms', 'client cores', 'server cores'],
    [
      row(`union (lake + ${count(tailRows)} tail, ${count(trickleRows)} new)`, measured.union),
      row('union, first read of a session', measured.first),
      row('t$lake (lake only)', measured.lake),
      row('DuckDB on the data files', measured.duckdb),
    ],
  );
  const overhead = measured.union.map((m, i) => m.seconds / measured.duckdb[i].seconds);
  const lakeOverhead = measured.lake.map((m, i) => m.seconds / measured.duckdb[i].seconds);
  console.log(`\nunion read overhead (union time / DuckDB time): ${spread(overhead, (n) => `${n.toFixed(2)}×`)}, ${verdict(median(overhead), TARGET_OVERHEAD, false, '×')}`);
  const firstOverhead = measured.first.map((m, i) => m.seconds / measured.duckdb[i].seconds);
  console.log(`first read of a session (its time / DuckDB time): ${spread(firstOverhead, (n) => `${n.toFixed(2)}×`)}`);
  console.log(`lake-only overhead (t$lake time / DuckDB time): ${spread(lakeOverhead, (n) => `${n.toFixed(2)}×`)}`);

  // Freshness: append one row, then union-read until it is there.
  const writer = await (await bench.table(TABLE)).newAppend().createWriter();
  const delays: number[] = [];
  for (let i = 0; i < freshnessSamples; i++) {
    const row = logRows + i;
    const start = now();
    const appended = writer.append({ id: w.id[row], user_id: w.user_id[row], item: w.item[row], price: w.price[row], ts: w.ts[row] });
    await writer.flush();
    await appended;
    while ((await sql.execute(`SELECT count(*) FROM ${TABLE} WHERE id = ${w.id[row]}`)).result!.rows[0][0] !== 1n);
    delays.push(now() - start);
  }
  await writer.close();
  await trickleWriter.close();
  const sorted = Float64Array.from(delays).sort();
  const p99 = percentile(sorted, 99);
  console.log(`\nfreshness (append → visible in a union read), ${freshnessSamples} samples: p50 ${percentile(sorted, 50).toFixed(0)} ms, p99 ${p99.toFixed(0)} ms, ${verdict(p99, TARGET_FRESHNESS_P99_MS, false, ' ms')}`);
} finally {
  duck.close();
  format.close();
  await bench.dispose();
}

/** Appends rows [from, to) of the workload through the columnar API. */
async function append(columns: ReturnType<typeof workloadColumns>, from: number, to: number): Promise<void> {
  const part = Object.fromEntries(Object.entries(columns).map(([k, v]) => [k, Array.isArray(v) ? v.slice(from, to) : v.subarray(from, to)])) as typeof columns;
  const writer = await (await bench.table(TABLE)).newAppend().createWriter();
  const m = await measure(bench.pid, async () => {
    for (const chunk of columnChunks(part, to - from, CHUNK_ROWS)) await writer.appendColumns(chunk);
    await writer.close();
  });
  console.log(`appended ${count(to - from)} rows in ${m.seconds.toFixed(1)} s`);
}

/** The groups of an aggregate's result: g → count. */
async function groups(query: () => Promise<unknown[][]>): Promise<Map<number, bigint>> {
  return new Map((await query()).map((r) => [Number(r[0]), r[1] as bigint]));
}
