/**
 * `Table`: a handle on one table, from which writers and scanners are made.
 *
 *   table.newAppend().createWriter()                 log tables
 *   table.newUpsert().createWriter()                 primary-key tables
 *   table.newLookup().createLookuper()               primary-key tables
 *   table.newScan().project(['a', 'b']).createLogScanner()
 */
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import { AppendWriter } from './append-writer.js';
import { BatchScanner } from './batch-scanner.js';
import type { ConnectionCore } from './connection-core.js';
import { type BucketRef, LogScanner } from './log-scanner.js';
import { Lookuper } from './lookuper.js';
import { UpsertWriter } from './upsert-writer.js';

export class Table {
  constructor(
    private readonly conn: ConnectionCore,
    readonly info: TableInfo,
  ) {}

  newAppend(): { createWriter(): Promise<AppendWriter> } {
    return { createWriter: () => AppendWriter.create(this.conn, this.info) };
  }

  newScan(): Scan {
    return new Scan(this.conn, this.info);
  }

  /** Writers of primary-key tables; `partialUpdate(columns)` limits writes to those columns. */
  newUpsert(): UpsertBuilder {
    return new UpsertBuilder(this.conn, this.info);
  }

  /** Point lookups by primary key; `lookupBy(bucketKey)` for prefix lookups. */
  newLookup(): LookupBuilder {
    return new LookupBuilder(this.conn, this.info);
  }
}

export class UpsertBuilder {
  private columns?: string[];

  constructor(
    private readonly conn: ConnectionCore,
    private readonly info: TableInfo,
  ) {}

  /** Writes only these columns (they must include the primary key); the others keep stored values. */
  partialUpdate(columns: string[]): this {
    this.columns = [...columns];
    return this;
  }

  createWriter(): Promise<UpsertWriter> {
    return UpsertWriter.create(this.conn, this.info, this.columns);
  }
}

export class LookupBuilder {
  private prefix?: string[];

  constructor(
    private readonly conn: ConnectionCore,
    private readonly info: TableInfo,
  ) {}

  /** Looks up by these columns: the bucket key plus partition keys, a prefix of the primary key. */
  lookupBy(columns: string[]): this {
    this.prefix = [...columns];
    return this;
  }

  createLookuper(): Lookuper {
    return new Lookuper(this.conn, this.info, this.prefix);
  }
}

/** Builder of scans: choose columns, then create a scanner. */
export class Scan {
  private projection?: number[];
  private fromLogOnly = false;

  constructor(
    private readonly conn: ConnectionCore,
    private readonly info: TableInfo,
  ) {}

  /** Reads only these columns (by name, in this order); the server cuts the others out. */
  project(columns: string[]): this {
    if (columns.length === 0) throw new TributaryError('INVALID_COLUMN_PROJECTION', 'projection must name at least one column');
    this.projection = columns.map((name) => {
      const i = this.info.schema.columns.findIndex((c) => c.name === name);
      if (i < 0) throw new TributaryError('INVALID_COLUMN_PROJECTION', `column '${name}' is not a column of '${this.info.path.database}.${this.info.path.table}'`);
      return i;
    });
    return this;
  }

  /**
   * Reads the log alone, never the lake: on a lake-enabled table an offset below the log start
   * then fails with LOG_OFFSET_OUT_OF_RANGE_EXCEPTION instead of being read from the lake, and
   * `earliest` is the log start. For readers that need the exact changelog (the lake holds a
   * primary-key table's state, not its history) or that read the lake themselves.
   */
  logOnly(): this {
    this.fromLogOnly = true;
    return this;
  }

  createLogScanner(): LogScanner {
    return new LogScanner(this.conn, this.info, this.projection, { logOnly: this.fromLogOnly });
  }

  /** Reads the current state of a primary-key table (bounded): of every bucket, or of `buckets` only. */
  createBatchScanner(buckets?: readonly BucketRef[]): BatchScanner {
    return new BatchScanner(this.conn, this.info, this.projection, buckets);
  }
}
