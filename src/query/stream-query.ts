/**
 * Streaming queries: `SELECT … FROM t [WHERE …] EMIT CHANGES`, or any query of `tributary sql
 * --stream`. They print the query's result over the table's current data, then, as changes
 * arrive, the query's result over the new rows, until stopped.
 *
 *   shape     one SELECT over one table, written SELECT first: no join, subquery, CTE, set
 *             operation, aggregate, window function, GROUP BY, HAVING, QUALIFY, DISTINCT,
 *             ORDER BY or LIMIT (SQL_UNSUPPORTED). Each row's result then depends on that row
 *             alone, so the query gives the same rows over any batch of rows: it runs per batch.
 *   start     `scan.startup.mode` (table hint or SET): `full` (default) prints the result over the
 *             current data first; `earliest`, `latest` and `timestamp` print changes only, from
 *             there (`earliest` on a lake-enabled table reads the lake first).
 *   snapshot  the latest offset of every bucket is taken first. Log table: the rows below those
 *             offsets, read with a LogScanner from `earliest` (a lake-enabled table's lake, then
 *             its log: the rows a batch query reads), are loaded into DuckDB as the table and the
 *             query runs over them. Primary-key table: the batch query over the current state;
 *             changes committed while it ran come again among the changes (upserts and deletes of
 *             the same rows, so applying them twice changes nothing).
 *   changes   a LogScanner from those offsets (TableFollower: partitions created later are read
 *             from their start); the batches of each poll are loaded into DuckDB as the table and
 *             the query runs over them. A primary-key table's changes start with column `op`
 *             (+I, -U, +U, -D): the query runs as `SELECT "$op" AS op, <its select list> …` over
 *             the batches with a column `$op` that no table column can be named; a `*` picks it up
 *             too, and those copies are left out of the result.
 *   schema    a query that reads `*` follows the table's schema: once rows written after an ALTER
 *             TABLE … ADD COLUMN arrive, its results have the new columns (null in the rows
 *             written before them). A query that names its columns reads those alone.
 */
import * as arrow from 'apache-arrow';
import { changeTypeOf } from '../common/change-type.js';
import { TributaryError } from '../common/errors.js';
import { type TableInfo, tablePathString } from '../common/schema.js';
import type { Connection } from '../client/connection.js';
import type { BucketRef, LogScanner } from '../client/log-scanner.js';
import type { ScanBatch } from '../client/scan-batch.js';
import { type FollowFrom, TableFollower } from '../client/table-follower.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { inReaderSchema } from '../record/batch-evolution.js';
import { referencesOf } from './duckdb/references.js';
import type { QueryResult } from './duckdb/result.js';
import type { DuckSession } from './duckdb/session.js';
import { isObject, type Json, type SyntaxTree } from './duckdb/syntax-tree.js';
import { extractTableHints, scanOptionsOf } from './scan-options.js';
import { Lexer } from './sql/lexer.js';
import { quoteIdentifier as quote, TableLoader } from './table-loader.js';

/** The hidden change type column of a primary-key table's changes (not a valid column name). */
const OP_COLUMN = '$op';
const POLL_MS = 500;

export interface StreamContext {
  conn: Connection;
  duck: DuckSession;
  /** The session's current database. */
  database: string;
  /** The session's options (SET). */
  session: ReadonlyMap<string, string>;
  /** Runs a batch query: a primary-key table's snapshot. */
  batchQuery: (sql: string) => Promise<QueryResult>;
}

export interface StreamingResult {
  /** The result over the current data; absent when the query starts elsewhere than `full`. */
  result?: QueryResult;
  /** Results over the changes, as they arrive; ends only when stopped with `return()`. */
  changes: AsyncIterable<QueryResult>;
}

