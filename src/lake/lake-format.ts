/**
 * The lake behind one interface (DESIGN.md §5; Fluss's lake storage plugin): what the coordinator,
 * the tiering worker, the HTTP routes and the lake CLI ask of a lake format, in Tributary's terms.
 * Each format implements it in its own folder (lake/iceberg/ first); lake/formats/ maps the server
 * option `datalake.format` to the implementation. This file names no format.
 *
 *   LakeFormat     a format: opens the lake of a warehouse; owns what its writers need (threads)
 *   LakeStorage    the lake of one warehouse: the catalog side (LakeCatalog: create, evolve, list,
 *                  drop lake tables), loading a table, maintenance (expiry, orphan removal,
 *                  compaction), and optionally the Iceberg REST catalog's documents
 *   LakeTable      one lake table as loaded: its columns, the newest tiered snapshot, the writer
 *                  and committer of a tiering round (Fluss's LakeWriter/LakeCommitter), and its
 *                  reads (Fluss's LakeSource): planned splits with the DuckDB SQL of their rows,
 *                  its snapshots and files as SQL, a bucket's rows for a scanner's past
 *
 * Every lake table records the Tributary table it belongs to (TABLE_ID_PROPERTY), so a re-created
 * table of the same name is never mixed into another table's history; every snapshot tiering
 * commits carries the bucket offsets it holds (tiered-offsets.ts).
 */
import type * as arrow from 'apache-arrow';
import type { TableInfo, TablePath } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import type { TieredSnapshot } from './tiered-offsets.js';

/** Lake table property naming the Tributary table (id) the lake table belongs to. */
export const TABLE_ID_PROPERTY = 'tributary.table-id';

/** A lake table of the warehouse. */
export interface LakeTableEntry {
  path: TablePath;
  /** The Tributary table it was created for (absent for a table not created by Tributary). */
  tableId?: number;
  location: string;
}

/** Creates, evolves and deletes the lake tables of lake-enabled tables (the coordinator owns lake metadata). */
export interface LakeCatalog {
  readonly warehouse: string;
  /** Creates the lake table, or brings its schema and properties up to date; idempotent. */
  syncTable(table: TableInfo): Promise<void>;
  /** Every lake table of the warehouse. */
  listTables(): Promise<LakeTableEntry[]>;
  /** The lake table at `path`, or undefined. */
  describeTable(path: TablePath): Promise<LakeTableEntry | undefined>;
  /** Deletes the lake table at `path`: its metadata and files, its own directory and nothing else. */
  dropTable(path: TablePath): Promise<void>;
}

/** A column of a lake table's schema, its type in Tributary's terms. */
export interface LakeColumn {
  /** The lake's field id: stable across schema changes. */
  id: number;
  name: string;
  type: DataType;
  nullable: boolean;
}

/**
 * A plain value of a lake partition tuple or column bound, by the column's type: BOOLEAN boolean;
 * INT number; BIGINT bigint; FLOAT, DOUBLE number; DECIMAL the unscaled bigint; CHAR, STRING string;
 * BINARY, BYTES bytes; DATE days since 1970-01-01 (number); TIME µs of the day and TIMESTAMP,
 * TIMESTAMP_LTZ µs since the epoch (bigint); null.
 */
export type LakeValue = number | bigint | string | boolean | Uint8Array | null;

/** A lake partition: the values of the lake table's partition fields, in order. */
export type LakePartition = readonly LakeValue[];

/** Per row handed to a writer: its log offset and commit timestamp (µs), the lake's system columns with its bucket. */
export interface LakeRowPositions {
  offsets: BigInt64Array;
  timestamps: BigInt64Array;
}

