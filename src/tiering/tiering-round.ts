/**
 * One tiering round of one table (DESIGN.md §5):
 *
 *  1. Where the lake stands: the newest snapshot this table's tiering committed, found by its
 *     summary properties (tiered-offsets.ts). If the coordinator has not registered it (the previous worker died
 *     between the lake commit and the report), it is registered now and the round starts after it.
 *  2. Plan: one split per bucket (per partition), [lake end offset, high watermark), with the stop
 *     offsets frozen now. The first round of a primary-key bucket whose changelog no longer starts
 *     at offset 0 (retention dropped what its KV snapshots hold, before the table was lake-enabled)
 *     starts from the bucket's state instead: a consistent scan of it, as of offset S, folded like
 *     changes at offset S - 1, then the changelog from S.
 *  3. Read the splits with a LogScanner into the lake format's writer (LakeWriter, lake/lake-format.ts),
 *     one bucket writer per split. Log tables: read batches go to it as they come. Primary-key
 *     tables: the changelog is folded per key — the last +I/+U of a key becomes a row, and a key
 *     that existed before the round (its first change is not +I) is deleted from the lake's older
 *     rows — and written once the split is read.
 *  4. Commit one lake snapshot whose summary carries the offsets, refused when the lake no longer
 *     ends where the round started (another worker tiered these offsets meanwhile).
 *  5. Register the snapshot with the coordinator (CommitLakeTableSnapshot).
 *  6. Maintain the lake by the table's options: compaction (DuckDB rewrites the files) and snapshot expiry.
 *
 * A round that runs past the table's freshness stops reading at a batch boundary and commits what
 * it has (force-finished); the rest is the next round's.
 */
import type { Admin } from '../client/admin.js';
import type { Connection } from '../client/connection.js';
import type { BucketRef } from '../client/log-scanner.js';
import type { ScanBatch } from '../client/scan-batch.js';
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
import type { LakeBucketWriter, LakePartition, LakeStorage, LakeWriter, LakeWriteResult } from '../lake/lake-format.js';
import { DuckSession } from '../query/duckdb/session.js';
import { bucketOffsetsSummary, SUMMARY_BUCKET_OFFSETS, SUMMARY_TABLE_ID, SUMMARY_TIERING_EPOCH, type TieredSnapshot } from '../lake/tiered-offsets.js';
const PROGRESS_EVERY_MS = 10_000;
/**
 * A partition holding this many delete files is compacted after a tiering round even without
 * `table.datalake.auto-compaction`: every delete file is one more anti-join for every read of the
 * partition, and a primary-key bucket gets one per round that updates or deletes keys in it.
 */
const COMPACT_AT_DELETE_FILES = 8;

export interface RoundContext {
  conn: Connection;
  tableId: number;
  path: TablePath;
  epoch: bigint;
  /** The lake the table is tiered into. */
  lake: LakeStorage;
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
  /** Values of the partition keys (internal values), from the first row read. */
  partitionSource?: Map<string, unknown>;
  /** The lake writer of the split's rows, from the first rows written. */
  writer?: LakeBucketWriter;
  /** Primary-key tables: the changelog folded per key. */
  changes?: Map<string, FoldedChange>;
  /** Primary-key tables: the bucket's state is read first (see the header, step 2). */
  fromState?: boolean;
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
  const lakeTable = await ctx.lake.loadTable(info.path);
  const tiered = lakeTable.tieredSnapshot(info.tableId);
  await registerIfMissing(ctx, admin, tiered);

  const splits = await planSplits(ctx, admin, info, tiered);
  if (splits.length === 0) return { forceFinished: false, rows: 0, dataFiles: 0, deleteFiles: 0 };
  ctx.log.info({ splits: splits.length, records: splits.reduce((n, s) => n + Number(s.stop - s.start), 0) }, 'tiering round planned');

  const lakeWriter = lakeTable.newWriter(info);
  const writer = new RoundWriter(info, lakeWriter);
  let forceFinished: boolean;
  let written: LakeWriteResult;
  try {
    await readStates(ctx, info, splits, writer);
    forceFinished = await readSplits(ctx, info, splits, writer, deadline);
    for (const split of splits) await writer.flushSplit(split);
    written = await lakeWriter.complete();
  } catch (err) {
    await lakeWriter.abort();
    throw err;
  }

