/**
 * Executes statements of Tributary's SQL dialect for one session (the shell, `tributary sql -e`).
 *
 * DDL becomes Admin calls. Queries run in embedded DuckDB over the tables they name, loaded by
 * TableLoader (logs, primary-key state, key lookups, union reads of lake-enabled tables,
 * `$changelog`, the lake's `$lake`, `$lake$snapshots` and `$lake$files`); `SELECT count(*) FROM t`
 * alone is answered from the table stats where they count what a read would. SET and RESET keep
 * the session's scan options (scan-options.ts), which queries and the query part of INSERT use.
 * SHOW LAKE STATUS shows the tiering status the coordinator reports, SHOW CONSUMER GROUPS the Kafka
 * consumer groups and their lag, SHOW TABLET SERVERS the
 * cluster's tablet servers and their tags, CALL sys.<procedure> runs cluster administration
 * (procedures.ts: server tags, rebalance) (and `t$buckets`, TableLoader, where each bucket of a table lives). Streaming queries (EMIT
 * CHANGES) return their first result and the results over the changes to come (stream-query.ts).
 * Writes:
 *
 *   INSERT   runs its VALUES/SELECT part in DuckDB, casts the rows to the column types there, and
 *            appends them (log table) or upserts them (primary-key table; with a column list that
 *            leaves columns out, a partial update of the listed ones)
 *   UPDATE   primary-key tables: selects the primary key and the new values of the rows matching
 *            the condition (DuckDB over the state or the looked-up rows), then upserts them as a
 *            partial update of the key and the SET columns
 *   DELETE   primary-key tables: selects the primary keys matching the condition, then deletes them
 *
 * UPDATE and DELETE read the rows they change into memory first, so one statement may change at
 * most MAX_CHANGED_ROWS rows. Like INSERT they are not atomic.
 */
import { TributaryError } from '../common/errors.js';
import { validatePartialUpdate, primaryKeyTableOptions } from '../common/pk-table.js';
import { type Column, DEFAULT_DATABASE, type TableInfo, type TablePath, tablePathString } from '../common/schema.js';
import { formatDataType } from '../common/types.js';
import { atRow, notA, type Row, RowReader, shownValue } from '../common/values.js';
import type { ConsumerGroupInfo, LakeTable, LakeTieringStatus, TabletServerInfo } from '../client/admin.js';
import type { Connection } from '../client/connection.js';
import type { Table } from '../client/table.js';
import { countStarOf } from './duckdb/query-shapes.js';
import type { QueryResult, RowStream } from './duckdb/result.js';
import { callProcedure } from './procedures.js';
import type { DuckSession } from './duckdb/session.js';
import { duckTypeName } from './duckdb/type-name.js';
import type { Statement, TableName } from './sql/ast.js';
import { type SourcePosition, splitStatements } from './sql/lexer.js';
import { checkScanOption, extractTableHints } from './scan-options.js';
import { type ProgressListener, rowCounter, withProgress } from './progress.js';
import { parseStatement } from './sql/parser.js';
import { streamQuery } from './stream-query.js';
import { quoteIdentifier as quote, type ReadPlan, TableLoader } from './table-loader.js';
import { tableStorage } from './table-storage.js';

export type { ReadPlan } from './table-loader.js';

export interface ExecutionResult {
  /** Rows for statements that return data (queries, SHOW, DESCRIBE). */
  result?: QueryResult;
  /** A query's rows as DuckDB produces them, instead of `result`, when execute was asked for that (`streamRows`). */
  rows?: RowStream;
  /** What a statement without rows did, e.g. "Table 'db.t' created." */
  message?: string;
  /**
   * How a query, UPDATE or DELETE read its tables: 'scan' (whole logs or states), 'lookup' (only
   * the rows of the primary keys its condition names), 'stats' (COUNT(*) from the table stats),
   * 'lake' (lake files: `$lake`, `$lake$snapshots`, `$lake$files`), 'union' (a lake-enabled
   * table's lake snapshot and the log after it), 'metadata' (cluster metadata: `$buckets`). With
   * several tables, how it read the last one.
   * Absent when it read no table.
   */
  plan?: ReadPlan;
  /**
   * A streaming query's results over the changes after `result`, as they arrive (stream-query.ts);
   * it never ends by itself: stop it with `return()`.
   */
  changes?: AsyncIterable<QueryResult>;
}

