/**
 * One tiering round of one table (DESIGN.md §5):
 *
 *  1. Where the lake stands: the newest snapshot this table's tiering committed, found by its
 *     summary (tiered-offsets.ts). If the coordinator has not registered it (the previous worker died
 *     between the lake commit and the report), it is registered now and the round starts after it.
 *  2. Plan: one split per bucket (per partition), [lake end offset, high watermark), with the stop
 *     offsets frozen now. The first round of a primary-key bucket whose changelog no longer starts
 *     at offset 0 (retention dropped what its KV snapshots hold, before the table was lake-enabled)
 *     starts from the bucket's state instead: a consistent scan of it, as of offset S, folded like
 *     changes at offset S - 1, then the changelog from S.
 *  3. Read the splits with a LogScanner. Log tables: batches become lake batches (system columns
 *     added, columns shared), appended every `CHUNK_BYTES` to the split's Parquet data file, which
 *     a thread of the writer pool encodes while the next chunk is read; after `FILE_ROWS` rows the
 *     file ends and the split's next rows start another. Primary-key tables: the changelog is
 *     folded per key — the last +I/+U of a key becomes a data row, and a key that existed before
 *     the round (its first change is not +I) gets an equality delete on the primary key, which
 *     removes its older lake rows (deletes apply to files of earlier sequence numbers only, so
 *     this round's rows survive).
 *  4. Commit one Iceberg snapshot whose summary carries the offsets, checking at every attempt that
 *     the lake still ends where the round started (no other worker tiered these offsets meanwhile).
 *     Its manifests are written while the data files sync; its table version waits for them.
 *  5. Register the snapshot with the coordinator (CommitLakeTableSnapshot).
 *  6. Maintain the lake by the table's options: compaction (compaction.ts) and snapshot expiry.
 *
 * A round that runs past the table's freshness stops reading at a batch boundary and commits what
 * it has (force-finished); the rest is the next round's.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import * as arrow from 'apache-arrow';
import type { Admin } from '../client/admin.js';
import type { Connection } from '../client/connection.js';
import type { BucketRef, ScanBatch } from '../client/log-scanner.js';
import { CHANGE_TYPE_BYTE } from '../common/change-type.js';
import { parseDuration, tableOption } from '../common/config.js';
import { asTributaryError, TributaryError } from '../common/errors.js';
import { type LakeBucketOffset, lakeBucketKey } from '../common/lake.js';
import { buildSchema, type PartitionInfo, type Schema, type TableInfo, type TablePath, tablePathString } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import { type Row, toInternal } from '../common/values.js';
import { internalRowReader } from '../record/arrow-payload.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { toPbLakeOffset } from '../rpc/lake-offsets.js';
import type { Logger } from '../common/logger.js';
import { FileSystemCatalog } from '../lake/iceberg/catalog.js';
import { type DataFile, FileContent, type PartitionValue } from '../lake/iceberg/data-file.js';
import type { DataFileWriterPool, OpenDataFile } from '../lake/iceberg/data-file-writer.js';
import { expireSnapshots } from '../lake/iceberg/maintenance.js';
import { commitRowDelta } from '../lake/iceberg/snapshot-producer.js';
import { ancestorsOf, currentSchema, partitionSpecById, type TableMetadata } from '../lake/iceberg/table-metadata.js';
import { parseTransform } from '../lake/iceberg/transforms.js';
import type { IcebergSchema } from '../lake/iceberg/types.js';
import { consecutiveOffsets, toLakeBatch } from '../lake/iceberg/lake-batch.js';
import { TABLE_ID_PROPERTY } from '../lake/lake-format.js';
import { BUCKET_COLUMN } from '../lake/iceberg/table-shape.js';
import { COMPACT_AT_DELETE_FILES, compactLakeTable } from './compaction.js';
import { bucketOffsetsSummary, latestTieredSnapshot, SUMMARY_BUCKET_OFFSETS, SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH, type TieredSnapshot } from '../lake/tiered-offsets.js';

/**
 * Rows per data file of a log table bucket; a bucket with more in one round gets several files.
 * A file's rows are encoded as they arrive (the writer holds a row group, not the file), so the
 * bound is there for readers: files of tens to hundreds of MB, several row groups each.
 */
