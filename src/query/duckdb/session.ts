/**
 * One embedded DuckDB database (in memory) and its connection: tables loaded from Arrow batches,
 * the references of a query, and queries run to exact JS values.
 *
 * The session's TimeZone is UTC, so TIMESTAMPTZ arithmetic and casts agree with the UTC instants
 * that results show.
 *
 * The tables and views that Tributary creates in it go through the methods here, which remember
 * them: a view created again with the same SQL is left as it is (DuckDB would bind the query's
 * Parquet scans again), and a name turns from view to table and back without asking DuckDB's
 * catalog what it holds. Queries that users run are only queries, so nothing else creates or drops
 * relations. Syntax trees are kept by query text, for the queries a session repeats.
 *
 * A session may be given limits (SessionLimits): DuckDB's memory and threads, a directory of its
 * own to spill to, and the most rows and bytes a result read whole (`run`) may hold. Statements
 * run under `bounded`, which stops them after a timeout; `cancel` stops the running one. A stopped
 * statement fails with QUERY_TIMEOUT or QUERY_CANCELLED, and the session answers the next at once.
 */
import fs from 'node:fs';
import path from 'node:path';
import { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { Lexer } from '../sql/lexer.js';
import { appendArrowBatches, duckTypesOf } from './arrow-load.js';
import { referencesOf, type TableReferences } from './references.js';
import { type QueryResult, readRows, type RowStream, valueBytes } from './result.js';
import { parseSerializedSql, type SyntaxTree } from './syntax-tree.js';

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** How often a stopped statement is interrupted again. */
const INTERRUPT_REPEAT_MS = 50;

/** Syntax trees kept, by query text. */
const SYNTAX_TREES_KEPT = 64;

/** Relation `schema.table` (a bare name is in `main`; split at the first dot) as a quoted DuckDB name. */
export function relationSql(name: string): string {
  return relationOf(name).sql;
}

/** A relation's `schema.table` (a bare name is in `main`), split and quoted for DuckDB, and its key: DuckDB compares names case-insensitively. */
function relationOf(name: string): { schema: string; table: string; sql: string; key: string } {
  const dot = name.indexOf('.');
  const schema = dot < 0 ? 'main' : name.slice(0, dot);
  const table = dot < 0 ? name : name.slice(dot + 1);
  return { schema, table, sql: `${quote(schema)}.${quote(table)}`, key: `${schema}.${table}`.toLowerCase() };
}

/** What a session may use and hold; what is unset is DuckDB's default, or no limit. */
export interface SessionLimits {
  /** DuckDB's memory_limit, in bytes (`sql.memory-limit`). */
  memoryBytes?: number;
  /** DuckDB's threads (`sql.threads`). */
  threads?: number;
  /** A directory in which the session makes one of its own for DuckDB to spill to, removed on close. */
  spillDirectory?: string;
  /** The most rows a result read whole may hold (`sql.result.max-rows`). */
  maxRows?: number;
  /** The most bytes (result.ts valueBytes) a result read whole may hold (`sql.result.max-bytes`). */
  maxBytes?: number;
}

/**
 * DuckDB's errors as TributaryErrors: syntax errors are SQL_PARSE_ERROR, running out of memory
 * QUERY_MEMORY_EXCEEDED, the rest INVALID_ARGUMENT.
 */
function queryError(err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  // node-api says where a parse failed, before DuckDB's own message.
  const message = (err instanceof Error ? err.message : String(err)).replace(/^Failed to extract statements: /, '');
  if (message.startsWith('Out of Memory Error:')) {
    const first = message.split('\n')[0];
    return new TributaryError('QUERY_MEMORY_EXCEEDED', `${first}: the query needs more memory than sql.memory-limit grants it; raise the option, or narrow the query`, { cause: err });
  }
  return new TributaryError(message.startsWith('Parser Error:') ? 'SQL_PARSE_ERROR' : 'INVALID_ARGUMENT', message, { cause: err });
}

export class DuckSession {
  /** The relations this session created, by key (relationOf): a view with its SQL, or a table. */
  private readonly relations = new Map<string, { view: string } | 'table'>();
  /** Schemas created so far, lower case. */
  private readonly schemas = new Set<string>(['main']);
  private searchPath: string | undefined;
  private readonly syntaxTrees = new Map<string, SyntaxTree>();
  /** Why the statement under way was stopped: every DuckDB call fails with it until the statement ends. */
  private stopped: TributaryError | undefined;
  /** Repeats the interrupt while a stopped statement runs (see stop). */
  private interrupting: NodeJS.Timeout | undefined;

  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly connection: DuckDBConnection,
    private readonly limits: SessionLimits,
    private readonly spill: string | undefined,
  ) {}

  static async create(limits: SessionLimits = {}): Promise<DuckSession> {
    // Only statically linked extensions: nothing may be downloaded.
    const config: Record<string, string> = { autoinstall_known_extensions: 'false' };
    if (limits.memoryBytes !== undefined) config.memory_limit = `${Math.max(1, Math.floor(limits.memoryBytes / 1024))}KiB`;
    if (limits.threads !== undefined) config.threads = String(limits.threads);
    let spill: string | undefined;
    if (limits.spillDirectory !== undefined) {
      fs.mkdirSync(limits.spillDirectory, { recursive: true });
      // One directory per session: DuckDB names its spill files alike in every database.
      spill = fs.mkdtempSync(path.join(limits.spillDirectory, 'duckdb-'));
      config.temp_directory = spill;
    }
    try {
      const instance = await DuckDBInstance.create(':memory:', config);
      const connection = await instance.connect();
      await connection.run("SET TimeZone = 'UTC'"); // a setting of the statically linked icu, which loads on first use
      // Lake data files are never changed once written: their footers can be kept between queries.
      await connection.run('SET parquet_metadata_cache = true');
      return new DuckSession(instance, connection, limits, spill);
    } catch (err) {
      if (spill) fs.rmSync(spill, { recursive: true, force: true });
      throw err;
    }
  }

  close(): void {
    clearInterval(this.interrupting);
    this.connection.closeSync();
    this.instance.closeSync();
    if (this.spill) fs.rmSync(this.spill, { recursive: true, force: true });
  }

  /**
   * Runs `work`, statements on this session, stopping them with QUERY_TIMEOUT after `timeoutMs`
   * (0: no limit) or with QUERY_CANCELLED on `cancel`. The session is ready for more afterwards.
   */
  async bounded<T>(timeoutMs: number, work: () => Promise<T>): Promise<T> {
    const timer =
      timeoutMs > 0
        ? setTimeout(() => this.stop(new TributaryError('QUERY_TIMEOUT', `the query ran longer than ${timeoutMs} ms (sql.query.timeout, or the request's timeout)`)), timeoutMs)
        : undefined;
    try {
      return await work();
    } finally {
      clearTimeout(timer);
      clearInterval(this.interrupting);
      this.stopped = undefined;
    }
  }

  /** Stops the statement under way (see `bounded`) with QUERY_CANCELLED: `why` it was. */
  cancel(why: string): void {
    this.stop(new TributaryError('QUERY_CANCELLED', `the query was cancelled: ${why}`));
  }

  private stop(reason: TributaryError): void {
    if (this.stopped) return;
    this.stopped = reason;
    this.connection.interrupt();
    // DuckDB forgets an interrupt that comes while a call is queued or preparing, before it executes.
    this.interrupting = setInterval(() => this.connection.interrupt(), INTERRUPT_REPEAT_MS);
  }

  /**
   * Creates (or replaces) table `name` — `table` or `schema.table`, the schema created when
   * missing — with the DuckDB types of `arrowSchema`'s columns, and appends all rows of `batches`.
   * Column types without a DuckDB mapping fail with INVALID_TYPE before anything is created.
   */
  async loadArrowTable(name: string, arrowSchema: arrow.Schema, batches: Iterable<arrow.RecordBatch>): Promise<void> {
    const types = duckTypesOf(arrowSchema);
    const columns = arrowSchema.fields.map((f, i) => `${quote(f.name)} ${types[i].toString()}`).join(', ');
    await this.createTableAs(name, `(${columns})`);
    await this.appendArrowRows(name, arrowSchema, batches);
  }

  /**
   * Appends all rows of `batches` to table `name`, created by loadArrowTable with the same
   * `arrowSchema`. When that fails the table is dropped: it may hold some of the rows.
   */
  async appendArrowRows(name: string, arrowSchema: arrow.Schema, batches: Iterable<arrow.RecordBatch>): Promise<void> {
    const { schema, table } = relationOf(name);
    try {
      await this.call(() => appendArrowBatches(this.connection, schema, table, arrowSchema, batches));
    } catch (err) {
      await this.dropTable(name);
      throw err;
    }
  }

  /** Creates or replaces table `name` as `definition`: `AS <query>` or `(<columns>)`; a view of that name is dropped first. */
  async createTableAs(name: string, definition: string): Promise<void> {
    const relation = relationOf(name);
    await this.prepareFor(relation, 'table');
    await this.exec(`CREATE OR REPLACE TABLE ${relation.sql} ${definition}`);
    this.relations.set(relation.key, 'table');
  }

  /** Creates or replaces view `name` as `sql`, dropping a table of that name first; nothing when it is that view already. */
  async createView(name: string, sql: string): Promise<void> {
    const relation = relationOf(name);
    const existing = this.relations.get(relation.key);
    if (existing !== 'table' && existing?.view === sql) return;
    await this.prepareFor(relation, 'view');
    await this.exec(`CREATE OR REPLACE VIEW ${relation.sql} AS ${sql}`);
    this.relations.set(relation.key, { view: sql });
  }

  /** Drops table `name` if this session created it. */
  async dropTable(name: string): Promise<void> {
    const relation = relationOf(name);
    if (this.relations.get(relation.key) !== 'table') return;
    this.relations.delete(relation.key);
    await this.exec(`DROP TABLE IF EXISTS ${relation.sql}`);
  }

  /** Makes `schema` the one unqualified names resolve in, creating it when missing. */
  async useSchema(schema: string): Promise<void> {
    if (this.searchPath === schema) return;
    await this.ensureSchema(schema);
    await this.exec(`SET search_path = '${schema.replaceAll("'", "''")}'`);
    this.searchPath = schema;
  }

  /** The schema exists, and no relation of the other kind holds the name. */
  private async prepareFor(relation: { schema: string; sql: string; key: string }, kind: 'table' | 'view'): Promise<void> {
    await this.ensureSchema(relation.schema);
    const existing = this.relations.get(relation.key);
    if (existing === undefined || (existing === 'table') === (kind === 'table')) return;
    this.relations.delete(relation.key);
    await this.exec(`DROP ${existing === 'table' ? 'TABLE' : 'VIEW'} IF EXISTS ${relation.sql}`);
  }

  private async ensureSchema(schema: string): Promise<void> {
    if (this.schemas.has(schema.toLowerCase())) return;
    await this.exec(`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`);
    this.schemas.add(schema.toLowerCase());
  }

  /**
   * DuckDB's syntax tree of a query (see syntax-tree.ts); a leading EXPLAIN [ANALYZE] is looked
   * through. Syntax errors are SQL_PARSE_ERROR with the position; statements other than queries
   * are SQL_UNSUPPORTED.
   */
  async syntaxTree(sql: string): Promise<SyntaxTree> {
    const kept = this.syntaxTrees.get(sql);
    if (kept) return kept;
    const tree = await this.parse(sql);
    if (this.syntaxTrees.size >= SYNTAX_TREES_KEPT) this.syntaxTrees.delete(this.syntaxTrees.keys().next().value!);
    this.syntaxTrees.set(sql, tree);
    return tree;
  }

  private async parse(sql: string): Promise<SyntaxTree> {
    const lexer = new Lexer(sql);
    let start = 0;
    if (lexer.peek().upper === 'EXPLAIN') {
      start = lexer.next().end;
      if (lexer.peek().upper === 'ANALYZE') start = lexer.next().end;
    }
    const reader = await this.call(() => this.connection.runAndReadAll('SELECT json_serialize_sql(?::VARCHAR)', [sql.slice(start)]));
    const json = parseSerializedSql(String(reader.getRows()[0][0]));
    const out = json as { error?: boolean; error_type?: string; error_message?: string; position?: string };
    if (out.error) {
      if (out.error_type === 'parser') {
        const at = out.position === undefined ? '' : `${lexer.where(start + Number(out.position))}: `;
        throw new TributaryError('SQL_PARSE_ERROR', `${at}${out.error_message}`);
      }
      throw new TributaryError('SQL_UNSUPPORTED', `cannot tell the tables this statement reads: ${out.error_message}`);
    }
    return { json, explain: start > 0 };
  }

  /** The base tables a query reads and the columns it may use (see references.ts). */
  async tableReferences(sql: string): Promise<TableReferences> {
    return referencesOf((await this.syntaxTree(sql)).json);
  }

  /**
   * Runs SQL (several statements: the result of the last) and reads the whole result; past the
   * session's maxRows or maxBytes it fails with RESULT_TOO_LARGE.
   */
  async run(sql: string): Promise<QueryResult> {
    const { maxRows = Infinity, maxBytes = Infinity } = this.limits;
    const { columns, chunks } = await this.stream(sql);
    const rows: unknown[][] = [];
    let bytes = 0;
    for await (const chunk of chunks) {
      if (rows.length + chunk.length > maxRows) {
        throw new TributaryError('RESULT_TOO_LARGE', `the result has more than ${maxRows} rows, the most sql.result.max-rows allows: narrow the query (WHERE, LIMIT, aggregates) or raise the option`);
      }
      // Sizes are counted only where a byte limit applies: the session's own queries have none.
      if (maxBytes !== Infinity) for (const row of chunk) for (const v of row) bytes += valueBytes(v);
      for (const row of chunk) rows.push(row);
      if (bytes > maxBytes) {
        throw new TributaryError('RESULT_TOO_LARGE', `the result holds more than ${maxBytes} bytes, the most sql.result.max-bytes allows: narrow the query (fewer columns or rows) or raise the option`);
      }
    }
    return { columns, rows };
  }

  /** Runs SQL (several statements: the result of the last) and reads its rows as DuckDB produces them, without limits. */
  async stream(sql: string): Promise<RowStream> {
    const result = await this.call(() => this.connection.stream(sql));
    // An interrupt between two chunks ends the result as if it had no more rows: the reason tells.
    return readRows(result, async () => {
      const chunk = await this.call(() => result.fetchChunk());
      if (this.stopped) throw this.stopped;
      return chunk;
    });
  }

  private async exec(sql: string): Promise<void> {
    await this.call(() => this.connection.run(sql));
  }

  /** One call into DuckDB: refused once the statement is stopped, its failure as a TributaryError. */
  private async call<T>(f: () => Promise<T>): Promise<T> {
    if (this.stopped) throw this.stopped;
    try {
      return await f();
    } catch (err) {
      throw this.stopped ?? queryError(err);
    }
  }
}