/** The most rows one UPDATE or DELETE may change: it holds them in memory before writing. */
export const MAX_CHANGED_ROWS = 100_000;

const rows = (columns: string[], data: unknown[][]): QueryResult => ({
  columns: columns.map((name) => ({ name, type: 'VARCHAR' })),
  rows: data,
});

/** The row objects of a result, by its column names. */
const rowObjects = (result: QueryResult): Row[] => result.rows.map((values) => Object.fromEntries(result.columns.map((c, i) => [c.name, values[i]])));

/** Rows between two progress reports of a write. */
const PROGRESS_ROWS = 1024;

/**
 * Writes every row of `table` through a writer made for them (none for no rows), flushes, and
 * closes it whatever happens; reports its progress (progress.ts) as rows are handed to the writer.
 */
async function writeAll<W extends { flush(): Promise<void>; close(): Promise<void> }>(table: TableInfo, create: () => Promise<W>, data: Row[], write: (writer: W, row: Row) => Promise<void>): Promise<void> {
  if (data.length === 0) return;
  const written = rowCounter('write', tablePathString(table.path), data.length);
  const writer = await create();
  try {
    for (let i = 0; i < data.length; i++) {
      await write(writer, data[i]).catch((err: unknown) => Promise.reject(atRow(err, i + 1)));
      if ((i + 1) % PROGRESS_ROWS === 0) written(PROGRESS_ROWS);
    }
    written(data.length % PROGRESS_ROWS);
    await writer.flush();
  } finally {
    await writer.close().catch(() => undefined);
  }
}

export class SqlExecutor {
  database: string;
  private readonly loader: TableLoader;
  /** Session options set by SET: scan options of queries (scan-options.ts). */
  private readonly options = new Map<string, string>();

  constructor(
    private readonly conn: Connection,
    private readonly duck: DuckSession,
    database: string,
  ) {
    this.database = database;
    this.loader = new TableLoader(conn, duck);
  }

  /**
   * Ends the session's reads: the lake files its union and lake reads pinned in the lake file
   * cache may be evicted again. Its DuckDB session is the caller's to close, first: no statement
   * may still read those files.
   */
  close(): Promise<void> {
    return this.loader.close();
  }

  /**
   * Runs one statement (text holding more is refused with SQL_UNSUPPORTED); `origin` (its place
   * in a script) makes parse errors name script lines. `stream` runs every query as a streaming
   * query, as if it ended in EMIT CHANGES; `streamRows` answers a query's rows as `rows`, read as
   * DuckDB produces them, rather than whole. `onProgress` hears the rows the statement's reads and
   * writes have handled so far (progress.ts); a streaming query reports those of its first result.
   */
  async execute(sql: string, origin?: SourcePosition, options: { stream?: boolean; streamRows?: boolean; onProgress?: ProgressListener } = {}): Promise<ExecutionResult> {
    const count = splitStatements(sql).length;
    if (count > 1) throw new TributaryError('SQL_UNSUPPORTED', `one statement at a time: the text holds ${count} statements; run them one by one`);
    const s = parseStatement(sql, origin);
    if (s.kind === 'query' && (s.emitChanges || options.stream)) {
      const ctx = { conn: this.conn, duck: this.duck, database: this.database, session: this.options, batchQuery: async (q: string) => (await this.query(q, this.options)).result };
      return withProgress(options.onProgress, () => streamQuery(ctx, s.sql));
    }
    if (s.kind === 'query' && options.streamRows) return withProgress(options.onProgress, () => this.queryRows(s.sql));
    return withProgress(options.onProgress, () => this.run(s));
  }

  private path(name: TableName): TablePath {
    return { database: name.database ?? this.database, table: name.table };
  }

  /** The table a write names; system tables (`$changelog`, `$lake`, ...) are read-only. */
  private async writable(name: TableName): Promise<Table> {
    const system = TableLoader.systemTableOf(name);
    if (system) throw new TributaryError('SQL_UNSUPPORTED', `'${name.table}' is read-only: it shows ${system.shows}`);
    return this.conn.getTable(this.path(name));
  }