export const FILE_ROWS = 8_000_000;
/**
 * Lake batches of a split collected before they go to its data file as one Arrow IPC stream: large
 * enough that messages to the writer thread cost nothing, small enough that reading and encoding
 * overlap from the first rows on. While the writer encodes one chunk of a file, the next is read.
 */
const CHUNK_BYTES = 2 << 20;
const PROGRESS_EVERY_MS = 10_000;

export interface RoundContext {
  conn: Connection;
  tableId: number;
  path: TablePath;
  epoch: bigint;
  warehouse: string;
  pool: DataFileWriterPool;
  /** Aborted when the coordinator fences this round's epoch. */
  signal: AbortSignal;
  log: Logger;
  /** Called between the lake commit and the report to the coordinator: the window a crash leaves a snapshot unregistered. */
  onLakeCommitted?(snapshotId: bigint): void | Promise<void>;
}

export interface RoundResult {
  forceFinished: boolean;
  snapshotId?: bigint;
  rows: number;
  dataFiles: number;
  deleteFiles: number;
}

/** One bucket's part of the round. */
interface Split {
  partition?: PartitionInfo;
  bucket: number;
  ref: BucketRef;
  start: bigint;
  stop: bigint;
  /** First offset not read yet. */
  position: bigint;
  maxTimestamp?: number;
  /** Values of the partition keys (transform source form), from the first row read. */
  partitionSource?: Map<string, PartitionValue>;
  /** Log tables: lake batches not sent to the data file yet, and their bytes. */
  pendingBatches: arrow.RecordBatch[];
  pendingBytes: number;
  /** Log tables: the data file being written. */
  file?: SplitFile;
  /** Primary-key tables: the changelog folded per key. */
  changes?: Map<string, FoldedChange>;
  /** Primary-key tables: the bucket's state is read first (see the header, step 2). */
  fromState?: boolean;
}

interface SplitFile {
  sink: OpenDataFile;
  partition: PartitionValue[];
  /** Rows sent to it so far. */
  rows: number;
  /** The chunk the writer is encoding. */
  appending?: Promise<void>;
}

interface FoldedChange {
  /** The key existed before this round: its older lake rows must be deleted. */
  existed: boolean;
  /** Primary key values, in key order. */
  key: unknown[];
  /** The key's latest row (internal values) with its offset and timestamp; undefined when deleted. */
  row?: unknown[];
  offset: bigint;
  timestampMs: number;
}

