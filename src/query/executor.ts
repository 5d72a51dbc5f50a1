/**
 * Executes statements of Tributary's SQL dialect for one session (the shell, `tributary sql -e`).
 *
 * DDL becomes Admin calls. Queries run in embedded DuckDB: the tables a query names are read from
 * their logs up to the high watermark (only the columns the query uses: the projection goes to the
 * server) and loaded into DuckDB as `<database>.<table>`; filters, joins and aggregates are DuckDB's.
 * INSERT runs its VALUES/SELECT part the same way, casts the result to the table's column types in
 * DuckDB, and appends the rows through an AppendWriter.
 */
import { TributaryError } from '../common/errors.js';
import { type Column, DEFAULT_DATABASE, type TableInfo, type TablePath, tablePathString } from '../common/schema.js';
import { type DataType, formatDataType } from '../common/types.js';
import type { Connection } from '../client/connection.js';
import type { Row } from '../common/values.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import type { QueryResult } from './duckdb/result.js';
import type { DuckSession } from './duckdb/session.js';
import { readLogUpToHighWatermark } from './log-reader.js';
import type { Statement, TableName } from './sql/ast.js';
import type { SourcePosition } from './sql/lexer.js';
import { parseStatement } from './sql/parser.js';

export interface ExecutionResult {
  /** Rows for statements that return data (queries, SHOW, DESCRIBE). */
  result?: QueryResult;
  /** What a statement without rows did, e.g. "Table 'db.t' created." */
  message?: string;
}

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** DuckDB's spelling of a Tributary type, for casts of INSERT values. */
export function duckTypeOf(t: DataType): string {
  switch (t.kind) {
    case 'INT':
      return 'INTEGER';
    case 'DECIMAL':
      return `DECIMAL(${t.precision}, ${t.scale})`;
    case 'CHAR':
    case 'STRING':
      return 'VARCHAR';
    case 'BINARY':
    case 'BYTES':
      return 'BLOB';
    case 'TIME':
      return 'TIME';
    case 'TIMESTAMP':
      return 'TIMESTAMP';
    case 'TIMESTAMP_LTZ':
      return 'TIMESTAMPTZ';
    default:
      return t.kind;
  }
}

const rows = (columns: string[], data: unknown[][]): QueryResult => ({
  columns: columns.map((name) => ({ name, type: 'VARCHAR' })),
  rows: data,
});

export class SqlExecutor {
  database: string;

  constructor(
    private readonly conn: Connection,
    private readonly duck: DuckSession,
    database: string,
  ) {
    this.database = database;
  }

  /** Runs one statement; `origin` (its place in a script) makes parse errors name script lines. */
  async execute(sql: string, origin?: SourcePosition): Promise<ExecutionResult> {
    return this.run(parseStatement(sql, origin));
  }

