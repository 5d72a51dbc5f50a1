/**
 * Loads the Tributary tables a query names into DuckDB, as `<database>.<table>`, with only the
 * columns the query may use (the projection goes to the server):
 *
 *   log table            its log up to the high watermark                         plan 'scan'
 *   primary-key table    its current state (batch scan of the committed state)     plan 'scan'
 *                        or, for a key lookup (duckdb/query-shapes.ts), only the
 *                        rows of the looked-up keys                                plan 'lookup'
 *   lake-enabled table   once it has a lake snapshot (and unless a key lookup):
 *                        a view over the lake snapshot and the log after it
 *                        (union-reader.ts)                                         plan 'union'
 *   table$changelog      the table's log with change type, offset and commit
 *                        timestamp in front (log-reader.ts), for either kind       plan 'scan'
 *   table$binlog         a primary-key table's changelog as Fluss's binlog: one row
 *                        per change with its before and after rows (binlogSql)   plan 'scan'
 *   table$lake           a view of the rows of the current (or a chosen) snapshot
 *                        of the table's lake table, deletes applied (the lake
 *                        format's SQL, union-reader.ts)                            plan 'lake'
 *   table$lake$snapshots the snapshots of that lake table                          plan 'lake'
 *   table$lake$files     the live files of a snapshot of that lake table           plan 'lake'
 *   table$buckets        where each bucket lives (leader, replicas, ISR, leader
 *                        epoch) and its high watermark and log end offset, from
 *                        the coordinator and the leaders (Admin.listBuckets)       plan 'metadata'
 *
 * Scan options (scan-options.ts: a table's OPTIONS hint or FOR SYSTEM_TIME AS OF, else the
 * session's) choose where reads start: `scan.startup.mode` other than `full` reads a table from its
 * log alone (plan 'scan'); the lake tables take a snapshot id or a time. The lake tables of a
 * lake-enabled table are read straight from the warehouse the server names, in the lake format it
 * names (GetLakeTieringStatus), so they must be reachable at the same path from here. Union and lake
 * reads skip the lake files and log partitions that the query's column filters rule out
 * (lake-pruning.ts).
 *
 * DuckDB then runs the query as written, so a lookup gives the same result as a scan.
 */
import type { BucketStatus, OffsetSpec } from '../client/admin.js';
import { tableOption } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import { type Column, type TableInfo, type TablePath, tablePathString } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import type { Row } from '../common/values.js';
import type { Connection } from '../client/connection.js';
import type { Table } from '../client/table.js';
import { lakeFormat } from '../lake/formats/index.js';
import type { LakeStorage, LakeTable } from '../lake/lake-format.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { columnFiltersOf, keyLookupOf } from './duckdb/query-shapes.js';
import { referencesOf, type TableReference } from './duckdb/references.js';
import { type DuckSession, relationSql } from './duckdb/session.js';
import type { SyntaxTree } from './duckdb/syntax-tree.js';
import { duckTypeName } from './duckdb/type-name.js';
import { bucketRanges, CHANGELOG_COLUMNS, type LogRange, logRangesOf, readChangelogUpToHighWatermark, readLogUpToHighWatermark } from './log-reader.js';
import { type ScanOptions, scanOptionsOf, type ScanTarget, type TableHint } from './scan-options.js';
import { lookupState, readState } from './state-reader.js';
import { ReadCache } from './read-cache.js';
import { lakeColumns, loadLakeFiles, loadLakeRows, loadLogFrom, loadUnionRead, startCatchUp, type TableRead } from './union-reader.js';

/** How a statement read its table: whole (log or state), by key lookups, from table stats, from the lake, or both (union read), or from cluster metadata. */
export type ReadPlan = 'scan' | 'lookup' | 'stats' | 'lake' | 'union' | 'metadata';

/** The most keys a query may look up; more are read by a scan. */
const MAX_LOOKUP_KEYS = 1024;

/** The read-only views of a table, named `<table><suffix>`, and what each shows. */
export type SystemTable = '$changelog' | '$binlog' | '$lake' | '$lake$snapshots' | '$lake$files' | '$buckets';
const SYSTEM_TABLES: Record<SystemTable, string> = {
  $changelog: 'the changelog of a table',
  $binlog: 'the changes of a primary-key table with their before and after rows',
  $lake$snapshots: 'the lake snapshots of a table',
  $lake$files: 'the lake files of a table',
  $lake: 'the lake rows of a table',
  $buckets: 'where the buckets of a table live',
};
/** Which scan options each system table takes (scan-options.ts). */
const SCAN_TARGETS: Record<SystemTable, ScanTarget> = { $changelog: 'table', $binlog: 'table', $lake$snapshots: 'none', $lake$files: 'lake', $lake: 'lake', $buckets: 'none' };