export async function runTieringRound(ctx: RoundContext): Promise<RoundResult> {
  const admin = ctx.conn.getAdmin();
  const info = await admin.getTableInfo(ctx.path);
  if (info.tableId !== ctx.tableId) {
    throw new TributaryError('TABLE_NOT_EXIST', `table ${tablePathString(ctx.path)} was re-created (id ${info.tableId}, tiering ${ctx.tableId})`);
  }
  // The connection's reads (offsets, scans) go by its cached table: one of a dropped namesake must not answer for this one.
  if (ctx.conn.metadata.cachedTable(ctx.path)?.tableId !== info.tableId) ctx.conn.metadata.invalidate(ctx.path);
  const deadline = Date.now() + parseDuration(tableOption(info.properties, 'table.datalake.freshness')!)!;
  const catalog = new FileSystemCatalog(ctx.warehouse);
  const loaded = await catalog.loadTable(info.path.database, info.path.table);
  const tiered = latestTieredSnapshot(ancestorsOf(loaded.metadata, loaded.metadata.currentSnapshotId), info.tableId);
  await registerIfMissing(ctx, admin, tiered);

  const splits = await planSplits(ctx, admin, info, tiered);
  if (splits.length === 0) return { forceFinished: false, rows: 0, dataFiles: 0, deleteFiles: 0 };
  ctx.log.info({ splits: splits.length, records: splits.reduce((n, s) => n + Number(s.stop - s.start), 0) }, 'tiering round planned');

  const writer = new RoundWriter(ctx, info, loaded.metadata);
  let forceFinished: boolean;
  let written: DataFile[];
  try {
    await readStates(ctx, info, splits, writer);
    forceFinished = await readSplits(ctx, info, splits, writer, deadline);
    for (const split of splits) await writer.flushSplit(split);
    written = await writer.files();
  } catch (err) {
    await writer.abort(splits);
    throw err;
  }

  const advanced = splits.filter((s) => s.position > s.start || s.fromState);
  if (advanced.length === 0) return { forceFinished, rows: 0, dataFiles: 0, deleteFiles: 0 };
  const offsets = mergeOffsets(tiered?.bucketOffsets ?? [], advanced);
  const snapshotId = await commitRowDelta(catalog, info.path.database, info.path.table, {
    dataFiles: written.filter((f) => f.content === FileContent.DATA),
    deleteFiles: written.filter((f) => f.content !== FileContent.DATA),
    summary: {
      [SUMMARY_TABLE_ID]: String(info.tableId),
      [SUMMARY_TIERING_EPOCH]: ctx.epoch.toString(),
      [SUMMARY_BUCKET_OFFSETS]: bucketOffsetsSummary(offsets),
    },
    addedFilesDurable: writer.durable(),
    base: loaded,
    validate: (current) => {
      ctx.signal.throwIfAborted();
      // Purged with its table and created anew for a namesake meanwhile: not this round's table.
      if (current.properties[TABLE_ID_PROPERTY] !== String(info.tableId)) {
        throw new TributaryError('TABLE_NOT_EXIST', `lake table ${tablePathString(info.path)} now belongs to another table (id ${current.properties[TABLE_ID_PROPERTY]})`);
      }
      const now = latestTieredSnapshot(ancestorsOf(current, current.currentSnapshotId), info.tableId);
      if (now?.snapshotId !== tiered?.snapshotId) {
        throw new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', `lake snapshot ${now?.snapshotId} of table ${tablePathString(info.path)} was committed by another tiering worker meanwhile`);
      }
    },
  });
  await ctx.onLakeCommitted?.(snapshotId);
  await commitToCoordinator(ctx, snapshotId, offsets);
  await maintainLake(ctx, catalog, info, written, offsets);
  const rows = written.reduce((n, f) => n + (f.content === FileContent.DATA ? f.recordCount : 0), 0);
  const deleteFiles = written.filter((f) => f.content !== FileContent.DATA).length;
  ctx.log.info({ snapshotId: snapshotId.toString(), rows, dataFiles: written.length - deleteFiles, deleteFiles, forceFinished }, 'tiering round committed');
  return { forceFinished, snapshotId, rows, dataFiles: written.length - deleteFiles, deleteFiles };
}

/**
 * Lake maintenance once the round is committed and registered: compacts the partitions the round
 * wrote to (all of them with table.datalake.auto-compaction, else those whose delete files piled
 * up) and registers the compacted snapshot, which holds the same offsets; then, with
 * table.datalake.auto-expire-snapshot, expires snapshots by the lake table's history.expire.*
 * properties. The round's rows are safe by now: a failure here is logged, never the round's.
 */