/** Writes one bucket's rows of a round (of one partition). */
export interface LakeBucketWriter {
  /**
   * Log tables: appends rows read from the log, `batch` in the table's Arrow schema
   * (record/arrow-schema.ts), of consecutive offsets from `firstOffset`, committed at `timestampMs`.
   * Resolves once the writer can take more, so reading runs only a little ahead of writing.
   */
  append(batch: arrow.RecordBatch, firstOffset: bigint, timestampMs: number): Promise<void>;
  /**
   * Primary-key tables: the newest row of each key changed in the round (`rows`, in the table's
   * Arrow schema), and the keys (an Arrow batch of the primary key columns) whose older lake rows go.
   */
  writeChanges(rows: arrow.RecordBatch | undefined, positions: LakeRowPositions, deletedKeys: arrow.RecordBatch | undefined): void;
  /** Ends what the bucket has open; later rows start new files. */
  flush(): Promise<void>;
}

/** What a round wrote, for the committer. */
export interface LakeWriteResult {
  rows: number;
  dataFiles: number;
  deleteFiles: number;
  /** The partitions written to (for compaction after the commit). */
  partitions: LakePartition[];
}

/** Writes a tiering round's files (Fluss's LakeWriter); nothing is visible before the commit. */
export interface LakeWriter {
  /** The writer of `bucket`'s rows; `partitionValues` are its partition keys' internal values (common/values.ts). */
  bucket(bucket: number, partitionValues: ReadonlyMap<string, unknown>): LakeBucketWriter;
  /** The round's files, once every bucket is flushed and its files are complete. */
  complete(): Promise<LakeWriteResult>;
  /** Gives up the files still being written: a failed round leaves no partial files. */
  abort(): Promise<void>;
}

/** What a tiering commit must still find true when it lands (else it is refused and nothing commits). */
export interface TieringFence {
  /** The Tributary table the round tiers: the lake table must still belong to it. */
  tableId: number;
  /** The newest tiered snapshot when the round began: no other round may have committed since. */
  basedOn: bigint | undefined;
  /** Aborted when the coordinator fences the round's epoch. */
  signal: AbortSignal;
}

/** Commits tiering rounds (Fluss's LakeCommitter). */
export interface LakeCommitter {
  /**
   * Commits what `written` holds as one snapshot with summary `properties` (the bucket offsets);
   * returns its id. FENCED_TIERING_EPOCH_EXCEPTION or TABLE_NOT_EXIST when `fence` no longer holds.
   */
  commit(written: LakeWriteResult, properties: Readonly<Record<string, string>>, fence: TieringFence): Promise<bigint>;
}

/** What a split holds of one column, for pruning: only nulls, or values within bounds (an absent bound is unknown). */
export type LakeColumnSpan = 'null' | { lower?: LakeValue; upper?: LakeValue };

/** What a data file, or a part of one, holds of its columns. */
export interface LakeSpans {
  /** What it holds of column `columnId`; undefined when it says nothing. */
  span(columnId: number): LakeColumnSpan | undefined;
}

/**
 * The query's filters as a test of the parts of a data file (the row groups of a Parquet file):
 * of `parts`, those that may hold a row passing them, in their order.
 */
export type LakePartFilter = <T extends LakeSpans>(parts: readonly T[]) => Promise<T[]>;

/** A data file of a planned read, with the delete files that apply to it. */
export interface LakeSplit extends LakeSpans {
  readonly path: string;
  readonly recordCount: number;
}

/** A planned read of one snapshot. */
export interface LakeReadPlan {
  /** The snapshot read; absent when the table has none yet. */
  readonly snapshotId?: bigint;
  /** The snapshot's schema. */
  readonly columns: readonly LakeColumn[];
  readonly splits: readonly LakeSplit[];
  /**
   * DuckDB SQL whose result is the rows of `splits` (some of this plan's), their deletes applied,
   * with the columns named in `columns` (compared case-insensitively; all by default). Remote
   * files it reads are copied locally first (of some, only those columns, and with `filter` only
   * the parts of them it keeps: the SQL then yields at least the rows that pass the query's
   * filters, not every row), held until `release`.
   */
  rowsSql(splits: readonly LakeSplit[], columns?: Iterable<string>, filter?: LakePartFilter): Promise<string>;
  /** Lets go of the local copies of remote files the plan holds for its SQL (see the format's cache), which runs no more after. */
  release(): void;
}