/**
 * What loading a query's tables did: how it read the last one (ReadPlan), and for each table a
 * few lines saying how, as EXPLAIN shows them before DuckDB's plan: the relation and its read
 * (key lookup, KV scan, log scan, union read, ...), the columns read, and where it applies the log
 * ranges per bucket [from, to) and the lake snapshot with its data files read and pruned.
 */
export interface LoadedTables {
  plan?: ReadPlan;
  reads: string[];
}

/** The lines of one table's read in LoadedTables.reads. */
function describeRead(name: string, how: string, columns: readonly string[] | undefined, details: string[] = []): string {
  return [`${name}: ${how}${columns ? `, columns (${columns.join(', ')})` : ''}`, ...details.map((d) => `  ${d}`)].join('\n');
}

const rangeLines = (ranges: readonly LogRange[]): string[] => ranges.map((r) => `bucket ${r.bucket}: log offsets [${r.from}, ${r.to})`);

/** The scan options of a query (scan-options.ts): its tables' hints and the session's options. */
export interface QueryScan {
  hints?: readonly TableHint[];
  session?: ReadonlyMap<string, string>;
}

export const quoteIdentifier = (name: string): string => `"${name.replaceAll('"', '""')}"`;

export class TableLoader {
  /** The lake of each lake-enabled table read so far, by table id: the server's warehouse and format do not move. */
  private readonly lakes = new Map<number, LakeStorage>();
  private readonly cache: ReadCache;

  constructor(
    private readonly conn: Connection,
    private readonly duck: DuckSession,
  ) {
    this.cache = new ReadCache(duck);
  }

  /** The table a query's reference names, in the current `database` unless qualified. */
  static pathOf(ref: TableReference, database: string): TablePath {
    return { database: ref.schema ?? database, table: ref.table };
  }

  /** The system table a reference names (`t$changelog`, `t$binlog`, `t$lake`, ...), with the table it belongs to. */
  static systemTableOf(ref: TableReference): { system: SystemTable; table: string; shows: string } | undefined {
    const lower = ref.table.toLowerCase();
    for (const [system, shows] of Object.entries(SYSTEM_TABLES) as [SystemTable, string][]) {
      if (lower.endsWith(system)) return { system, table: ref.table.slice(0, -system.length), shows };
    }
    return undefined;
  }

  /**
   * Whether `SELECT count(*) FROM t` may be answered from the table stats: not when the session
   * reads from elsewhere than `full`, nor for a lake-enabled log table, whose union read also
   * counts the rows that retention has dropped from the log.
   */
  static countsFromStats(info: TableInfo, session: ReadonlyMap<string, string>): boolean {
    if (scanOptionsOf(session, undefined, 'table', tablePathString(info.path)).mode !== 'full') return false;
    return info.schema.primaryKey !== undefined || tableOption(info.properties, 'table.datalake.enabled') !== 'true';
  }

