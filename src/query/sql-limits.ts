/**
 * The limits of SQL statements run for a client (the REST API's POST /api/v1/sql, the shell), as
 * the `sql.*` options set them (docs/operations.md, "Limits").
 */
import type { Options } from '../common/config.js';
import type { SessionLimits } from './duckdb/session.js';

export interface SqlLimits {
  /** `sql.query.timeout` in ms; 0: none. */
  timeoutMs: number;
  /** `sql.max-concurrent-queries`. */
  maxConcurrentQueries: number;
  /** What each statement's DuckDB session may use and hold. */
  session: SessionLimits;
}

/** The limits of `options` (server scope), DuckDB spilling under `spillDirectory`. */
export function sqlLimits(options: Options, spillDirectory: string): SqlLimits {
  return {
    timeoutMs: options.durationMs('sql.query.timeout'),
    maxConcurrentQueries: options.int('sql.max-concurrent-queries'),
    session: {
      memoryBytes: options.bytes('sql.memory-limit'),
      ...(options.raw('sql.threads') === undefined ? {} : { threads: options.int('sql.threads') }),
      spillDirectory,
      maxRows: options.int('sql.result.max-rows'),
      maxBytes: options.bytes('sql.result.max-bytes'),
    },
  };
}