async function maintainLake(ctx: RoundContext, catalog: FileSystemCatalog, info: TableInfo, written: readonly DataFile[], offsets: readonly LakeBucketOffset[]): Promise<void> {
  const { database, table } = info.path;
  const enabled = (key: string) => tableOption(info.properties, key)?.toLowerCase() === 'true';
  try {
    const compacted = await compactLakeTable(catalog, database, table, {
      partitions: written.map((f) => f.partition),
      ...(enabled('table.datalake.auto-compaction') ? {} : { minDeleteFiles: COMPACT_AT_DELETE_FILES }),
    });
    if (compacted) {
      await commitToCoordinator(ctx, compacted.snapshotId, offsets);
      ctx.log.info({ snapshotId: compacted.snapshotId.toString(), partitions: compacted.partitions.length }, 'lake partitions compacted');
    }
  } catch (err) {
    const e = asTributaryError(err);
    // Lost to a concurrent commit: the next round's compaction starts over from it.
    const lost = e.errorName === 'COMMIT_FAILED' || e.errorName === 'FENCED_TIERING_EPOCH_EXCEPTION';
    ctx.log[lost ? 'info' : 'warn']({ err: e.toString() }, 'lake compaction did not complete; the round stays committed');
  }
  if (!enabled('table.datalake.auto-expire-snapshot')) return;
  try {
    const expired = await expireSnapshots(catalog, database, table);
    if (expired.expiredSnapshotIds.length > 0) ctx.log.info({ snapshots: expired.expiredSnapshotIds.length, files: expired.deletedFiles.length }, 'lake snapshots expired');
  } catch (err) {
    ctx.log.warn({ err: asTributaryError(err).toString() }, 'lake snapshot expiry failed; the round stays committed');
  }
}

async function registerIfMissing(ctx: RoundContext, admin: Admin, tiered: TieredSnapshot | undefined): Promise<void> {
  if (!tiered) return;
  let registered: bigint | undefined;
  try {
    registered = (await admin.getLakeSnapshot(ctx.path)).snapshotId;
  } catch (err) {
    if ((err as TributaryError).errorName !== 'LAKE_SNAPSHOT_NOT_EXIST') throw err;
  }
  if (registered === tiered.snapshotId) return;
  ctx.log.warn({ snapshotId: tiered.snapshotId.toString() }, 'lake snapshot committed but not registered (a worker died in between): registering it');
  await commitToCoordinator(ctx, tiered.snapshotId, tiered.bucketOffsets);
}

async function commitToCoordinator(ctx: RoundContext, snapshotId: bigint, offsets: readonly LakeBucketOffset[]): Promise<void> {
  const rpc = await ctx.conn.server();
  await rpc.request(ApiKeys.CommitLakeTableSnapshot, {
    tableId: BigInt(ctx.tableId),
    tieringEpoch: ctx.epoch,
    snapshotId,
    bucketOffsets: offsets.map(toPbLakeOffset),
  });
}

async function planSplits(ctx: RoundContext, admin: Admin, info: TableInfo, tiered: TieredSnapshot | undefined): Promise<Split[]> {
  const lakeEnds = new Map((tiered?.bucketOffsets ?? []).map((o) => [lakeBucketKey(o), o.endOffset]));
  const partitions: (PartitionInfo | undefined)[] = info.partitionKeys.length > 0 ? await admin.listPartitionInfos(info.path) : [undefined];
  const buckets = Array.from({ length: info.bucketCount }, (_, b) => b);
  const splits: Split[] = [];
  for (const partition of partitions) {
    const [earliest, latest] = await Promise.all([
      admin.listOffsets(info.path, buckets, 'earliest', partition?.partitionName),
      admin.listOffsets(info.path, buckets, 'latest', partition?.partitionName),
    ]);
    for (const bucket of buckets) {
      const lakeEnd = lakeEnds.get(lakeBucketKey({ ...(partition ? { partitionId: partition.partitionId } : {}), bucket }));
      const logStart = earliest.get(bucket)!;
      if (lakeEnd !== undefined && lakeEnd < logStart) {
        ctx.log.warn({ partition: partition?.partitionName, bucket, lakeEnd: lakeEnd.toString(), logStart: logStart.toString() }, 'log expired before it reached the lake; those rows are gone');
      }
      const start = lakeEnd === undefined || lakeEnd < logStart ? logStart : lakeEnd;
      const stop = latest.get(bucket)!;
      const fromState = info.schema.primaryKey !== undefined && lakeEnd === undefined && logStart > 0n;
      if (start >= stop && !fromState) continue;
      splits.push({
        ...(partition ? { partition } : {}),
        bucket,
        ref: partition ? { partition: partition.partitionName, bucket } : bucket,
        start,
        stop,
        position: start,
        pendingBatches: [],
        pendingBytes: 0,
        ...(info.schema.primaryKey ? { changes: new Map() } : {}),
        ...(fromState ? { fromState } : {}),
      });
    }
  }
  return splits;
}