  /** Loads every table the query reads, and says how (LoadedTables; no plan when it reads none). */
  async load(tree: SyntaxTree, database: string, scan: QueryScan = {}): Promise<LoadedTables> {
    const refs = referencesOf(tree.json);
    const loaded = new Set<string>();
    const hinted = new Set<TableHint>();
    let plan: ReadPlan | undefined;
    const reads: string[] = [];
    for (const ref of refs.tables) {
      const path = TableLoader.pathOf(ref, database);
      const name = `${path.database}.${path.table}`;
      if (loaded.has(name)) continue;
      loaded.add(name);
      const hint = hintOf(scan.hints ?? [], name, database, hinted);
      const system = TableLoader.systemTableOf(ref);
      const options = scanOptionsOf(scan.session ?? new Map(), hint, system ? SCAN_TARGETS[system.system] : 'table', tablePathString(path));
      // A relation union-read before has its tail caught up while the table's metadata is asked for.
      const last = system || startOf(options) !== undefined ? undefined : this.cache.lastUnionRead(name);
      const speculated = last && startCatchUp({ conn: this.conn, duck: this.duck, table: last, name, columns: columnsToRead(last.info, refs.columns), filters: [], cache: this.cache });
      const table = await this.conn.getTable({ ...path, table: system?.table ?? path.table });
      if (system?.system === '$buckets') {
        await this.duck.createTableAs(name, `AS ${bucketsSql(await this.conn.getAdmin().listBuckets(table.info.path))}`);
        reads.push(describeRead(name, `cluster metadata (${system.shows}), from the coordinator and the buckets' leaders`, undefined));
        plan = 'metadata';
        continue;
      }
      if (system?.system.startsWith('$lake')) {
        const lake = await this.lakeOf(table.info, system!.system);
        if (system!.system === '$lake') {
          const filters = columnFiltersOf(tree.json, lakeColumns(table.info));
          await loadLakeRows(this.cache, this.duck, lake, table.info, name, refs.columns, filters, options);
        } else if (system!.system === '$lake$files') await loadLakeFiles(this.cache, this.duck, lake, table.info, name, options);
        else await this.duck.createTableAs(name, `AS ${(await this.cache.lakeTable(lake, table.info)).snapshotsSql()}`);
        reads.push(describeRead(name, `lake read (${system!.shows}), from the lake's files`, undefined));
        plan = 'lake';
        continue;
      }
      const columns = columnsToRead(table.info, refs.columns);
      const read: TableRead = { conn: this.conn, duck: this.duck, table, name, columns, filters: columnFiltersOf(tree.json, table.info.schema.columns), cache: this.cache, ...(speculated ? { speculated } : {}) };
      if (system?.system === '$changelog' || system?.system === '$binlog') {
        const clash = table.info.schema.columns.find((c) => CHANGELOG_COLUMNS.includes(c.name.toLowerCase()));
        if (clash) throw new TributaryError('SQL_UNSUPPORTED', `'${tablePathString(table.info.path)}' has a column named '${clash.name}', which ${system.system} uses for its metadata`);
        const binlog = system.system === '$binlog';
        const primaryKey = table.info.schema.primaryKey;
        if (binlog && !primaryKey) {
          throw new TributaryError('SQL_UNSUPPORTED', `'${ref.table}' needs a primary-key table: '${tablePathString(table.info.path)}' is a log table, whose rows are only inserted (read '${system.table}$changelog')`);
        }
        // The binlog's before and after rows hold every column.
        const read = binlog ? table.info.schema.columns.map((c) => c.name) : columns;
        const from = startOf(options);
        const ranges = await bucketRanges(this.conn, table, from === undefined ? {} : { from });
        const { schema, batches } = await readChangelogUpToHighWatermark(this.conn, table, read, ranges);
        await this.duck.loadArrowTable(binlog ? `${BINLOG_SCHEMA}.${name}` : name, schema, batches);
        if (binlog) await this.duck.createView(name, binlogSql(`${BINLOG_SCHEMA}.${name}`, read, primaryKey!));
        reads.push(describeRead(name, `${binlog ? 'binlog' : 'changelog'} scan (log scan with change types)`, read, rangeLines(logRangesOf(ranges))));
        plan = 'scan';
        continue;
      }
      const from = startOf(options);
      if (from !== undefined) {
        await loadLogFrom(read, from);
        reads.push(describeRead(name, `log scan from ${typeof from === 'object' ? `timestamp ${from.timestamp}` : from} (scan.startup.mode ${options.mode})${table.info.schema.primaryKey ? ', changes folded by key' : ''}`, columns));
        plan = 'scan';
        continue;
      }
      const keys = table.info.schema.primaryKey && refs.tables.length === 1 ? await this.lookupKeys(tree, table) : undefined;
      const union = !keys && tableOption(table.info.properties, 'table.datalake.enabled') === 'true' ? await loadUnionRead(read, await this.lakeOf(table.info, 'union read')) : undefined;
      if (union) {
        const lake = `lake snapshot ${union.snapshotId}: ${union.filesRead} data file(s) read, ${union.filesPruned} pruned by the query's filters`;
        reads.push(describeRead(name, 'union read (lake snapshot, then the log after it)', columns, [lake, ...rangeLines(union.log)]));
        plan = 'union';
        continue;
      }
      if (!table.info.schema.primaryKey) {
        const projected = columns.map((c) => table.info.schema.columns.findIndex((x) => x.name === c));
        const ranges = await bucketRanges(this.conn, table);
        await this.duck.loadArrowTable(name, toArrowSchema(table.info.schema, projected), await readLogUpToHighWatermark(this.conn, table, columns, ranges));
        reads.push(describeRead(name, 'log scan', columns, rangeLines(logRangesOf(ranges))));
        plan = 'scan';
      } else {
        const { schema, batches } = keys ? await lookupState(table, keys, columns) : await readState(table, columns);
        await this.duck.loadArrowTable(name, schema, batches);
        reads.push(describeRead(name, keys ? `key lookup of ${keys.length} key(s)` : 'KV scan (the committed state of every bucket)', columns));
        plan = keys ? 'lookup' : 'scan';
      }
    }
    const unused = (scan.hints ?? []).find((h) => !hinted.has(h));
    if (unused) {
      throw new TributaryError('SQL_PARSE_ERROR', `${unused.at}: '${unused.table}' is not a table this query reads: a hint or FOR SYSTEM_TIME AS OF must follow the name of a table`);
    }
    // The current database is DuckDB's default schema, so unqualified names resolve as in Tributary.
    await this.duck.useSchema(database);
    return { ...(plan ? { plan } : {}), reads };
  }

