/**
 * query/ — Tributary's SQL: the dialect parser (sql/) and the bridge to embedded DuckDB (duckdb/).
 *
 *   sql/     lexer, statement AST and parser of the Flink-SQL-style dialect; queries and the query
 *            part of INSERT stay raw text for DuckDB
 *   duckdb/  DuckSession (one in-memory DuckDB): Arrow batches in, table references of a query,
 *            exact results out; formatResult for the shell
 *
 * May import: common, record, client and lake. Never server: queries reach the server through
 * the client, like any user's program.
 */
export type { PartitionSpec, Statement, StatementKind, TableName } from './sql/ast.js';
export { type SourcePosition, type StatementText, splitStatements } from './sql/lexer.js';
export { parseStatement } from './sql/parser.js';
export { formatResult, type ResultFormat } from './duckdb/format.js';
export type { TableReference, TableReferences } from './duckdb/references.js';
export type { QueryResult } from './duckdb/result.js';
export { DuckSession } from './duckdb/session.js';