/** Reads the state of the splits that start from it, bucket by bucket; their changelog then starts at the state's offset. */
async function readStates(ctx: RoundContext, info: TableInfo, splits: readonly Split[], writer: RoundWriter): Promise<void> {
  const fromState = splits.filter((s) => s.fromState);
  if (fromState.length === 0) return;
  const table = await ctx.conn.getTable(info.path);
  for (const split of fromState) {
    const scanner = table.newScan().createBatchScanner([split.ref]);
    const readAt = Date.now();
    let rows = 0;
    for (let page = await scanner.pollBatch(); page; page = await scanner.pollBatch()) {
      ctx.signal.throwIfAborted();
      rows += writer.addState(split, page, readAt);
    }
    const [stateOffset] = scanner.offsets().values();
    writer.stateRead(split, stateOffset);
    ctx.log.info({ partition: split.partition?.partitionName, bucket: split.bucket, rows, stateOffset: stateOffset.toString() }, 'first round of a bucket whose changelog was trimmed: its state read');
  }
}

/** Reads every split up to its stop offset, or until the deadline; true when the deadline cut it short. */
async function readSplits(ctx: RoundContext, info: TableInfo, splits: Split[], writer: RoundWriter, deadline: number): Promise<boolean> {
  const table = await ctx.conn.getTable(info.path);
  // The log alone: a split starts at or above the log start, and the lake is what is being written.
  const scanner = table.newScan().logOnly().createLogScanner();
  const byRef = new Map<string, Split>();
  const refKey = (partition: string | undefined, bucket: number) => (partition === undefined ? String(bucket) : `${partition}/${bucket}`);
  let open = 0;
  for (const s of splits) {
    if (s.position >= s.stop) continue;
    await scanner.subscribe(s.ref, s.position);
    byRef.set(refKey(s.partition?.partitionName, s.bucket), s);
    open++;
  }
  let lastProgress = Date.now();
  let rowsRead = 0;
  try {
    while (open > 0) {
      ctx.signal.throwIfAborted();
      if (Date.now() >= deadline) return true;
      for (const b of await scanner.pollBatches(Math.min(1000, Math.max(0, deadline - Date.now())))) {
        const split = byRef.get(refKey(b.partition, b.bucket))!;
        if (split.position >= split.stop) continue;
        rowsRead += await writer.add(split, b);
      }
      for (const [ref, position] of scanner.positions()) {
        const split = byRef.get(ref);
        if (!split) continue;
        // Empty changelog batches move positions without rows.
        if (position > split.position) split.position = position < split.stop ? position : split.stop;
        if (split.position >= split.stop) {
          scanner.unsubscribe(split.ref);
          open--;
        }
      }
      if (Date.now() - lastProgress >= PROGRESS_EVERY_MS) {
        lastProgress = Date.now();
        ctx.log.info({ rowsRead, splitsDone: splits.length - open, splits: splits.length }, 'tiering round progress');
      }
    }
    return false;
  } finally {
    scanner.close();
  }
}