  private path(name: TableName): TablePath {
    return { database: name.database ?? this.database, table: name.table };
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
        await admin.dropTable(path, { ignoreIfNotExists: s.ifExists });
        return { message: `Table '${tablePathString(path)}' dropped.` };
      }
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
      case 'insert':
        return this.insert(this.path(s.table), s.columns, s.query);
      case 'query':
        await this.loadReferencedTables(s.sql);
        return { result: await this.duck.run(s.sql) };
    }
  }

  /** Loads every table the query names into DuckDB, with only the columns it may use. */
  private async loadReferencedTables(sql: string): Promise<void> {
    const refs = await this.duck.tableReferences(sql);
    const loaded = new Set<string>();
    for (const ref of refs.tables) {
      const path = { database: ref.schema ?? this.database, table: ref.table };
      const key = tablePathString(path);
      if (loaded.has(key)) continue;
      loaded.add(key);
      const table = await this.conn.getTable(path);
      const columns = this.columnsToRead(table.info, refs.columns);
      const batches = await readLogUpToHighWatermark(this.conn, table, columns);
      const projected = columns.map((c) => table.info.schema.columns.findIndex((x) => x.name === c));
      await this.duck.loadArrowTable(`${path.database}.${path.table}`, toArrowSchema(table.info.schema, projected), batches);
    }
    // The current database is DuckDB's default schema, so unqualified names resolve as in Tributary.
    await this.duck.run(`CREATE SCHEMA IF NOT EXISTS ${quote(this.database)}; SET search_path = '${this.database.replaceAll("'", "''")}'`);
  }

  /** The columns a query may read; at least one, so that row counts survive. */
  private columnsToRead(info: TableInfo, used: Set<string> | '*'): string[] {
    const all = info.schema.columns.map((c) => c.name);
    if (used === '*') return all;
    const lower = new Set([...used].map((c) => c.toLowerCase()));
    const chosen = all.filter((c) => lower.has(c.toLowerCase()));
    return chosen.length > 0 ? chosen : [narrowest(info.schema.columns)];
  }

  private async insert(path: TablePath, columns: string[] | undefined, query: string): Promise<ExecutionResult> {
    const table = await this.conn.getTable(path);
    const schema = table.info.schema;
    const targets = columns ?? schema.columns.map((c) => c.name);
    for (const c of targets) {
      if (!schema.columns.some((x) => x.name === c)) throw new TributaryError('INVALID_ROW', `column '${c}' is not a column of '${tablePathString(path)}'`);
    }
    await this.loadReferencedTables(query);
    const aliases = targets.map((_, i) => quote(`__c${i}`)).join(', ');
    const select = schema.columns
      .map((c) => {
        const i = targets.indexOf(c.name);
        return i < 0 ? `NULL AS ${quote(c.name)}` : `CAST(q.${quote(`__c${i}`)} AS ${duckTypeOf(c.type)}) AS ${quote(c.name)}`;
      })
      .join(', ');
    let result: QueryResult;
    try {
      result = await this.duck.run(`SELECT ${select} FROM (${query}) AS q(${aliases})`);
    } catch (err) {
      if (err instanceof TributaryError && /expected|columns|alias/i.test(err.message)) {
        throw new TributaryError('INVALID_ROW', `INSERT INTO '${tablePathString(path)}' lists ${targets.length} column(s) that do not match the query: ${err.message}`);
      }
      throw err;
    }
    const writer = await table.newAppend().createWriter();
    try {
      for (const values of result.rows) {
        const row: Row = {};
        schema.columns.forEach((c, i) => (row[c.name] = values[i]));
        await writer.append(row);
      }
      await writer.flush();
    } finally {
      await writer.close().catch(() => undefined);
    }
    return { message: `${result.rows.length} row(s) inserted into '${tablePathString(path)}'.` };
  }
}

/** The column cheapest to read, for queries that use none (e.g. COUNT(*)). */
function narrowest(columns: Column[]): string {
  const width = (t: DataType): number => (['BOOLEAN', 'TINYINT'].includes(t.kind) ? 1 : t.kind === 'SMALLINT' ? 2 : ['INT', 'FLOAT', 'DATE'].includes(t.kind) ? 4 : ['STRING', 'BYTES', 'CHAR', 'BINARY'].includes(t.kind) ? 16 : 8);
  return [...columns].sort((a, b) => width(a.type) - width(b.type))[0].name;
}

function describe(info: TableInfo): QueryResult {
  const data = info.schema.columns.map((c) => {
    const keys = [info.partitionKeys.includes(c.name) ? 'PARTITION KEY' : '', info.bucketKeys.includes(c.name) ? 'BUCKET KEY' : ''].filter(Boolean).join(', ');
    return [c.name, formatDataType(c.type), c.nullable ? 'YES' : 'NO', keys, c.comment ?? ''];
  });
  return rows(['name', 'type', 'null', 'key', 'comment'], data);
}

function showCreate(info: TableInfo): string {
  const lit = (s: string): string => `'${s.replaceAll("'", "''")}'`;
  const cols = info.schema.columns.map((c) => `  \`${c.name}\` ${formatDataType(c.type)}${c.nullable ? '' : ' NOT NULL'}${c.comment ? ` COMMENT ${lit(c.comment)}` : ''}`);
  const options: Record<string, string> = { 'bucket.num': String(info.bucketCount), ...(info.bucketKeys.length ? { 'bucket.key': info.bucketKeys.join(',') } : {}), ...info.properties };
  return [
    `CREATE TABLE \`${info.path.database}\`.\`${info.path.table}\` (`,
    cols.join(',\n'),
    ')',
    ...(info.comment ? [`COMMENT ${lit(info.comment)}`] : []),
    ...(info.partitionKeys.length ? [`PARTITIONED BY (${info.partitionKeys.map((k) => `\`${k}\``).join(', ')})`] : []),
    `WITH (\n${Object.entries(options).map(([k, v]) => `  ${lit(k)} = ${lit(v)}`).join(',\n')}\n)`,
  ].join('\n');
}
