/**
 * One embedded DuckDB database (in memory) and its connection: tables loaded from Arrow batches,
 * the references of a query, and queries run to exact JS values.
 *
 * The session's TimeZone is UTC, so TIMESTAMPTZ arithmetic and casts agree with the UTC instants
 * that results show.
 */
import { DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import type * as arrow from 'apache-arrow';
import { TributaryError } from '../../common/errors.js';
import { Lexer } from '../sql/lexer.js';
import { appendArrowBatches, duckTypesOf } from './arrow-load.js';
import { referencesOf, type TableReferences } from './references.js';
import { type QueryResult, readResult } from './result.js';
import { parseSerializedSql, type SyntaxTree } from './syntax-tree.js';

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** DuckDB's errors as TributaryErrors: syntax errors are SQL_PARSE_ERROR, the rest INVALID_ARGUMENT. */
function queryError(err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new TributaryError(message.startsWith('Parser Error:') ? 'SQL_PARSE_ERROR' : 'INVALID_ARGUMENT', message, { cause: err });
}

export class DuckSession {
  private constructor(
    private readonly instance: DuckDBInstance,
    private readonly connection: DuckDBConnection,
  ) {}

  static async create(): Promise<DuckSession> {
    // Only statically linked extensions: nothing may be downloaded.
    const instance = await DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' });
    const connection = await instance.connect();
    await connection.run("SET TimeZone = 'UTC'"); // a setting of the statically linked icu, which loads on first use
    // Lake data files are never changed once written: their footers can be kept between queries.
    await connection.run('SET parquet_metadata_cache = true');
    return new DuckSession(instance, connection);
  }

  close(): void {
    this.connection.closeSync();
    this.instance.closeSync();
  }

  /**
   * Creates (or replaces) table `name` — `table` or `schema.table`, the schema created when
   * missing — with the DuckDB types of `arrowSchema`'s columns, and appends all rows of `batches`.
   * Column types without a DuckDB mapping fail with INVALID_TYPE before anything is created.
   */
  async loadArrowTable(name: string, arrowSchema: arrow.Schema, batches: Iterable<arrow.RecordBatch>): Promise<void> {
    const dot = name.indexOf('.');
    const schema = dot < 0 ? 'main' : name.slice(0, dot);
    const table = dot < 0 ? name : name.slice(dot + 1);
    const types = duckTypesOf(arrowSchema);
    const columns = arrowSchema.fields.map((f, i) => `${quote(f.name)} ${types[i].toString()}`).join(', ');
    const target = `${quote(schema)}.${quote(table)}`;
    await this.exec(`CREATE SCHEMA IF NOT EXISTS ${quote(schema)}`);
    await this.exec(`CREATE OR REPLACE TABLE ${target} (${columns})`);
    try {
      await appendArrowBatches(this.connection, schema, table, arrowSchema, batches);
    } catch (err) {
      await this.exec(`DROP TABLE IF EXISTS ${target}`);
      throw err;
    }
  }

  /**
   * DuckDB's syntax tree of a query (see syntax-tree.ts); a leading EXPLAIN [ANALYZE] is looked
   * through. Syntax errors are SQL_PARSE_ERROR with the position; statements other than queries
   * are SQL_UNSUPPORTED.
   */
  async syntaxTree(sql: string): Promise<SyntaxTree> {
    const lexer = new Lexer(sql);
    let start = 0;
    if (lexer.peek().upper === 'EXPLAIN') {
      start = lexer.next().end;
      if (lexer.peek().upper === 'ANALYZE') start = lexer.next().end;
    }
    const reader = await this.connection.runAndReadAll('SELECT json_serialize_sql(?::VARCHAR)', [sql.slice(start)]);
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

  /** Runs SQL (several statements: the result of the last) and reads the whole result. */
  async run(sql: string): Promise<QueryResult> {
    try {
      return readResult(await this.connection.run(sql));
    } catch (err) {
      throw queryError(err);
    }
  }

  private async exec(sql: string): Promise<void> {
    try {
      await this.connection.run(sql);
    } catch (err) {
      throw queryError(err);
    }
  }
}