function mergeOffsets(before: readonly LakeBucketOffset[], splits: readonly Split[]): LakeBucketOffset[] {
  const merged = new Map(before.map((o) => [lakeBucketKey(o), o]));
  for (const s of splits) {
    const key = lakeBucketKey({ ...(s.partition ? { partitionId: s.partition.partitionId } : {}), bucket: s.bucket });
    const maxTimestamp = Math.max(s.maxTimestamp ?? -Infinity, merged.get(key)?.maxTimestamp ?? -Infinity);
    merged.set(key, {
      ...(s.partition ? { partitionId: s.partition.partitionId, partitionName: s.partition.partitionName } : {}),
      bucket: s.bucket,
      endOffset: s.position,
      ...(Number.isFinite(maxTimestamp) ? { maxTimestamp } : {}),
    });
  }
  return [...merged.values()];
}

/** Turns read batches into data and delete files of the round. */
class RoundWriter {
  private readonly lakeSchema: IcebergSchema;
  private readonly deleteSchema?: IcebergSchema;
  private readonly keySchema?: Schema;
  private readonly keyColumns: number[];
  private readonly partitionColumns: number[];
  private readonly written: Promise<DataFile>[] = [];
  /** Per data file complete but maybe still syncing: settles once it is durable. */
  private readonly syncing: Promise<void>[] = [];
  private readonly location: string;
  private readonly spec;

  constructor(
    private readonly ctx: RoundContext,
    private readonly info: TableInfo,
    metadata: TableMetadata,
  ) {
    this.lakeSchema = currentSchema(metadata);
    this.location = metadata.location;
    this.spec = partitionSpecById(metadata, metadata.defaultSpecId);
    const columns = info.schema.columns;
    this.partitionColumns = info.partitionKeys.map((k) => columns.findIndex((c) => c.name === k));
    const pk = info.schema.primaryKey ?? [];
    this.keyColumns = pk.map((k) => columns.findIndex((c) => c.name === k));
    if (pk.length > 0) {
      this.keySchema = buildSchema(pk.map((k) => columns.find((c) => c.name === k)!).map((c) => ({ name: c.name, type: c.type, nullable: false })));
      const ids = new Set(pk);
      this.deleteSchema = { type: 'struct', 'schema-id': this.lakeSchema['schema-id'], fields: this.lakeSchema.fields.filter((f) => ids.has(f.name)) };
    }
  }

  /**
   * Takes rows of a split's state (a page of a batch scan), folded as inserts whose offset is set
   * by `stateRead`; returns how many.
   */
  addState(split: Split, page: readonly Row[], readAt: number): number {
    const columns = this.info.schema.columns;
    for (const row of page) {
      const values = columns.map((c) => toInternal(c, row[c.name]));
      split.partitionSource ??= this.partitionSourceOf(values);
      split.changes!.set(this.keyOf(values), { existed: false, key: this.keyColumns.map((c) => values[c]), row: values, offset: -1n, timestampMs: readAt });
    }
    return page.length;
  }

  /** The state of a split has been read, as of changelog offset `stateOffset`: its changelog follows from there. */
  stateRead(split: Split, stateOffset: bigint): void {
    for (const change of split.changes!.values()) change.offset = stateOffset - 1n;
    split.position = stateOffset;
    if (split.stop < stateOffset) split.stop = stateOffset;
  }

  /** Takes one read batch (cut at the split's stop); returns the rows it held. */
  async add(split: Split, b: ScanBatch): Promise<number> {
    const rows = Math.min(b.batch.numRows, Number(split.stop - b.baseOffset));
    if (rows <= 0) return 0;
    const batch = rows < b.batch.numRows ? b.batch.slice(0, rows) : b.batch;
    split.position = b.baseOffset + BigInt(rows);
    split.maxTimestamp = Math.max(split.maxTimestamp ?? b.timestamp, b.timestamp);
    const read = internalRowReader(batch, this.info.schema);
    split.partitionSource ??= this.partitionSourceOf(read(0));
    if (split.changes) {
      this.fold(split, b, rows, read);
    } else {
      const timestamps = new BigInt64Array(rows).fill(BigInt(b.timestamp) * 1000n);
      const lake = toLakeBatch(batch, this.info, this.lakeSchema, { bucket: split.bucket, offsets: consecutiveOffsets(b.baseOffset, rows), timestamps });
      split.pendingBatches.push(lake);
      split.pendingBytes += lake.data.byteLength;
      if (split.pendingBytes >= CHUNK_BYTES) await this.append(split);
    }
    return rows;
  }