  private async run(s: Statement): Promise<ExecutionResult> {
    const admin = this.conn.getAdmin();
    switch (s.kind) {
      case 'createDatabase':
        await admin.createDatabase(s.database, { ...(s.comment ? { comment: s.comment } : {}), ignoreIfExists: s.ifNotExists });
        return { message: `Database '${s.database}' created.` };
      case 'dropDatabase':
        await admin.dropDatabase(s.database, { ignoreIfNotExists: s.ifExists, cascade: s.cascade });
        if (s.database === this.database) this.database = DEFAULT_DATABASE;
        return { message: `Database '${s.database}' dropped.` };
      case 'showDatabases':
        return { result: rows(['database name'], (await admin.listDatabases()).map((d) => [d])) };
      case 'useDatabase':
        if (!(await admin.databaseExists(s.database))) throw new TributaryError('DATABASE_NOT_EXIST', `database '${s.database}' does not exist`);
        this.database = s.database;
        return { message: `Using database '${s.database}'.` };
      case 'createTable': {
        const path = this.path(s.table);
        await admin.createTable(path, s.descriptor, { ignoreIfExists: s.ifNotExists });
        return { message: `Table '${tablePathString(path)}' created.` };
      }
      case 'dropTable': {
        const path = this.path(s.table);
        await admin.dropTable(path, { ignoreIfNotExists: s.ifExists, purge: s.purge ?? false });
        return { message: `Table '${tablePathString(path)}' dropped${s.purge ? ', with its lake table' : ''}.` };
      }
      case 'dropLakeTable': {
        const path = this.path(s.table);
        await admin.dropLakeTable(path, { ignoreIfNotExists: s.ifExists });
        return { message: `Lake table '${tablePathString(path)}' dropped.` };
      }
      case 'showLakeTables':
        return { result: lakeTables((await admin.listLakeTables()).tables) };
      case 'showTabletServers':
        return { result: tabletServers(await admin.listTabletServers()) };
      case 'showConsumerGroups':
        return { result: consumerGroups(await admin.listConsumerGroups()) };
      case 'call':
        return callProcedure(admin, s.procedure, s.args);
      case 'showTables':
        return { result: rows(['table name'], (await admin.listTables(s.database ?? this.database)).map((t) => [t])) };
      case 'describeTable':
        return { result: describe(await admin.getTableInfo(this.path(s.table))) };
      case 'showCreateTable':
        return { result: rows(['create table'], [[showCreate(await admin.getTableInfo(this.path(s.table)))]]) };
      case 'alterTableSet':
        await admin.alterTable(this.path(s.table), { set: s.properties });
        return { message: `Table '${tablePathString(this.path(s.table))}' altered.` };
      case 'alterTableReset':
        await admin.alterTable(this.path(s.table), { reset: s.keys });
        return { message: `Table '${tablePathString(this.path(s.table))}' altered.` };
      case 'addColumns':
        await admin.alterTable(this.path(s.table), { addColumns: s.columns });
        return { message: `Table '${tablePathString(this.path(s.table))}' altered: ${s.columns.length} column(s) added.` };
      case 'addPartition':
        await admin.createPartition(this.path(s.table), s.partition, { ignoreIfExists: s.ifNotExists });
        return { message: 'Partition added.' };
      case 'dropPartition':
        await admin.dropPartition(this.path(s.table), s.partition, { ignoreIfNotExists: s.ifExists });
        return { message: 'Partition dropped.' };
      case 'showPartitions': {
        const info = await admin.getTableInfo(this.path(s.table));
        if (info.partitionKeys.length === 0) throw new TributaryError('TABLE_NOT_PARTITIONED_EXCEPTION', `table '${tablePathString(info.path)}' is not partitioned`);
        const parts = await admin.listPartitionInfos(info.path, s.partition ?? {});
        return { result: rows(['partition name', ...info.partitionKeys], parts.map((p) => [p.partitionName, ...info.partitionKeys.map((k) => p.spec[k])])) };
      }
      case 'showLakeStatus':
        return { result: lakeStatus(await admin.getLakeTieringStatus(this.path(s.table))) };
      case 'showTableStorage': {
        const info = await admin.getTableInfo(this.path(s.table));
        return { result: await tableStorage(this.conn, this.duck, info, () => this.loader.lakeTable(info)) };
      }
      case 'insert':
        return this.insert(await this.writable(s.table), s.columns, s.query, s.rows);
      case 'update':
        return this.update(await this.writable(s.table), s.assignments, s.where);
      case 'delete':
        return this.delete(await this.writable(s.table), s.where);
      case 'query':
        return this.query(s.sql, this.options);
      case 'setOption':
        checkScanOption(s.key, s.value);
        this.options.set(s.key, s.value);
        return { message: `Option '${s.key}' set.` };
      case 'resetOption':
        if (s.key === undefined) this.options.clear();
        else this.options.delete(s.key);
        return { message: s.key === undefined ? 'All options reset.' : `Option '${s.key}' reset.` };
      case 'showOptions':
        return { result: rows(['key', 'value'], [...this.options].sort()) };
    }
  }

