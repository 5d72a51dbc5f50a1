/**
 * The statements of Tributary's SQL dialect, as `parseStatement` returns them. DDL follows Flink
 * SQL as Fluss documents it; queries (and the query part of INSERT, the expressions and conditions
 * of UPDATE and DELETE) stay raw text for DuckDB.
 */
import type { ColumnSpec, TableDescriptor } from '../../common/schema.js';

/** A table as written: `table` or `database.table`; without a database the current one applies. */
export interface TableName {
  database?: string;
  table: string;
}

/** Partition key → value, in the order written, e.g. `PARTITION (dt = '2024-01-01')`. */
export type PartitionSpec = Record<string, string>;

export type Statement =
  | { kind: 'createDatabase'; database: string; ifNotExists: boolean; comment?: string }
  | { kind: 'dropDatabase'; database: string; ifExists: boolean; cascade: boolean }
  | { kind: 'showDatabases' }
  | { kind: 'useDatabase'; database: string }
  /** `bucket.num` and `bucket.key` stay in `descriptor.properties`, as written in WITH. */
  | { kind: 'createTable'; table: TableName; ifNotExists: boolean; descriptor: TableDescriptor }
  /** `purge`: the lake table of a lake-enabled table goes too (PURGE); without it the lake keeps it. */
  | { kind: 'dropTable'; table: TableName; ifExists: boolean; purge?: true }
  | { kind: 'showTables'; database?: string }
  | { kind: 'describeTable'; table: TableName }
  | { kind: 'showCreateTable'; table: TableName }
  | { kind: 'alterTableSet'; table: TableName; properties: Record<string, string> }
  | { kind: 'alterTableReset'; table: TableName; keys: string[] }
  /** ADD COLUMN: appended in this order, as one new schema. */
  | { kind: 'addColumns'; table: TableName; columns: ColumnSpec[] }
  | { kind: 'addPartition'; table: TableName; ifNotExists: boolean; partition: PartitionSpec }
  | { kind: 'dropPartition'; table: TableName; ifExists: boolean; partition: PartitionSpec }
  /** `partition` filters by a prefix of the partition keys when given. */
  | { kind: 'showPartitions'; table: TableName; partition?: PartitionSpec }
  /** Where tiering of a lake-enabled table into the lake stands, per bucket. */
  | { kind: 'showLakeStatus'; table: TableName }
  | { kind: 'showTableStorage'; table: TableName }
  /** The lake tables of the warehouse, with whether a live table owns each. */
  | { kind: 'showLakeTables' }
  /** The tablet servers of the cluster, with the buckets each leads and holds. */
  | { kind: 'showTabletServers' }
  | { kind: 'showConsumerGroups' }
  /** CALL [catalog.]sys.procedure(args): cluster administration as Fluss's procedures; an argument named (`name => value`) or by position. */
  | { kind: 'call'; procedure: string; args: { name?: string; value: string }[] }
  /** Deletes a lake table that no live table owns (left by a plain DROP TABLE). */
  | { kind: 'dropLakeTable'; table: TableName; ifExists: boolean }
  /** Session options (scan options of queries): SET 'key' = 'value', bare SET lists them, RESET [key] removes one or all. */
  | { kind: 'setOption'; key: string; value: string }
  | { kind: 'showOptions' }
  | { kind: 'resetOption'; key?: string }
  /**
   * `query` is the raw `VALUES ...`, `SELECT ...` or `WITH ...` text; `rows`, for a `VALUES` query,
   * the text of each value of each row, so that a row of the wrong width, or a value that does not
   * fit, can be named (DuckDB gives a VALUES column one type, so one value can fail the whole list).
   */
  | { kind: 'insert'; table: TableName; columns?: string[]; query: string; rows?: string[][] }
  /** Expressions and the condition are raw DuckDB text; no condition means every row. */
  | { kind: 'update'; table: TableName; assignments: { column: string; expression: string }[]; where?: string }
  | { kind: 'delete'; table: TableName; where?: string }
  /**
   * SELECT, WITH, VALUES, FROM, EXPLAIN or a parenthesised query, as raw text for DuckDB;
   * `emitChanges` when it ends in EMIT CHANGES (a streaming query; not part of `sql`).
   */
  | { kind: 'query'; sql: string; emitChanges?: true };

export type StatementKind = Statement['kind'];