  /**
   * Sends the split's pending lake batches to its data file (opened on the first chunk), then
   * waits for the writer to finish the chunk before: the writer always has the next chunk at hand,
   * and reading runs at most two chunks ahead of it.
   */
  private async append(split: Split): Promise<void> {
    const file = (split.file ??= { sink: this.ctx.pool.open(this.dataFilePath(split, FileContent.DATA), this.lakeSchema), partition: this.partitionOf(split), rows: 0 });
    const batches = split.pendingBatches.splice(0);
    split.pendingBytes = 0;
    file.rows += batches.reduce((n, b) => n + b.numRows, 0);
    const previous = file.appending;
    file.appending = file.sink.append(batches);
    // Its failure is seen by the next append or by finish.
    file.appending.catch(() => {});
    if (file.rows >= FILE_ROWS) this.finishFile(split);
    await previous;
  }

  /** Completes the split's data file once the writer has its last chunk; the next chunk opens another. */
  private finishFile(split: Split): void {
    const file = split.file!;
    split.file = undefined;
    const completed = file.sink.complete();
    this.track(completed.then(({ file: w }) => ({ ...w, content: FileContent.DATA, partition: file.partition })));
    const durable = completed.then((c) => c.durable);
    // Its failure surfaces at the commit, or at `files()` first.
    durable.catch(() => {});
    this.syncing.push(durable);
  }

  /** Gives up the data files still being written: a failed round leaves no partial files. */
  async abort(splits: readonly Split[]): Promise<void> {
    await Promise.all(splits.map((s) => s.file?.sink.abort().catch(() => {})));
  }

  private fold(split: Split, b: ScanBatch, rows: number, read: (row: number) => unknown[]): void {
    const changes = split.changes!;
    const types = b.changeTypes!;
    for (let i = 0; i < rows; i++) {
      const ct = types[i];
      const values = read(i);
      const id = this.keyOf(values);
      let change = changes.get(id);
      if (!change) {
        // A key whose first change here is not an insert was in the lake (or an earlier round) before.
        change = { existed: ct !== CHANGE_TYPE_BYTE['+I'], key: this.keyColumns.map((c) => values[c]), offset: 0n, timestampMs: 0 };
        changes.set(id, change);
      }
      // -U is followed by the +U that carries the new row.
      if (ct === CHANGE_TYPE_BYTE['-U']) continue;
      change.offset = b.baseOffset + BigInt(i);
      change.timestampMs = b.timestamp;
      change.row = ct === CHANGE_TYPE_BYTE['-D'] ? undefined : values;
    }
  }

  /** A string identifying a row's primary key. */
  private keyOf(values: readonly unknown[]): string {
    let id = '';
    for (const c of this.keyColumns) {
      const v = values[c];
      id += (v instanceof Uint8Array ? Buffer.from(v).toString('hex') : String(v)) + '\u0000';
    }
    return id;
  }

