/**
 * Union read (DESIGN.md §6): a lake-enabled table as one relation over the lake snapshot S that
 * the coordinator registered and the log after it, created in DuckDB as view `<db>.<table>`:
 *
 *   log table          SELECT <columns> FROM (<rows of S>) AS l
 *                      UNION ALL SELECT <columns> FROM tail
 *   primary-key table  SELECT <columns> FROM (<rows of S>) AS l
 *                        ANTI JOIN tail AS c ON c.<key> = l.<key> AND ...
 *                      UNION ALL SELECT <columns> FROM tail WHERE "$change_type" <> 'delete'
 *
 *   <rows of S>   the lake format's SQL of S's data files (deletes applied, LakeReadPlan), read by
 *                 DuckDB when the query runs, so its filters reach the Parquet scan; files pruned
 *                 first by the query's column filters (lake-pruning.ts). Columns resolve by field
 *                 id in the lake's current schema; a column the lake lacks is NULL, and lake columns whose
 *                 DuckDB type differs from the table's (TINYINT, SMALLINT) are cast back.
 *   tail          table `__union_tail."<db>.<table>#<n>"`: per bucket, the log from O_b (S's end
 *                 offset of the bucket; the log start for a bucket S does not hold) to the high
 *                 watermark, server-projected. For a primary-key table, the changelog folded to
 *                 each key's last change, -U left out: +I/+U hold the key's row, -D deletes it, and
 *                 either replaces the key's lake row (for equal keys the log wins). The session
 *                 keeps tails (read-cache.ts): the next read of the same columns and partitions
 *                 fetches what the log gained since, each bucket up to the high watermark its
 *                 fetch reports, while it asks whether S is still the registered snapshot; if so it
 *                 appends those rows (and folds again) and finds the view as it left it, else it
 *                 reads as the first time.
 *
 * S and every O_b come from one GetLakeSnapshot call, and S stays readable when newer snapshots
 * are committed, so the view is exact at any moment, also while a tiering round commits. A log
 * start beyond O_b means a newer snapshot let retention delete [O_b, log start): when the
 * registered snapshot has changed meanwhile (or a fetch finds the offset gone) the read starts
 * over with the new one. Otherwise those rows never reached the lake: a log table reads from the
 * log start; a primary-key table is not union-read (the caller reads its KV state), nor is one
 * with a bucket S does not hold whose log no longer starts at 0.
 *
 * Only the partitions whose partition values may pass the query's filters are read from the log.
 * The same tail read and fold serve the startup modes other than `full` (the log alone), and the
 * lake's own tables `t$lake` (a view of <rows of S> for S the current, a chosen or a time-travel
 * snapshot) and `t$lake$files`.
 */
import * as arrow from 'apache-arrow';
import type { OffsetSpec } from '../client/admin.js';
import type { Connection } from '../client/connection.js';
import type { Table } from '../client/table.js';
import { TributaryError } from '../common/errors.js';
import { LAKE_SYSTEM_COLUMNS, type LakeSnapshot, lakeBucketKey } from '../common/lake.js';
import { type PartitionInfo, type TableInfo, tablePathString } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import type { LakeReadPlan, LakeStorage, LakeTable } from '../lake/lake-format.js';

import { toArrowSchema } from '../record/arrow-schema.js';
import type { ColumnFilter } from './duckdb/query-shapes.js';
import { type DuckSession, relationSql } from './duckdb/session.js';
import { duckTypeName } from './duckdb/type-name.js';
import { lakePartFilter, pruneLakeSplits, prunePartitions } from './lake-pruning.js';
import { type BucketRange, bucketKey, bucketRanges, type BucketStart, type LogRange, readChangelogUpToHighWatermark, readLogRanges } from './log-reader.js';
import type { LoadedTail, ReadCache } from './read-cache.js';
import type { ScanOptions } from './scan-options.js';

const [BUCKET_COLUMN, OFFSET_COLUMN, TIMESTAMP_COLUMN] = LAKE_SYSTEM_COLUMNS;