  /**
   * Runs a query over the tables it names; `session` holds the scan options that apply (SET), and
   * the query's own hints and time travel clauses are cut out first (scan-options.ts).
   */
  private async query(sql: string, session: ReadonlyMap<string, string> = new Map()): Promise<ExecutionResult & { result: QueryResult }> {
    const prepared = await this.prepareQuery(sql, session);
    if ('result' in prepared) return prepared;
    return { result: await this.duck.run(prepared.text), ...(prepared.plan ? { plan: prepared.plan } : {}) };
  }

  /** A query of the session (SET options apply) answered as its rows come. */
  private async queryRows(sql: string): Promise<ExecutionResult> {
    const prepared = await this.prepareQuery(sql, this.options);
    if ('result' in prepared) return prepared;
    return { rows: await this.duck.stream(prepared.text), ...(prepared.plan ? { plan: prepared.plan } : {}) };
  }

  /**
   * A query's tables loaded, and the text DuckDB runs; or its answer from the table stats (a
   * count of all rows), which needs no DuckDB.
   */
  private async prepareQuery(sql: string, session: ReadonlyMap<string, string>): Promise<{ text: string; plan?: ReadPlan } | { result: QueryResult; plan?: ReadPlan }> {
    const { sql: text, hints } = extractTableHints(sql);
    const tree = await this.duck.syntaxTree(text);
    const count = tree.explain || hints.length > 0 ? undefined : countStarOf(tree.json);
    if (count && !TableLoader.systemTableOf(count.table)) {
      const path = TableLoader.pathOf(count.table, this.database);
      if (TableLoader.countsFromStats((await this.conn.getTable(path)).info, session)) {
        return { result: { columns: [{ name: count.column, type: 'BIGINT' }], rows: [[await this.rowCount(path)]] }, plan: 'stats' };
      }
    }
    const { plan, reads } = await this.loader.load(tree, this.database, { hints, session });
    if (tree.explain) {
      // EXPLAIN: how Tributary read the tables, before DuckDB's plan of the query over what it read.
      const result = await this.duck.run(text);
      result.rows.unshift(['tributary_plan', reads.length > 0 ? reads.join('\n') : 'reads no table']);
      return { result, ...(plan ? { plan } : {}) };
    }
    return { text, ...(plan ? { plan } : {}) };
  }

  /** Rows of a table from its stats: live keys of a primary-key table, HW − log start of a log table. */
  private async rowCount(path: TablePath): Promise<bigint> {
    const admin = this.conn.getAdmin();
    const { info } = await this.conn.getTable(path);
    if (info.partitionKeys.length === 0) return (await admin.getTableStats(info.path)).rowCount;
    let n = 0n;
    for (const p of await admin.listPartitionInfos(info.path)) n += (await admin.getTableStats(info.path, p.partitionName)).rowCount;
    return n;
  }