  /** Writes what a split holds so far as files (in the background). */
  async flushSplit(split: Split): Promise<void> {
    if (split.changes) {
      if (split.changes.size === 0) return;
      const data = new ColumnBatchBuilder(this.info.schema);
      const deletes = new ColumnBatchBuilder(this.keySchema!);
      const offsets: bigint[] = [];
      const timestamps: bigint[] = [];
      for (const change of split.changes.values()) {
        if (change.row) {
          data.appendInternalRow(change.row);
          offsets.push(change.offset);
          timestamps.push(BigInt(change.timestampMs) * 1000n);
        }
        if (change.existed) deletes.appendInternalRow(change.key);
      }
      split.changes.clear();
      if (data.rowCount > 0) {
        const batch = toLakeBatch(data.build(), this.info, this.lakeSchema, { bucket: split.bucket, offsets: BigInt64Array.from(offsets), timestamps: BigInt64Array.from(timestamps) });
        this.write(split, [batch], FileContent.DATA, this.lakeSchema);
      }
      if (deletes.rowCount > 0) {
        const rows = deletes.rowCount;
        const batch = toLakeBatch(deletes.build(), this.info, this.deleteSchema!, { bucket: split.bucket, offsets: new BigInt64Array(rows), timestamps: new BigInt64Array(rows) });
        this.write(split, [batch], FileContent.EQUALITY_DELETES, this.deleteSchema!);
      }
      return;
    }
    if (split.pendingBatches.length > 0) await this.append(split);
    if (split.file) this.finishFile(split);
  }

  /** Writes a primary-key table's data or delete file in one go. */
  private write(split: Split, batches: arrow.RecordBatch[], content: FileContent, schema: IcebergSchema): void {
    const partition = this.partitionOf(split);
    this.track(
      this.ctx.pool.write({ batches, path: this.dataFilePath(split, content), schema }).then((w) => ({
        ...w,
        content,
        partition,
        ...(content === FileContent.EQUALITY_DELETES ? { equalityIds: schema.fields.map((f) => f.id) } : {}),
      })),
    );
  }

  /** Keeps a file being written for `files()`; its failure surfaces there. */
  private track(file: Promise<DataFile>): void {
    file.catch(() => {});
    this.written.push(file);
  }

  private dataFilePath(split: Split, content: FileContent): string {
    const dir = path.join(this.location, 'data', ...this.partitionPath(split, this.partitionOf(split)));
    return path.join(dir, `${crypto.randomUUID()}${content === FileContent.DATA ? '' : '-deletes'}.parquet`);
  }

  /** The values of the partition keys in a row of the split (internal values), which every row of it shares. */
  private partitionSourceOf(values: readonly unknown[]): Map<string, PartitionValue> {
    const columns = this.info.schema.columns;
    return new Map(this.partitionColumns.map((c) => [columns[c].name, sourceValue(columns[c].type, values[c])]));
  }

  /** The partition tuple of a split's files: partition key values, then the bucket (bucket[N] of the key or __bucket). */
  private partitionOf(split: Split): PartitionValue[] {
    return this.spec.fields.map((f) => {
      const source = this.lakeSchema.fields.find((x) => x.id === f['source-id'])!;
      if (source.name === BUCKET_COLUMN || f.transform.startsWith('bucket')) return split.bucket;
      const value = split.partitionSource?.get(source.name);
      if (value === undefined) throw new TributaryError('INVALID_TABLE_EXCEPTION', `lake partition field ${f.name} has no value`);
      return parseTransform(f.transform).apply(source.type, value as never);
    });
  }

  private partitionPath(split: Split, partition: PartitionValue[]): string[] {
    return this.spec.fields.map((f, i) => {
      const source = this.lakeSchema.fields.find((x) => x.id === f['source-id'])!;
      const text = f.transform.startsWith('bucket') || source.name === BUCKET_COLUMN ? String(split.bucket) : parseTransform(f.transform).toHumanString(source.type, partition[i] as never);
      return `${f.name}=${encodeURIComponent(text)}`;
    });
  }

  /** The round's files, once complete; `durable` tells when they are durable. */
  async files(): Promise<DataFile[]> {
    return Promise.all(this.written);
  }

  async durable(): Promise<void> {
    await Promise.all(this.syncing);
  }
}

/** An internal value (values.ts) as Iceberg transforms take it. */
function sourceValue(type: DataType, v: unknown): PartitionValue {
  if (v === null || v === undefined) return null;
  return type.kind === 'TIME' ? BigInt(v as number) : (v as PartitionValue);
}