/** Reads that start over after racing retention and newer lake snapshots, at most. */
const MAX_ATTEMPTS = 5;
const TAIL_SCHEMA = '__union_tail';
/** Names of the changelog columns in the tail: `$` cannot occur in a column name, so no clash. */
const CHANGE_TYPE = '$change_type';
const TAIL_META = [CHANGE_TYPE, '$log_offset', '$commit_timestamp'];

const quote = (name: string): string => `"${name.replaceAll('"', '""')}"`;

/** A table a query reads, and how. */
export interface TableRead {
  conn: Connection;
  duck: DuckSession;
  table: Table;
  /** The DuckDB name to create, `<database>.<table>`. */
  name: string;
  /** The table's columns the query may use. */
  columns: string[];
  /** The query's filters on the table's columns (duckdb/query-shapes.ts), for pruning. */
  filters: ColumnFilter[];
  /** What the session keeps between reads. */
  cache: ReadCache;
  /** A catch-up of the kept tail started before the table's metadata arrived (startCatchUp), if any. */
  speculated?: Promise<CatchUp | undefined>;
}

/** What a union read reads: the lake snapshot, its data files read and pruned, the log range of each bucket. */
export interface UnionReadPlan {
  snapshotId: bigint;
  filesRead: number;
  filesPruned: number;
  log: LogRange[];
}

/**
 * Creates the union read of a lake-enabled table (see the header) as view `read.name`, and says
 * what it reads; undefined, creating nothing, when the table has no lake snapshot yet or a
 * primary-key table's log alone no longer tells its state (the caller then reads the table as
 * without a lake).
 */
