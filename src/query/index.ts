/**
 * query/ — Tributary's SQL: the dialect parser (sql/), the bridge to embedded DuckDB (duckdb/), and
 * the executor of statements over Tributary tables.
 *
 *   sql/              lexer, statement AST and parser of the Flink-SQL-style dialect; queries, the
 *                     query part of INSERT and the expressions of UPDATE/DELETE stay text for DuckDB
 *   duckdb/           DuckSession (one in-memory DuckDB): Arrow batches in, syntax trees, table
 *                     references and query shapes (COUNT(*), key lookups, column filters), exact
 *                     results out;
 *                     formatResult for the shell
 *   log-reader.ts     a table's log (and `$changelog`) up to the high watermark, as Arrow
 *   state-reader.ts   a primary-key table's current state, whole or by keys, as Arrow
 *   union-reader.ts   union read: a lake snapshot and the log after it as one DuckDB view; the
 *                     lake's own tables ($lake, $lake$files), read through the lake format
 *                     (lake/lake-format.ts), which gives the DuckDB SQL of its files
 *   lake-pruning.ts   lake files, their row groups and log partitions a query's filters rule out
 *   scan-options.ts   startup modes, lake snapshots by id or time: hints, FOR SYSTEM_TIME, SET
 *   table-loader.ts   loads what a query reads into DuckDB, choosing scan, lookup or union read
 *   executor.ts       SqlExecutor: DDL, queries, INSERT, UPDATE, DELETE
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