/** Starts a streaming query (see the header): its snapshot result, and its changes to follow. */
export async function streamQuery(ctx: StreamContext, sql: string): Promise<StreamingResult> {
  const { duck, conn } = ctx;
  const { sql: text, hints } = extractTableHints(sql);
  const tree = await duck.syntaxTree(text);
  const aggregates = new Set((await duck.run("SELECT DISTINCT lower(function_name) FROM duckdb_functions() WHERE function_type = 'aggregate'")).rows.map((r) => String(r[0])));
  checkShape(tree, aggregates);
  const refs = referencesOf(tree.json);
  const ref = refs.tables[0];
  if (TableLoader.systemTableOf(ref)) unsupported(`'${ref.table}' is a system table: a streaming query reads a table's rows`);
  const path = TableLoader.pathOf(ref, ctx.database);
  const name = `${path.database}.${path.table}`;
  const unused = hints.find((h) => `${h.database ?? ctx.database}.${h.table}` !== name);
  if (unused) throw new TributaryError('SQL_PARSE_ERROR', `${unused.at}: '${unused.table}' is not a table this query reads: a hint must follow the name of a table`);
  const options = scanOptionsOf(ctx.session, hints[0], 'table', tablePathString(path));
  const table = await conn.getTable(path);
  const info = table.info;
  const columns = columnsRead(info, refs.columns);
  const keyed = info.schema.primaryKey !== undefined;
  const changesSql = keyed ? withOpColumn(text) : text;
  const load = new BatchLoader(ctx, name, toArrowSchema(info.schema, columns.map((c) => info.schema.columns.findIndex((x) => x.name === c))));
  // Without a projection the scanner takes on the columns added later (see the header).
  const scanner = (): LogScanner => (refs.columns === '*' ? table.newScan() : table.newScan().project(columns)).createLogScanner();

  let result: QueryResult | undefined;
  let from: FollowFrom;
  if (options.mode === 'full') {
    const ends = await latestOffsets(conn, info);
    if (keyed) {
      result = await ctx.batchQuery(sql);
    } else {
      await load.batches(await readUpTo(scanner(), ends), false);
      result = await duck.run(text);
    }
    from = (bucket, partition) => ends.get(bucketLabel(partition, bucket))?.end ?? 0n;
  } else {
    from = options.mode === 'timestamp' ? { timestamp: options.timestampMs! } : options.mode;
  }

  const follower = new TableFollower(conn, info, scanner(), from);
  let started: Promise<void> | undefined;
  let closed = false;
  // Not a generator: return() must stop a next() that is waiting for rows, not queue behind it.
  const changes: AsyncIterableIterator<QueryResult> = {
    async next() {
      await (started ??= follower.start());
      while (!closed) {
        const batches = await follower.pollBatches(POLL_MS);
        if (closed || batches.length === 0) continue;
        await load.batches(batches, keyed);
        const out = await duck.run(changesSql);
        const rows = keyed ? withoutHiddenColumns(out) : out;
        if (rows.rows.length > 0) return { value: rows, done: false };
      }
      return { value: undefined, done: true };
    },
    async return() {
      closed = true;
      follower.close(); // a poll under way returns within its timeout
      return { value: undefined, done: true };
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
  return { ...(result ? { result } : {}), changes };
}

function unsupported(what: string): never {
  throw new TributaryError('SQL_UNSUPPORTED', `a streaming query (EMIT CHANGES) ${what}`);
}

/** Refuses what does not run row by row (see the header). */
function checkShape(tree: SyntaxTree, aggregates: ReadonlySet<string>): void {
  const needsRows = (what: string): never => unsupported(`runs on each new row alone, so it cannot use ${what}: run it as a batch query, without EMIT CHANGES`);
  if (tree.explain) unsupported('cannot be explained');
  const statements = isObject(tree.json) && Array.isArray(tree.json.statements) ? (tree.json.statements as Json[]) : [];
  const node = isObject(statements[0]?.node) ? (statements[0].node as Json) : {};
  if (node.type !== 'SELECT_NODE') unsupported('is one SELECT: UNION, INTERSECT, EXCEPT and VALUES are not supported');
  if (isObject(node.cte_map) && Array.isArray(node.cte_map.map) && node.cte_map.map.length > 0) unsupported('cannot use WITH');
  for (const m of Array.isArray(node.modifiers) ? (node.modifiers as Json[]) : []) {
    const kind = String(m.type);
    needsRows(kind.startsWith('ORDER') ? 'ORDER BY' : kind.startsWith('DISTINCT') ? 'DISTINCT' : 'LIMIT');
  }
  if (!isObject(node.from_table) || node.from_table.type !== 'BASE_TABLE') unsupported('reads one table: joins, subqueries and table functions are not supported');
  if ((Array.isArray(node.group_expressions) && node.group_expressions.length > 0) || (Array.isArray(node.group_sets) && node.group_sets.length > 0)) needsRows('GROUP BY');
  if (node.having) needsRows('HAVING');
  if (node.qualify) needsRows('QUALIFY');
  if (node.sample) unsupported('cannot sample');
  const visit = (x: unknown): void => {
    if (Array.isArray(x)) return x.forEach(visit);
    if (!isObject(x)) return;
    if (x.class === 'WINDOW') needsRows('window functions');
    if (x.class === 'SUBQUERY') unsupported('cannot use subqueries');
    if (x.class === 'FUNCTION' && aggregates.has(String(x.function_name).toLowerCase())) needsRows(`the aggregate ${String(x.function_name)}()`);
    Object.values(x).forEach(visit);
  };
  visit(node.select_list);
  visit(node.where_clause);
}

/** The table's columns the query names (all for `*`); at least one, so that rows are counted. */
function columnsRead(info: TableInfo, used: Set<string> | '*'): string[] {
  const all = info.schema.columns.map((c) => c.name);
  if (used === '*') return all;
  const lower = new Set([...used].map((c) => c.toLowerCase()));
  const chosen = all.filter((c) => lower.has(c.toLowerCase()));
  return chosen.length > 0 ? chosen : [all[0]];
}

/** The query with the change type column in front of its select list. */
function withOpColumn(sql: string): string {
  const lexer = new Lexer(sql);
  const select = lexer.next();
  if (select.upper !== 'SELECT') unsupported('is written SELECT … FROM …');
  const after = lexer.peek().upper === 'ALL' ? lexer.next() : select;
  return `${sql.slice(0, after.end)} ${quote(OP_COLUMN)} AS op,${sql.slice(after.end)}`;
}

/** A result without the copies of the hidden change type column that a `*` expanded to. */
function withoutHiddenColumns(result: QueryResult): QueryResult {
  const keep = result.columns.map((c, i) => (c.name === OP_COLUMN ? -1 : i)).filter((i) => i >= 0);
  if (keep.length === result.columns.length) return result;
  return { columns: keep.map((i) => result.columns[i]), rows: result.rows.map((r) => keep.map((i) => r[i])) };
}

const bucketLabel = (partition: string | undefined, bucket: number): string => (partition === undefined ? String(bucket) : `${partition}/${bucket}`);

/** The high watermark of every bucket of every partition now, by bucket label (as LogScanner.positions() names buckets). */
async function latestOffsets(conn: Connection, info: TableInfo): Promise<Map<string, { ref: BucketRef; end: bigint }>> {
  const admin = conn.getAdmin();
  const buckets = Array.from({ length: info.bucketCount }, (_, b) => b);
  const partitions = info.partitionKeys.length > 0 ? (await admin.listPartitionInfos(info.path)).map((p) => p.partitionName) : [undefined];
  const ends = new Map<string, { ref: BucketRef; end: bigint }>();
  for (const partition of partitions) {
    for (const [bucket, end] of await admin.listOffsets(info.path, buckets, 'latest', partition)) {
      ends.set(bucketLabel(partition, bucket), { ref: partition === undefined ? bucket : { partition, bucket }, end });
    }
  }
  return ends;
}

/** The rows of the buckets from `earliest` (lake, then log) up to their ends. */
async function readUpTo(scanner: LogScanner, ends: ReadonlyMap<string, { ref: BucketRef; end: bigint }>): Promise<ScanBatch[]> {
  const out: ScanBatch[] = [];
  try {
    const open = new Set<string>();
    for (const [label, { ref, end }] of ends) {
      if (end === 0n) continue;
      await scanner.subscribe(ref, 'earliest');
      open.add(label);
    }
    while (open.size > 0) {
      for (const b of await scanner.pollBatches(POLL_MS)) {
        const end = ends.get(bucketLabel(b.partition, b.bucket))!.end;
        if (b.baseOffset >= end) continue;
        const keep = Number(end - b.baseOffset);
        out.push(keep < b.batch.numRows ? { ...b, batch: b.batch.slice(0, keep), ...(b.changeTypes ? { changeTypes: b.changeTypes.subarray(0, keep) } : {}) } : b);
      }
      for (const [label, position] of scanner.positions()) {
        if (position >= ends.get(label)!.end) open.delete(label);
      }
    }
  } finally {
    scanner.close();
  }
  return out;
}

/**
 * Loads batches into DuckDB as the table the query names, in the schema of the newest of them (the
 * scanner's, which grows with ADD COLUMN when the query reads `*`).
 */
class BatchLoader {
  private withOp!: arrow.Schema;

  constructor(
    private readonly ctx: StreamContext,
    private readonly name: string,
    private schema: arrow.Schema,
  ) {
    this.use(schema);
  }

  /** Replaces the table's rows by `batches`; with `op`, adds the change type column. */
  async batches(batches: readonly ScanBatch[], op: boolean): Promise<void> {
    const { duck, database } = this.ctx;
    const last = batches.at(-1)?.batch.schema;
    if (last && last !== this.schema) this.use(last);
    const inSchema = batches.map((b) => ({ ...b, batch: inReaderSchema(b.batch, this.schema) }));
    if (op) await duck.loadArrowTable(this.name, this.withOp, inSchema.map((b) => this.withChangeTypes(b)));
    else await duck.loadArrowTable(this.name, this.schema, inSchema.map((b) => b.batch));
    // The current database is DuckDB's default schema, so unqualified names resolve as in Tributary.
    await duck.useSchema(database);
  }

  private use(schema: arrow.Schema): void {
    this.schema = schema;
    this.withOp = new arrow.Schema([...schema.fields, new arrow.Field(OP_COLUMN, new arrow.Utf8(), false)]);
  }

  private withChangeTypes(b: ScanBatch): arrow.RecordBatch {
    const n = b.batch.numRows;
    // Every change type's name is two characters.
    const valueOffsets = new Int32Array(n + 1);
    const names = new Uint8Array(2 * n);
    for (let i = 0; i < n; i++) {
      const name = changeTypeOf(b.changeTypes ? b.changeTypes[i] : 0)!;
      names[2 * i] = name.charCodeAt(0);
      names[2 * i + 1] = name.charCodeAt(1);
      valueOffsets[i + 1] = 2 * (i + 1);
    }
    const op = arrow.makeData({ type: new arrow.Utf8(), length: n, nullCount: 0, valueOffsets, data: names });
    return new arrow.RecordBatch(this.withOp, arrow.makeData({ type: new arrow.Struct(this.withOp.fields), length: n, nullCount: 0, children: [...b.batch.data.children, op] }));
  }
}