export async function loadUnionRead(read: TableRead, lake: LakeStorage): Promise<UnionReadPlan | undefined> {
  const { conn, table } = read;
  const info = table.info;
  const admin = conn.getAdmin();
  const columns = withPrimaryKey(info, read.columns);
  const partitions = await partitionsToRead(read);
  const tailKey = tailKeyOf(read.name, columns, partitions);
  // A version of the lake table that holds the registered snapshot (ReadCache.lakeTable).
  const lakeTable = (registered: bigint) => read.cache.lakeTable(lake, info, registered);
  // The tail kept for the read says what the log side holds.
  const planOf = (files: { filesRead: number; filesPruned: number }): UnionReadPlan => {
    const kept = read.cache.tail(tailKey)!;
    return { snapshotId: kept.snapshotId, ...files, log: kept.ranges.map((r) => ({ bucket: bucketKey(r), from: r.start, to: kept.ends.get(bucketKey(r)) ?? r.start })) };
  };
  const caughtUp = await caughtUpTail(read, columns, tailKey, lakeTable);
  if (caughtUp) return planOf(await createUnionView(read, columns, caughtUp.tail, caughtUp.lake));
  for (let attempt = 1; ; attempt++) {
    const last = attempt === MAX_ATTEMPTS;
    // The offsets are listed while the snapshot is asked for: the snapshot's own offsets bound what the lake holds, whatever the order.
    const listed = bucketRanges(conn, table, partitions ? { partitions } : {});
    listed.catch(() => undefined);
    let snapshot: LakeSnapshot;
    try {
      snapshot = await admin.getLakeSnapshot(info.path);
    } catch (err) {
      if (err instanceof TributaryError && err.errorName === 'LAKE_SNAPSHOT_NOT_EXIST') return undefined;
      throw err;
    }
    // The lake side is planned while the log side is read.
    const planned = planLake(read.cache, lakeTable(snapshot.snapshotId), snapshot.snapshotId);
    planned.catch(() => undefined); // awaited below, or dropped when the read starts over
    const lakeEnds = new Map(snapshot.bucketOffsets.map((o) => [lakeBucketKey(o), o.endOffset]));
    const ranges = (await listed).map((r) => ({ ...r, lakeEnd: lakeEnds.get(lakeBucketKey({ ...(r.partition ? { partitionId: r.partition.partitionId } : {}), bucket: r.bucket })) }));
    const expired = ranges.some((r) => r.lakeEnd !== undefined && r.lakeEnd < r.logStart);
    if (expired && !last && (await admin.getLakeSnapshot(info.path)).snapshotId !== snapshot.snapshotId) continue;
    if (info.schema.primaryKey && (expired || ranges.some((r) => r.lakeEnd === undefined && r.logStart > 0n))) return undefined;
    let tail: string;
    let lake: LakeReadPlan;
    try {
      const starts = ranges.map((r) => ({ ...r, start: r.lakeEnd !== undefined && r.lakeEnd > r.logStart ? r.lakeEnd : r.logStart }));
      tail = await loadWholeTail(read, columns, tailKey, starts, snapshot.snapshotId);
      lake = await planned;
    } catch (err) {
      // Deleted by retention after a newer lake snapshot, or the snapshot expired by lake
      // maintenance since it was registered: a newer one is registered now.
      const retry = err instanceof TributaryError && (err.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION' || err.errorName === 'LAKE_SNAPSHOT_NOT_EXIST');
      if (retry && !last) continue;
      throw err;
    }
    return planOf(await createUnionView(read, columns, tail, lake));
  }
}

/**
 * Starts catching up the tail that the last union read of `read.name` kept, with `read.table` the
 * table as that read saw it: run while the table's current metadata is asked for, it saves a
 * round trip, and loadUnionRead uses it only if the table turns out unchanged. Undefined for a
 * partitioned table (its partitions are listed first).
 */
export function startCatchUp(read: TableRead): Promise<CatchUp | undefined> | undefined {
  const { info } = read.table;
  if (info.partitionKeys.length > 0) return undefined;
  const columns = withPrimaryKey(info, read.columns);
  const started = catchUp(read, columns, tailKeyOf(read.name, columns, undefined));
  started.catch(() => undefined); // awaited by loadUnionRead, or dropped
  return started;
}

/** The key of a union read's tail (read-cache.ts): the relation, its columns and the partitions read. */
function tailKeyOf(name: string, columns: readonly string[], partitions: readonly PartitionInfo[] | undefined): string {
  return [name, columns.join(','), ...(partitions ?? []).map((p) => p.partitionId)].join('|');
}

/**
 * Creates the union view `read.name` over the lake plan's rows and the tail table `tail` (see the
 * header), and remembers the table it reads, for the next read's early catch-up (startCatchUp).
 * Returns how many of the snapshot's data files it reads and how many the filters pruned.
 */
async function createUnionView(read: TableRead, columns: string[], tail: string, lake: LakeReadPlan): Promise<{ filesRead: number; filesPruned: number }> {
  const { sql: lakeSql, filesRead } = await lakeRows(read, lake, columns);
  const cols = columns.map(quote).join(', ');
  const t = relationSql(tail);
  const key = read.table.info.schema.primaryKey;
  const sql = key
    ? `${lakeSql} ANTI JOIN ${t} AS c ON ${key.map((k) => `c.${quote(k)} = l.${quote(k)}`).join(' AND ')}\n` +
      `UNION ALL SELECT ${cols} FROM ${t} WHERE ${quote(CHANGE_TYPE)} <> 'delete'`
    : `${lakeSql}\nUNION ALL SELECT ${cols} FROM ${t}`;
  await read.duck.createView(read.name, sql);
  read.cache.rememberUnionRead(read.name, read.table);
  return { filesRead, filesPruned: lake.splits.length - filesRead };
}

/**
 * Creates table `read.name` from the log alone, from `from` to the high watermark (the startup
 * modes other than full): a log table's rows; a primary-key table's changes folded by key.
 */
export async function loadLogFrom(read: TableRead, from: OffsetSpec): Promise<void> {
  const { table, name, duck } = read;
  const partitions = await partitionsToRead(read);
  const key = table.info.schema.primaryKey;
  const columns = key ? withPrimaryKey(table.info, read.columns) : read.columns;
  let tail: Tail;
  for (let attempt = 1; ; attempt++) {
    const ranges = await bucketRanges(read.conn, table, { ...(partitions ? { partitions } : {}), from });
    try {
      tail = await readTail(read, columns, ranges);
      break;
    } catch (err) {
      // Retention moved the log start past where the read began: begin again from where it is now.
      const moved = err instanceof TributaryError && err.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION';
      if (!moved || attempt === MAX_ATTEMPTS) throw err;
    }
  }
  if (!key) {
    await loadTail(read, [name], tail);
    return;
  }
  const tables = tailTables(read, `${TAIL_SCHEMA}.${name}`);
  await loadTail(read, tables, tail);
  await duck.createTableAs(name, `AS SELECT ${columns.map(quote).join(', ')} FROM ${relationSql(tables[0])} WHERE ${quote(CHANGE_TYPE)} <> 'delete'`);
  await duck.dropTable(tables[1]);
}

/** The lake snapshot a read of `t$lake` or `t$lake$files` reads: chosen by id or by time, else the current one (undefined). */
async function chosenLakeSnapshot(duck: DuckSession, table: LakeTable, options: ScanOptions): Promise<bigint | undefined> {
  if (options.snapshotId !== undefined) return options.snapshotId;
  if (options.asOf === undefined) return undefined;
  const result = await duck.run(`SELECT epoch_us(CAST((${options.asOf}) AS TIMESTAMPTZ))`);
  const micros = result.rows[0]?.[0];
  if (typeof micros !== 'bigint') throw new TributaryError('INVALID_ARGUMENT', `FOR SYSTEM_TIME AS OF needs a timestamp, not NULL`);
  return table.snapshotAt(micros);
}

/**
 * Creates `t$lake` as view `name`: the rows of a lake snapshot (current by default), `columns` of
 * its schema (all for '*'), with data files pruned by `filters` on its column names.
 */
export async function loadLakeRows(cache: ReadCache, duck: DuckSession, lake: LakeStorage, info: TableInfo, name: string, columns: Iterable<string> | '*', filters: readonly ColumnFilter[], options: ScanOptions): Promise<void> {
  const table = await cache.lakeTable(lake, info);
  const plan = await cache.lakePlan(table, await chosenLakeSnapshot(duck, table, options));
  const splits = await pruneLakeSplits(duck, plan.columns, plan.splits, filters);
  await duck.createView(name, await plan.rowsSql(splits, columns === '*' ? undefined : columns, lakePartFilter(duck, plan.columns, filters)));
}

/** Creates `t$lake$files` as table `name`: the live files of a lake snapshot (current by default). */
export async function loadLakeFiles(cache: ReadCache, duck: DuckSession, lake: LakeStorage, info: TableInfo, name: string, options: ScanOptions): Promise<void> {
  const table = await cache.lakeTable(lake, info);
  await duck.createTableAs(name, `AS ${await table.filesSql(await chosenLakeSnapshot(duck, table, options))}`);
}

/** The columns of `t$lake` with their types, for its column filters: the table's, then the lake's system columns. */
export function lakeColumns(info: TableInfo): { name: string; type: DataType }[] {
  return [...info.schema.columns, { name: BUCKET_COLUMN, type: { kind: 'INT' } }, { name: OFFSET_COLUMN, type: { kind: 'BIGINT' } }, { name: TIMESTAMP_COLUMN, type: { kind: 'TIMESTAMP_LTZ', precision: 6 } }];
}

/** `columns` with a primary-key table's key columns added, in the table's column order. */
function withPrimaryKey(info: TableInfo, columns: readonly string[]): string[] {
  const key = info.schema.primaryKey ?? [];
  return info.schema.columns.map((c) => c.name).filter((c) => columns.includes(c) || key.includes(c));
}

/** The partitions of a partitioned table that the filters leave; undefined for a table without partitions. */
async function partitionsToRead(read: TableRead): Promise<PartitionInfo[] | undefined> {
  const info = read.table.info;
  if (info.partitionKeys.length === 0) return undefined;
  return prunePartitions(read.duck, info, await read.conn.getAdmin().listPartitionInfos(info.path), read.filters);
}

/** Log rows read for a tail: `columns`, and for a primary-key table the changelog columns in front. */
export interface Tail {
  columns: string[];
  schema: arrow.Schema;
  batches: arrow.RecordBatch[];
  /** Where each bucket's rows end, by bucketKey. */
  ends: Map<string, bigint>;
}

/** Reads `ranges` of the log: a log table's rows of `columns`; a primary-key table's changelog (see the header). */
async function readTail(read: TableRead, columns: string[], ranges: readonly (BucketRange | BucketStart)[]): Promise<Tail> {
  const { conn, table } = read;
  const schema = table.info.schema;
  if (!schema.primaryKey) {
    const projected = columns.map((c) => schema.columns.findIndex((x) => x.name === c));
    return { columns, schema: toArrowSchema(schema, projected), ...(await readLogRanges(conn, table, columns, ranges)) };
  }
  const changelog = await readChangelogUpToHighWatermark(conn, table, columns, ranges);
  const renamed = new arrow.Schema(changelog.schema.fields.map((f, i) => (i < TAIL_META.length ? f.clone({ name: TAIL_META[i] }) : f)));
  return { columns, schema: renamed, batches: changelog.batches, ends: changelog.ends };
}

/** The rows the log gained after a kept tail, and the lake snapshot registered meanwhile: read side by side, nothing changed yet. */
export interface CatchUp {
  key: string;
  kept: LoadedTail;
  tail: Tail;
  /** The registered snapshot; undefined when it could not be read. */
  snapshotId: bigint | undefined;
}

/**
 * Fetches the log after the tail kept for `key`, each bucket up to the high watermark its fetch
 * reports, while asking for the registered lake snapshot, so no offsets are listed first.
 * Undefined when there is no such tail, or the log no longer holds where it ends.
 */
async function catchUp(read: TableRead, columns: string[], key: string): Promise<CatchUp | undefined> {
  const { info } = read.table;
  const kept = read.cache.tail(key);
  if (!kept || kept.tableId !== info.tableId || kept.schemaId !== info.schemaId) return undefined;
  const snapshot = read.conn.getAdmin().getLakeSnapshot(info.path);
  snapshot.catch(() => undefined);
  let tail: Tail;
  try {
    tail = await readTail(read, columns, kept.ranges.map((r) => ({ ...r, start: kept.ends.get(bucketKey(r))! })));
  } catch (err) {
    if (err instanceof TributaryError && err.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION') return undefined;
    throw err;
  }
  return { key, kept, tail, snapshotId: (await snapshot.catch(() => undefined))?.snapshotId };
}

/**
 * The tail the session kept for `key`, caught up with the log (catchUp, or the read's speculated
 * one when it was made for the same tail and table version), when the registered lake snapshot is
 * still the one it was read for. Undefined, nothing changed, otherwise.
 */
async function caughtUpTail(read: TableRead, columns: string[], key: string, lakeTable: (registered: bigint) => Promise<LakeTable>): Promise<{ tail: string; lake: LakeReadPlan } | undefined> {
  const { info } = read.table;
  let caught = await read.speculated?.catch(() => undefined);
  const current = caught && caught.key === key && caught.kept === read.cache.tail(key) && caught.kept.tableId === info.tableId && caught.kept.schemaId === info.schemaId;
  if (!current) caught = await catchUp(read, columns, key);
  if (!caught || caught.snapshotId !== caught.kept.snapshotId) return undefined;
  const planned = planLake(read.cache, lakeTable(caught.kept.snapshotId), caught.kept.snapshotId);
  planned.catch(() => undefined);
  await appendTail(read, key, caught.kept, caught.tail);
  return { tail: caught.kept.tables[0], lake: await planned };
}

/**
 * Loads the tail of `ranges` for a union read of lake snapshot `snapshotId`, keeps it for `key`
 * (in the tables of the tail kept before, if any) and returns the table that reads use.
 */
async function loadWholeTail(read: TableRead, columns: string[], key: string, ranges: readonly BucketRange[], snapshotId: bigint): Promise<string> {
  const { info } = read.table;
  const { cache } = read;
  const kept = cache.tail(key);
  const tables = tailTables(read, kept?.tables[0] ?? cache.tailTableName(TAIL_SCHEMA, read.name));
  const tail = await readTail(read, columns, ranges);
  try {
    await loadTail(read, tables, tail);
  } catch (err) {
    await cache.forgetTail(key);
    for (const table of tables) await read.duck.dropTable(table);
    throw err;
  }
  const starts = ranges.map((r): BucketStart => ({ ...(r.partition ? { partition: r.partition } : {}), bucket: r.bucket, start: r.start }));
  await cache.keepTail(key, { tables, tableId: info.tableId, schemaId: info.schemaId, snapshotId, ranges: starts, ends: tail.ends });
  return tables[0];
}

/** Appends rows read after the kept tail of `key` to it; a tail that fails to take them is forgotten. */
async function appendTail(read: TableRead, key: string, kept: LoadedTail, tail: Tail): Promise<void> {
  if (tail.batches.length > 0) {
    try {
      await loadTail(read, kept.tables, tail, true);
    } catch (err) {
      await read.cache.forgetTail(key);
      throw err;
    }
  }
  await read.cache.keepTail(key, { ...kept, ends: tail.ends });
}

/** The tables of a tail that reads find as `name`: a log table's rows in it; a primary-key table's changes in `<name>$changes`, folded into it. */
function tailTables(read: TableRead, name: string): string[] {
  return read.table.info.schema.primaryKey ? [name, `${name}$changes`] : [name];
}

/**
 * Loads a tail into its tables (tailTables), or appends it to them; a primary-key table's
 * changelog is folded by key again (see the header), with its change type.
 */
async function loadTail(read: TableRead, tables: readonly string[], tail: Tail, append = false): Promise<void> {
  const { duck, table } = read;
  const key = table.info.schema.primaryKey;
  const [name, changes] = tables;
  const target = key ? changes : name;
  if (append) await duck.appendArrowRows(target, tail.schema, tail.batches);
  else await duck.loadArrowTable(target, tail.schema, tail.batches);
  if (!key) return;
  await duck.createTableAs(
    name,
    `AS SELECT ${[...tail.columns, CHANGE_TYPE].map(quote).join(', ')} FROM ${relationSql(changes)} ` +
      `WHERE ${quote(CHANGE_TYPE)} <> 'update_before' QUALIFY row_number() OVER (PARTITION BY ${key.map(quote).join(', ')} ORDER BY ${quote(TAIL_META[1])} DESC) = 1`,
  );
}

/** The read of lake snapshot `snapshotId`, in the lake table's current schema. */
async function planLake(cache: ReadCache, loaded: Promise<LakeTable>, snapshotId: bigint): Promise<LakeReadPlan> {
  return cache.lakePlan(await loaded, snapshotId, { currentSchema: true });
}

/** `SELECT <columns> FROM (<rows of the snapshot>) AS l` (see the header), files pruned by the read's filters. */
async function lakeRows(read: TableRead, lake: LakeReadPlan, columns: readonly string[]): Promise<{ sql: string; filesRead: number }> {
  const info = read.table.info;
  const splits = await pruneLakeSplits(read.duck, lake.columns, lake.splits, read.filters);
  const select = columns.map((c) => {
    const type = duckTypeName(info.schema.columns.find((x) => x.name === c)!.type);
    const column = lake.columns.find((f) => f.name === c);
    if (!column) return `CAST(NULL AS ${type}) AS ${quote(c)}`;
    return duckTypeName(column.type).replaceAll(' ', '') === type.replaceAll(' ', '') ? `l.${quote(c)}` : `CAST(l.${quote(c)} AS ${type}) AS ${quote(c)}`;
  });
  return { sql: `SELECT ${select.join(', ')} FROM (${await lake.rowsSql(splits, columns, lakePartFilter(read.duck, lake.columns, read.filters))}) AS l`, filesRead: splits.length };
}