  /** Lets go of what the loaded tables hold outside DuckDB: the lake files pinned for their reads. */
  close(): Promise<void> {
    return this.cache.close();
  }

  /** The current lake table of a lake-enabled table. */
  async lakeTable(info: TableInfo): Promise<LakeTable> {
    return this.cache.lakeTable(await this.lakeOf(info, 'lake table'), info);
  }

  /** The lake that a lake-enabled table is tiered into; `use` says what for. */
  private async lakeOf(info: TableInfo, use: string): Promise<LakeStorage> {
    if (tableOption(info.properties, 'table.datalake.enabled') !== 'true') {
      throw new TributaryError('INVALID_TABLE_EXCEPTION', `'${tablePathString(info.path)}' is not lake-enabled ('table.datalake.enabled'), so it has no ${use}`);
    }
    let lake = this.lakes.get(info.tableId);
    if (!lake) {
      const status = await this.conn.getAdmin().getLakeTieringStatus(info.path);
      // Read only: a format holds nothing until one of its writers runs.
      lake = lakeFormat(status.lakeFormat).open(status.warehouse);
      this.lakes.set(info.tableId, lake);
    }
    return lake;
  }

  /**
   * The primary keys a key-lookup query reads (see query-shapes.ts), cast by DuckDB to the key
   * columns' types as its comparison would; undefined when the query is not a key lookup.
   */
  private async lookupKeys(tree: SyntaxTree, table: Table): Promise<Row[] | undefined> {
    const schema = table.info.schema;
    const keyColumns = (schema.primaryKey ?? []).map((k) => schema.columns.find((c) => c.name === k)!);
    const literals = keyLookupOf(tree.json, keyColumns, MAX_LOOKUP_KEYS);
    if (!literals) return undefined;
    if (literals.length === 0) return [];
    const values = literals.map((key) => `(${key.map((sql, i) => `TRY_CAST(${sql} AS ${duckTypeName(keyColumns[i].type)})`).join(', ')})`);
    const cast = await this.duck.run(`SELECT DISTINCT * FROM (VALUES ${values.join(', ')})`);
    // A literal that does not convert to the column's type equals no stored key.
    return cast.rows.filter((r) => r.every((v) => v !== null)).map((r) => Object.fromEntries(keyColumns.map((c, i) => [c.name, r[i]])));
  }
}

/** The columns of `$buckets` and their DuckDB types. */
const BUCKET_COLUMNS: readonly [string, string][] = [
  ['partition', 'VARCHAR'],
  ['bucket', 'INTEGER'],
  ['leader', 'INTEGER'],
  ['replicas', 'INTEGER[]'],
  ['isr', 'INTEGER[]'],
  ['leader_epoch', 'INTEGER'],
  ['high_watermark', 'BIGINT'],
  ['log_end_offset', 'BIGINT'],
];