/** A run of a bucket's lake rows: consecutive offsets from `baseOffset`, all committed at `timestamp` (ms), the shape of a log batch. */
export interface LakeRowRun {
  baseOffset: bigint;
  timestamp: number;
  batch: arrow.RecordBatch;
}

/** A bucket's lake rows, read a little at a time. */
export interface LakeBucketRows {
  /** The next runs in offset order; undefined once every row is read. */
  next(): Promise<LakeRowRun[] | undefined>;
}

/** Reads the buckets of one planned snapshot (a LogScanner's past below the log start: client/lake-backfill.ts). */
export interface LakeSnapshotReader {
  /**
   * The rows of a bucket (of a partition, by name) with `from` <= offset < `end`, from the first
   * one committed at or after `startTimestampMs` when given, in offset order, their deletes applied.
   */
  readBucket(ref: { bucket: number; partition?: string }, from: bigint, end: bigint, startTimestampMs?: number): LakeBucketRows;
}

/** The columns of `table$lake$snapshots`, in order, with their DuckDB types. */
export const LAKE_SNAPSHOT_COLUMNS = [
  ['snapshot_id', 'BIGINT'],
  ['parent_id', 'BIGINT'],
  ['sequence_number', 'BIGINT'],
  ['committed_at', 'TIMESTAMPTZ'],
  ['operation', 'VARCHAR'],
  ['added_records', 'BIGINT'],
  ['total_records', 'BIGINT'],
  ['added_data_files', 'BIGINT'],
  ['added_delete_files', 'BIGINT'],
  ['tiering_epoch', 'BIGINT'],
  ['bucket_offsets', 'VARCHAR'],
  ['is_current', 'BOOLEAN'],
] as const;

/** The columns of `table$lake$files`, in order, with their DuckDB types. */
export const LAKE_FILE_COLUMNS = [
  ['file_path', 'VARCHAR'],
  ['content', 'VARCHAR'],
  ['partition', 'VARCHAR'],
  ['record_count', 'BIGINT'],
  ['file_size_in_bytes', 'BIGINT'],
  ['data_sequence_number', 'BIGINT'],
  ['added_snapshot_id', 'BIGINT'],
] as const;

/** A lake table as loaded: a fixed version of it. */
export interface LakeTable extends LakeCommitter {
  readonly path: TablePath;
  /** Differs between any two versions of the table, and between a table and a re-created namesake: what caches key on. */
  readonly version: string;
  /** The Tributary table it belongs to (TABLE_ID_PROPERTY), if any. */
  readonly tableId?: number;
  /** The current schema's columns, system columns included. */
  readonly columns: readonly LakeColumn[];
  /** The newest snapshot tiering of table `tableId` committed in the current history, with its offsets. */
  tieredSnapshot(tableId: number): TieredSnapshot | undefined;
  /** A writer of one round's files for table `info`, in the current schema and partitioning. */
  newWriter(info: TableInfo): LakeWriter;
  /** The snapshot a time-travel read at `epochMicros` reads: the last to become current at or before then; LAKE_SNAPSHOT_NOT_EXIST when none. */
  snapshotAt(epochMicros: bigint): bigint;
  /**
   * Plans the read of snapshot `snapshotId` (in its own schema, or the current one with
   * `currentSchema`), or of the current snapshot; LAKE_SNAPSHOT_NOT_EXIST for one not in the table.
   */
  planRead(snapshotId?: bigint, options?: { currentSchema?: boolean }): Promise<LakeReadPlan>;
  /**
   * Plans snapshot `snapshotId` for reading its buckets' rows of table `info`, presented in
   * `schema` (columns by name; one the lake lacks is null, the system columns are left out).
   */
  snapshotReader(snapshotId: bigint, info: TableInfo, schema: () => arrow.Schema): Promise<LakeSnapshotReader>;
  /** DuckDB SQL whose result is one row per snapshot (LAKE_SNAPSHOT_COLUMNS), oldest first. */
  snapshotsSql(): string;
  /** DuckDB SQL whose result is one row per live data or delete file of a snapshot (LAKE_FILE_COLUMNS), the current one by default. */
  filesSql(snapshotId?: bigint): Promise<string>;
}