  const advanced = splits.filter((s) => s.position > s.start || s.fromState);
  if (advanced.length === 0) return { forceFinished, rows: 0, dataFiles: 0, deleteFiles: 0 };
  const offsets = mergeOffsets(tiered?.bucketOffsets ?? [], advanced);
  const properties = {
    [SUMMARY_TABLE_ID]: String(info.tableId),
    [SUMMARY_TIERING_EPOCH]: ctx.epoch.toString(),
    [SUMMARY_BUCKET_OFFSETS]: bucketOffsetsSummary(offsets),
  };
  const snapshotId = await lakeTable.commit(written, properties, { tableId: info.tableId, basedOn: tiered?.snapshotId, signal: ctx.signal });
  await ctx.onLakeCommitted?.(snapshotId);
  await commitToCoordinator(ctx, snapshotId, offsets);
  await maintainLake(ctx, info, written.partitions, offsets);
  const { rows, dataFiles, deleteFiles } = written;
  ctx.log.info({ snapshotId: snapshotId.toString(), rows, dataFiles, deleteFiles, forceFinished }, 'tiering round committed');
  return { forceFinished, snapshotId, rows, dataFiles, deleteFiles };
}

/**
 * Lake maintenance once the round is committed and registered: compacts the partitions the round
 * wrote to (all of them with table.datalake.auto-compaction, else those whose delete files piled
 * up) and registers the compacted snapshot, which holds the same offsets; then, with
 * table.datalake.auto-expire-snapshot, expires snapshots by the lake table's history.expire.*
 * properties. The round's rows are safe by now: a failure here is logged, never the round's.
 */
async function maintainLake(ctx: RoundContext, info: TableInfo, written: readonly LakePartition[], offsets: readonly LakeBucketOffset[]): Promise<void> {
  const enabled = (key: string) => tableOption(info.properties, key)?.toLowerCase() === 'true';
  try {
    const compacted = await ctx.lake.compact(info.path, () => DuckSession.create(), {
      partitions: written,
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
    const expired = await ctx.lake.expireSnapshots(info.path);
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
  const rpc = await ctx.conn.coordinator();
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

/** Hands read batches to the lake writer: log batches as they come, a primary-key split's changelog folded per key. */
class RoundWriter {
  private readonly keySchema?: Schema;
  private readonly keyColumns: number[];
  private readonly partitionColumns: number[];

  constructor(
    private readonly info: TableInfo,
    private readonly lake: LakeWriter,
  ) {
    const columns = info.schema.columns;
    this.partitionColumns = info.partitionKeys.map((k) => columns.findIndex((c) => c.name === k));
    const pk = info.schema.primaryKey ?? [];
    this.keyColumns = pk.map((k) => columns.findIndex((c) => c.name === k));
    if (pk.length > 0) {
      this.keySchema = buildSchema(pk.map((k) => columns.find((c) => c.name === k)!).map((c) => ({ name: c.name, type: c.type, nullable: false })));
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
      await this.writerOf(split).append(batch, b.baseOffset, b.timestamp);
    }
    return rows;
  }

  private writerOf(split: Split): LakeBucketWriter {
    return (split.writer ??= this.lake.bucket(split.bucket, split.partitionSource ?? new Map()));
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

  /** Writes what a split holds so far (in the background). */
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
      this.writerOf(split).writeChanges(
        data.rowCount > 0 ? data.build() : undefined,
        { offsets: BigInt64Array.from(offsets), timestamps: BigInt64Array.from(timestamps) },
        deletes.rowCount > 0 ? deletes.build() : undefined,
      );
      return;
    }
    await split.writer?.flush();
  }

  /** The values of the partition keys in a row of the split (internal values), which every row of it shares. */
  private partitionSourceOf(values: readonly unknown[]): Map<string, unknown> {
    const columns = this.info.schema.columns;
    return new Map(this.partitionColumns.map((c) => [columns[c].name, values[c]]));
  }
}