/** The rows of `$buckets` as a DuckDB query; `leader` is NULL while a bucket has none. */
function bucketsSql(buckets: readonly BucketStatus[]): string {
  const literal = (v: string | number | bigint | null | number[]): string => {
    if (v === null) return 'NULL';
    if (Array.isArray(v)) return `[${v.join(', ')}]`;
    return typeof v === 'string' ? `'${v.replaceAll("'", "''")}'` : String(v);
  };
  const rows = buckets.map((b) => [b.partition ?? null, b.bucket, b.leader >= 0 ? b.leader : null, b.replicas, b.isr, b.leaderEpoch, b.highWatermark, b.logEndOffset]);
  const values = (rows.length > 0 ? rows : [BUCKET_COLUMNS.map(() => null)]).map((r) => `(${r.map(literal).join(', ')})`).join(', ');
  const select = BUCKET_COLUMNS.map(([c, type], i) => `CAST(c${i} AS ${type}) AS ${quoteIdentifier(c)}`).join(', ');
  return `SELECT ${select} FROM (VALUES ${values}) AS v(${BUCKET_COLUMNS.map((_, i) => `c${i}`).join(', ')})${rows.length > 0 ? '' : ' WHERE false'}`;
}

/** The DuckDB schema of the changelogs that `$binlog` views read. */
const BINLOG_SCHEMA = '__binlog';

/**
 * The `$binlog` of a primary-key table (Fluss's shape) over its changelog loaded as `changes`:
 * one row per change, `insert`, `update` or `delete`, with the row before it and the row after it
 * as structs. An update's -U and +U are a key's consecutive records in its bucket's log, so the
 * -U is the +U's previous change of the same key; without one (table.changelog.image WAL) an
 * update has no before row.
 */
function binlogSql(changes: string, columns: readonly string[], primaryKey: readonly string[]): string {
  const [type, offset, timestamp] = CHANGELOG_COLUMNS.map(quoteIdentifier);
  const row = `struct_pack(${columns.map((c) => `${quoteIdentifier(c)} := ${quoteIdentifier(c)}`).join(', ')})`;
  return (
    `SELECT CASE ${type} WHEN 'update_after' THEN 'update' ELSE ${type} END AS ${type}, ${offset}, ${timestamp},\n` +
    `  CASE WHEN ${type} = 'delete' THEN "row" WHEN ${type} = 'update_after' AND previous_type = 'update_before' THEN previous END AS "before",\n` +
    `  CASE WHEN ${type} <> 'delete' THEN "row" END AS "after"\n` +
    `FROM (SELECT ${type}, ${offset}, ${timestamp}, ${row} AS "row", lag(${type}) OVER w AS previous_type, lag(${row}) OVER w AS previous\n` +
    `  FROM ${relationSql(changes)} WINDOW w AS (PARTITION BY ${primaryKey.map(quoteIdentifier).join(', ')} ORDER BY ${offset}))\n` +
    `WHERE ${type} <> 'update_before'`
  );
}

/** Where a read starts by its startup mode: undefined for `full` (the whole table). */
function startOf(options: ScanOptions): OffsetSpec | undefined {
  switch (options.mode) {
    case 'full':
      return undefined;
    case 'timestamp':
      return { timestamp: options.timestampMs! };
    default:
      return options.mode;
  }
}

/**
 * The hint (scan-options.ts) of the table loaded as `name`, marked used; the same table may carry
 * the same hint more than once, not different ones.
 */
function hintOf(hints: readonly TableHint[], name: string, database: string, used: Set<TableHint>): TableHint | undefined {
  const mine = hints.filter((h) => `${h.database ?? database}.${h.table}` === name);
  for (const h of mine) {
    used.add(h);
    if (JSON.stringify([h.options, h.asOf]) !== JSON.stringify([mine[0].options, mine[0].asOf])) {
      throw new TributaryError('SQL_UNSUPPORTED', `${h.at}: '${h.table}' is read with different options in one query`);
    }
  }
  return mine[0];
}

/** The columns a query may read; at least one, so that row counts survive. */
function columnsToRead(info: TableInfo, used: Set<string> | '*'): string[] {
  const all = info.schema.columns.map((c) => c.name);
  if (used === '*') return all;
  const lower = new Set([...used].map((c) => c.toLowerCase()));
  const chosen = all.filter((c) => lower.has(c.toLowerCase()));
  return chosen.length > 0 ? chosen : [narrowest(info.schema.columns)];
}

/** The column cheapest to read, for queries that use none (e.g. COUNT(*)). */
function narrowest(columns: Column[]): string {
  const width = (t: DataType): number => (['BOOLEAN', 'TINYINT'].includes(t.kind) ? 1 : t.kind === 'SMALLINT' ? 2 : ['INT', 'FLOAT', 'DATE'].includes(t.kind) ? 4 : ['STRING', 'BYTES', 'CHAR', 'BINARY'].includes(t.kind) ? 16 : 8);
  return [...columns].sort((a, b) => width(a.type) - width(b.type))[0].name;
}