  private async insert(table: Table, columns: string[] | undefined, query: string, values: string[][] | undefined): Promise<ExecutionResult> {
    const { info } = table;
    const schema = info.schema;
    const targets = columns ?? schema.columns.map((c) => c.name);
    targets.forEach((c, i) => {
      if (!schema.columns.some((x) => x.name === c)) throw new TributaryError('INVALID_ROW', `column '${c}' is not a column of '${tablePathString(info.path)}'`);
      if (targets.indexOf(c) !== i) throw new TributaryError('INVALID_ROW', `column '${c}' is listed twice`);
    });
    const expects = `INSERT INTO '${tablePathString(info.path)}' expects ${targets.length} (${targets.join(', ')}): nothing was written`;
    const wrongRow = values?.findIndex((row) => row.length !== targets.length) ?? -1;
    if (wrongRow >= 0) throw new TributaryError('INVALID_ROW', `row ${wrongRow + 1} has ${values![wrongRow].length} value(s), ${expects}`);
    // On a primary-key table, a column list that leaves columns out is a partial update of the listed ones.
    const partial = schema.primaryKey !== undefined && targets.length < schema.columns.length;
    if (partial) this.checkPartialUpdate(info, targets);
    const { sql: source, hints } = extractTableHints(query);
    await this.loader.load(await this.duck.syntaxTree(source), this.database, { hints, session: this.options });
    // The query on a line of its own: it may end in a line comment.
    const given = (await this.duck.run(`SELECT * FROM (${source}\n) LIMIT 0`)).columns;
    if (given.length !== targets.length) {
      throw new TributaryError('INVALID_ROW', `${values ? `row 1 has ${given.length} value(s)` : `the query gives ${given.length} column(s) (${given.map((c) => c.name).join(', ')})`}, ${expects}`);
    }
    // Only the listed columns: the writers leave the others null (a partial update, as they are).
    const written = schema.columns.filter((c) => targets.includes(c.name));
    const from = `FROM (${source}\n) AS q(${targets.map((_, i) => quote(`__c${i}`)).join(', ')})`;
    const select = written.map((c) => `CAST(q.${quote(`__c${targets.indexOf(c.name)}`)} AS ${duckTypeName(c.type)}) AS ${quote(c.name)}`);
    let result: QueryResult;
    try {
      result = await this.duck.run(`SELECT ${select.join(', ')} ${from}`);
    } catch (err) {
      const columnsOf = targets.map((name) => schema.columns.find((c) => c.name === name)!);
      const bad = await this.unconvertible(values ?? from, columnsOf).catch(() => undefined);
      throw bad ? new TributaryError('INVALID_ROW', `row ${bad.row}, column ${bad.column.name}: ${bad.shown} ${notA(bad.column.type)}: nothing was written`) : err;
    }
    const data = rowObjects(result);
    // Every row is checked before the first is written.
    const reader = new RowReader(schema.columns);
    const only = partial ? new Set(targets) : undefined;
    const required = partial ? new Set(schema.primaryKey) : undefined;
    data.forEach((row, i) => {
      try {
        reader.read(row, undefined, only, required);
      } catch (err) {
        throw atRow(err, i + 1);
      }
    });
    if (!schema.primaryKey) {
      await writeAll(info, () => table.newAppend().createWriter(), data, (w, row) => w.append(row));
      return { message: `${data.length} row(s) inserted into '${tablePathString(info.path)}'.` };
    }
    const upsert = table.newUpsert();
    if (partial) upsert.partialUpdate(targets);
    await writeAll(info, () => upsert.createWriter(), data, (w, row) => w.upsert(row));
    return { message: `${data.length} row(s) upserted into '${tablePathString(info.path)}'.` };
  }