export interface ExpireOptions {
  /** Snapshots older than this (ms since epoch) may expire. */
  olderThanMs?: number;
  /** Snapshots of each branch kept whatever their age, the newest included. */
  retainLast?: number;
}

/** The result of a snapshot expiry. */
export interface ExpiredSnapshots {
  expiredSnapshotIds: bigint[];
  deletedFiles: string[];
}

/**
 * The Iceberg REST catalog protocol over the lake tables (server/http/iceberg-catalog-routes.ts),
 * for formats that can describe their tables in it.
 */
export interface LakeRestCatalog {
  /** The lake table's REST document, or undefined when there is no such table. */
  loadTable(path: TablePath): Promise<LakeRestTable | undefined>;
}

export interface LakeRestTable {
  /** The Tributary table it belongs to, if any. */
  tableId?: number;
  /** Differs between any two versions of the table (and between a table and its re-created namesake). */
  version: string;
  /** The LoadTableResult JSON text of this version. */
  document(): Promise<string>;
}

/**
 * A session of the SQL engine that a format's compaction rewrites files with (DuckDB,
 * query/duckdb): the query layer sits above the lake, so the caller hands it in.
 */
export interface LakeSqlSession {
  run(sql: string): Promise<{ rows: unknown[][] }>;
  close(): void;
}

/** Starts a session, once a rewrite needs one. */
export type LakeSqlEngine = () => Promise<LakeSqlSession>;

export interface LakeCompactionOptions {
  /** The partitions to consider (as a round's LakeWriteResult names them); every partition by default. */
  partitions?: readonly LakePartition[];
  /** Only partitions holding at least this many delete files; either way only one with a delete file or more than one data file. */
  minDeleteFiles?: number;
  /** Told the rows written so far after each partition is rewritten. */
  onProgress?: (rowsWritten: number) => void;
}

/** A partition compaction rewrote: its files went, one file without deleted rows took their place. */
export interface LakeCompactedPartition {
  /** As partition paths show it, e.g. `k=a/__bucket=0`; empty for an unpartitioned table. */
  name: string;
  removedDataFiles: number;
  removedDeleteFiles: number;
  /** The new data file; none when no row was left. */
  added?: { path: string; recordCount: number };
}

/** The lake of one warehouse in one format. */
export interface LakeStorage extends LakeCatalog {
  readonly format: string;
  /** The lake table at `path` as it is now (`known`, loaded before, while it still is); TABLE_NOT_EXIST when there is none. */
  loadTable(path: TablePath, known?: LakeTable): Promise<LakeTable>;
  /** Expires old snapshots, deleting the files only they reached; the defaults are the lake table's own retention properties. */
  expireSnapshots(path: TablePath, options?: ExpireOptions): Promise<ExpiredSnapshots>;
  /**
   * Rewrites each chosen partition's data files into one without the rows its delete files
   * remove, in one snapshot that changes no row and keeps the tiered offsets; undefined (no
   * commit) when no partition needs it.
   */
  compact(path: TablePath, sql: LakeSqlEngine, options?: LakeCompactionOptions): Promise<{ snapshotId: bigint; partitions: LakeCompactedPartition[] } | undefined>;
  /** Deletes files under the table's location that no metadata reaches, last changed before `olderThanMs` (ms since epoch; default 3 days ago). */
  removeOrphanFiles(path: TablePath, options?: { olderThanMs?: number }): Promise<{ deletedFiles: string[] }>;
  readonly restCatalog?: LakeRestCatalog;
}

/** A lake format. */
export interface LakeFormat {
  /** Its `datalake.format` name. */
  readonly name: string;
  open(warehouse: string): LakeStorage;
  /** Stops what its writers hold (threads); storages opened from it write no more. */
  close(): Promise<void>;
}

/** What a format's writers may use. */
export interface LakeFormatOptions {
  /** Threads that encode data files (a tiering worker's `--writer-threads`); 1 by default. */
  writerThreads?: number;
}