  /**
   * The first value of a write's query that does not convert to its target column's type: its row
   * (counted from 1), its column and the value as the user wrote it; undefined when every value
   * converts. The query is the text of each value of a VALUES list, each checked by itself (in the
   * list, DuckDB converts them all to one type first), or else `FROM (query) AS q(__c0, ...)`.
   */
  private async unconvertible(query: string[][] | string, columns: Column[]): Promise<{ row: unknown; column: Column; shown: string } | undefined> {
    const check = (value: string, column: Column): string =>
      `CASE WHEN (${value}) IS NOT NULL AND TRY_CAST((${value}) AS ${duckTypeName(column.type)}) IS NULL THEN (CASE WHEN typeof(${value}) = 'VARCHAR' THEN 's' ELSE 'v' END) || CAST((${value}) AS VARCHAR) END`;
    const name = (i: number): string => quote(`__c${i}`);
    const found =
      typeof query === 'string'
        ? `SELECT row_number() OVER () AS n, ${columns.map((c, i) => `${check(`q.${name(i)}`, c)} AS ${name(i)}`).join(', ')} ${query}`
        : query.map((row, r) => `SELECT ${r + 1} AS n, ${row.map((v, i) => `${check(v, columns[i])} AS ${name(i)}`).join(', ')}`).join('\nUNION ALL ');
    const { rows } = await this.duck.run(`SELECT * FROM (${found}) WHERE ${columns.map((_, i) => `${name(i)} IS NOT NULL`).join(' OR ')} ORDER BY n LIMIT 1`);
    const row = rows[0];
    if (!row) return undefined;
    const i = row.findIndex((v, j) => j > 0 && v !== null) - 1;
    // Strings (marked 's') are shown quoted, other values ('v') as DuckDB prints them.
    const value = String(row[i + 1]);
    return { row: row[0], column: columns[i], shown: value[0] === 's' ? shownValue(value.slice(1)) : value.slice(1) };
  }

  private async update(table: Table, assignments: { column: string; expression: string }[], where: string | undefined): Promise<ExecutionResult> {
    const { info } = table;
    const primaryKey = requirePrimaryKey(info, 'UPDATE');
    const set = assignments.map((a) => {
      const column = info.schema.columns.find((c) => c.name === a.column);
      if (!column) throw new TributaryError('INVALID_TARGET_COLUMN', `'${a.column}' is not a column of '${tablePathString(info.path)}'`);
      if (primaryKey.includes(a.column)) {
        throw new TributaryError('INVALID_TARGET_COLUMN', `primary key column '${a.column}' cannot be updated: delete the row and insert it with the new key`);
      }
      return `CAST((${a.expression}) AS ${duckTypeName(column.type)}) AS ${quote(a.column)}`;
    });
    const targets = [...primaryKey, ...assignments.map((a) => a.column)];
    this.checkPartialUpdate(info, targets);
    const matched = await this.matchingRows(info, [...primaryKey.map(quote), ...set], where, 'UPDATE').catch(async (err: unknown) => {
      // A value that does not fit its column, named in the user's terms instead of DuckDB's cast.
      const columns = assignments.map((a) => info.schema.columns.find((c) => c.name === a.column)!);
      const from = `FROM (SELECT ${assignments.map((a, i) => `(${a.expression}) AS ${quote(`__c${i}`)}`).join(', ')} FROM ${quote(info.path.database)}.${quote(info.path.table)}${where === undefined ? '' : ` WHERE ${where}`}\n) AS q`;
      const bad = await this.unconvertible(from, columns).catch(() => undefined);
      throw bad ? new TributaryError('INVALID_ROW', `UPDATE sets column ${bad.column.name} to ${bad.shown}, which ${notA(bad.column.type)}: nothing was written`) : err;
    });
    const { data, plan } = matched;
    await writeAll(info, () => table.newUpsert().partialUpdate(targets).createWriter(), data, (w, row) => w.upsert(row));
    return { message: `${data.length} row(s) updated in '${tablePathString(info.path)}'.`, ...(plan ? { plan } : {}) };
  }

  private async delete(table: Table, where: string | undefined): Promise<ExecutionResult> {
    const { info } = table;
    const primaryKey = requirePrimaryKey(info, 'DELETE');
    const { deleteBehavior, mergeEngine } = primaryKeyTableOptions(info.schema, info.properties);
    if (deleteBehavior !== 'ALLOW') {
      const why = deleteBehavior === 'IGNORE' ? `ignores deletes ('table.delete.behavior' = IGNORE${info.properties['table.delete.behavior'] ? '' : `, the default of the ${mergeEngine} merge engine`})` : "disables deletes ('table.delete.behavior' = DISABLE)";
      throw new TributaryError('DELETION_DISABLED_EXCEPTION', `DELETE cannot remove rows of '${tablePathString(info.path)}': the table ${why}`);
    }
    const { data, plan } = await this.matchingRows(info, primaryKey.map(quote), where, 'DELETE');
    await writeAll(info, () => table.newUpsert().createWriter(), data, (w, key) => w.delete(key));
    return { message: `${data.length} row(s) deleted from '${tablePathString(info.path)}'.`, ...(plan ? { plan } : {}) };
  }

  /** Partial updates of these columns as the server checks them, before anything is read or written. */
  private checkPartialUpdate(info: TableInfo, columns: string[]): void {
    const positions = columns.map((c) => info.schema.columns.findIndex((x) => x.name === c));
    validatePartialUpdate(info.schema, primaryKeyTableOptions(info.schema, info.properties).mergeEngine, positions);
  }

  /** The `select` list over the rows of a primary-key table that match `where`, refused beyond MAX_CHANGED_ROWS. */
  private async matchingRows(info: TableInfo, select: string[], where: string | undefined, verb: string): Promise<{ data: Row[]; plan?: ReadPlan }> {
    // The condition may end in a line comment: the LIMIT goes on a line of its own.
    const sql = `SELECT ${select.join(', ')} FROM ${quote(info.path.database)}.${quote(info.path.table)}${where === undefined ? '' : ` WHERE ${where}`}\nLIMIT ${MAX_CHANGED_ROWS + 1}`;
    const { result, plan } = await this.query(sql);
    if (result.rows.length > MAX_CHANGED_ROWS) {
      throw new TributaryError(
        'SQL_UNSUPPORTED',
        `${verb} would change more than ${MAX_CHANGED_ROWS} rows of '${tablePathString(info.path)}', the most one statement may change: narrow its WHERE condition`,
      );
    }
    return { data: rowObjects(result), ...(plan ? { plan } : {}) };
  }
}

function requirePrimaryKey(info: TableInfo, verb: string): string[] {
  if (!info.schema.primaryKey) {
    throw new TributaryError('NON_PRIMARY_KEY_TABLE_EXCEPTION', `${verb} needs a primary-key table: '${tablePathString(info.path)}' is a log table, whose rows are only appended`);
  }
  return info.schema.primaryKey;
}

function describe(info: TableInfo): QueryResult {
  const primaryKey = info.schema.primaryKey ?? [];
  const data = info.schema.columns.map((c) => {
    const keys = [primaryKey.includes(c.name) ? 'PRIMARY KEY' : '', info.partitionKeys.includes(c.name) ? 'PARTITION KEY' : '', info.bucketKeys.includes(c.name) ? 'BUCKET KEY' : '']
      .filter(Boolean)
      .join(', ');
    return [c.name, formatDataType(c.type), c.nullable ? 'YES' : 'NO', keys, c.comment ?? ''];
  });
  return rows(['name', 'type', 'null', 'key', 'comment'], data);
}

/** SHOW TABLET SERVERS: one row per tablet server, registered (alive) or holding replicas while it is not. */
function tabletServers(servers: readonly TabletServerInfo[]): QueryResult {
  return {
    columns: [
      { name: 'server_id', type: 'INTEGER' },
      { name: 'host', type: 'VARCHAR' },
      { name: 'port', type: 'INTEGER' },
      { name: 'rack', type: 'VARCHAR' },
      { name: 'alive', type: 'BOOLEAN' },
      { name: 'tags', type: 'VARCHAR' },
      { name: 'leader_count', type: 'INTEGER' },
      { name: 'replica_count', type: 'INTEGER' },
    ],
    rows: servers.map((s) => [s.nodeId, s.host, s.port, s.rack, s.alive, s.tag, s.leaderCount, s.replicaCount]),
  };
}

/** SHOW CONSUMER GROUPS: one row per Kafka consumer group and topic it committed offsets of (topic null for a group with none). */
function consumerGroups(groups: readonly ConsumerGroupInfo[]): QueryResult {
  return {
    columns: [
      { name: 'group', type: 'VARCHAR' },
      { name: 'state', type: 'VARCHAR' },
      { name: 'members', type: 'INTEGER' },
      { name: 'protocol_type', type: 'VARCHAR' },
      { name: 'protocol', type: 'VARCHAR' },
      { name: 'topic', type: 'VARCHAR' },
      { name: 'partitions', type: 'INTEGER' },
      { name: 'lag', type: 'BIGINT' },
    ],
    rows: groups.flatMap((g): unknown[][] => {
      const head: unknown[] = [g.groupId, g.state, g.members, g.protocolType, g.protocol];
      return g.topics.length === 0 ? [[...head, null, null, null]] : g.topics.map((t) => [...head, t.topic, t.partitions, t.lag]);
    }),
  };
}

/** SHOW LAKE TABLES: one row per lake table; `owned` false for one that a plain DROP TABLE left. */
function lakeTables(tables: readonly LakeTable[]): QueryResult {
  return {
    columns: [
      { name: 'database', type: 'VARCHAR' },
      { name: 'table', type: 'VARCHAR' },
      { name: 'table_id', type: 'BIGINT' },
      { name: 'owned', type: 'BOOLEAN' },
      { name: 'location', type: 'VARCHAR' },
    ],
    rows: tables.map((t) => [t.path.database, t.path.table, t.tableId === undefined ? null : BigInt(t.tableId), t.owned, t.location]),
  };
}

/**
 * SHOW LAKE STATUS: one row per bucket (and partition) of a lake-enabled table; the table's
 * tiering state, epoch, failures, registered snapshot, last round and time lag repeat on each.
 */
function lakeStatus(status: LakeTieringStatus): QueryResult {
  const table = [
    status.state,
    status.tieringEpoch ?? null,
    status.failures,
    status.snapshotId ?? null,
    status.lastTieredTime === undefined ? null : new Date(status.lastTieredTime).toISOString(),
    BigInt(status.lagMs),
  ];
  return {
    columns: [
      { name: 'state', type: 'VARCHAR' },
      { name: 'tiering_epoch', type: 'BIGINT' },
      { name: 'failures', type: 'INTEGER' },
      { name: 'snapshot_id', type: 'BIGINT' },
      { name: 'last_tiered_time', type: 'TIMESTAMP WITH TIME ZONE' },
      { name: 'lag_ms', type: 'BIGINT' },
      { name: 'partition', type: 'VARCHAR' },
      { name: 'bucket', type: 'INTEGER' },
      { name: 'lake_end_offset', type: 'BIGINT' },
      { name: 'high_watermark', type: 'BIGINT' },
      { name: 'records_behind', type: 'BIGINT' },
    ],
    rows: status.buckets.map((b) => [...table, b.partition ?? null, b.bucket, b.lakeEndOffset, b.highWatermark, b.recordsBehind]),
  };
}

function showCreate(info: TableInfo): string {
  const lit = (s: string): string => `'${s.replaceAll("'", "''")}'`;
  const name = (s: string): string => `\`${s.replaceAll('`', '``')}\``;
  const cols = info.schema.columns.map((c) => `  ${name(c.name)} ${formatDataType(c.type)}${c.nullable ? '' : ' NOT NULL'}${c.comment ? ` COMMENT ${lit(c.comment)}` : ''}`);
  if (info.schema.primaryKey) cols.push(`  PRIMARY KEY (${info.schema.primaryKey.map(name).join(', ')}) NOT ENFORCED`);
  const options: Record<string, string> = { 'bucket.num': String(info.bucketCount), ...(info.bucketKeys.length ? { 'bucket.key': info.bucketKeys.join(',') } : {}), ...info.properties };
  return [
    `CREATE TABLE ${name(info.path.database)}.${name(info.path.table)} (`,
    cols.join(',\n'),
    ')',
    ...(info.comment ? [`COMMENT ${lit(info.comment)}`] : []),
    ...(info.partitionKeys.length ? [`PARTITIONED BY (${info.partitionKeys.map(name).join(', ')})`] : []),
    `WITH (\n${Object.entries(options).map(([k, v]) => `  ${lit(k)} = ${lit(v)}`).join(',\n')}\n)`,
  ].join('\n');
}
