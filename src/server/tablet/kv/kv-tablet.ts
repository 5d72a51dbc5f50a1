/**
 * KvTablet: the current state of one primary-key bucket, on lmdb, with the bucket's log as its WAL.
 *
 * Write path (DESIGN.md §3): for each record of a KV batch, read the old value (buffered versions,
 * then the store), merge it with the merge engine, collect the changelog (+I, -U, +U, -D); append the
 * changelog as one log batch (carrying the KV batch's writer id and sequence, so the log's
 * idempotence also dedupes KV writes). Each new value becomes a buffered version of its key,
 * tagged with the batch's last offset (pending while the append runs; a failed or duplicate append
 * takes its versions back). A version is committed once the log's high watermark passes it:
 * lookups and state scans see exactly the committed versions, as log readers see exactly the
 * batches below the high watermark.
 *
 * Rows stay bytes where the merge never looks into them: a full-row upsert under last_row written
 * in the table's current schema, and any full-row delete, go to the changelog straight from their
 * CompactedRows (the written row, and the stored one when it has the current schema id), and the
 * written row is stored as it came. Other writes (other merge engines, partial updates, rows of
 * older schemas) are merged as values.
 *
 * Committed versions go to lmdb with its asynchronous writes, which run on lmdb's own write
 * thread: one transaction at a time, at most one per `kv.flush.interval` unless something needs
 * lmdb complete (a prefix lookup, a snapshot), holding every version committed since the last one,
 * the row count and the offset the state now reaches. A version stays buffered (and is what reads see)
 * until its transaction is visible in lmdb. lmdb need not be durable at once: the changelog is
 * the WAL, and recovery replays it from the offset recorded with the state.
 *
 * lmdb layout (one environment per bucket, `kv-<bucket>/`):
 *   db "state": encoded primary key → KV value (schema id i16 + compacted row)
 *   db "meta":  "flushed-offset" → first changelog offset NOT applied (decimal text),
 *               "row-count" → live keys (decimal text); both written in the same transaction as the state
 *
 * Recovery: the state is what lmdb holds up to "flushed-offset"; the changelog from there to the end
 * of the log is replayed literally (+I/+U put, -D delete, -U skipped). When there is no local state, or
 * the log no longer holds the changelog after it (retention), the latest registered KV snapshot is
 * restored first. Replaying changes the state already holds is harmless: each replayed change sets
 * the value the key had after it. The replay goes to the log's durable end, past the high watermark
 * of a replicated log: a replica that becomes leader keeps its whole log, and new writes must merge
 * with all of it. Changelog batches are appended in the leader epoch the tablet is given.
 *
 * Standby (a follower the coordinator designates for a warm state): the same recovery, but only up
 * to the high watermark, and then the same replay again each time the follower's high watermark
 * moves, so the state never holds a change its log may still truncate. A standby serves no reads
 * or writes and takes no snapshots; when it becomes leader it is closed and opened again as leader,
 * which finds the warm state and replays only the tail above it.
 *
 * Schema evolution (ADD COLUMN): KV batches, stored values and changelog batches each name the
 * schema id they were written with. A write is read in the table's current schema (columns its
 * writer's schema lacks are null: an old writer's full-row upsert sets them to null, its partial
 * update leaves them alone), merged with the stored row read the same way, and its changelog and
 * new values are written with the current schema id. Stored values are never rewritten for a new
 * schema: readers decode each by its own id.
 */
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import { CHANGE_TYPE_BYTE, changeTypeOf } from '../../../common/change-type.js';
import { tableOption } from '../../../common/config.js';
import { TributaryError } from '../../../common/errors.js';
import { ioError, isNoSpace } from '../../../common/files.js';
import { CompactedKeyEncoder } from '../../../common/key-encoder.js';
import { type PrimaryKeyTableOptions, primaryKeyTableOptions, validatePartialUpdate } from '../../../common/pk-table.js';
import { CompactedRowEncoder, encodeKvValue, KV_VALUE_ROW_START, KvValueDecoder, KvValuePacker, kvValueSchemaId, primaryKeyLayout } from '../../../common/row-encoder.js';
import type { Schema, TableInfo } from '../../../common/schema.js';
import { decodeArrowPayload, internalRowReader } from '../../../record/arrow-payload.js';
import { toArrowSchema } from '../../../record/arrow-schema.js';
import { encodeChangelogPayload, splitChangelogPayload } from '../../../record/changelog.js';
import { ColumnBatchBuilder } from '../../../record/column-batch-builder.js';
import type { ArrowCompression } from '../../../record/compression.js';
import { buildLogBatch, logBatchesOf, logBatchPayload, readLogBatchHeader } from '../../../record/log-batch.js';
import { openKvBatch } from '../../../record/kv-batch.js';
import type { Logger } from '../../../common/logger.js';
import type { LogTablet } from '../log/log-tablet.js';
import { createMergeEngine, type MergeEngine, type MergeResult } from './merge-engine.js';
import { KeyMap } from './key-map.js';
import type { KvSnapshotHandle } from '../../../common/kv-snapshot.js';
import type { KvSnapshotStore } from './kv-snapshot-store.js';

const FLUSHED_OFFSET = 'flushed-offset';
const ROW_COUNT = 'row-count';
/**
 * The most of a changelog batch a bucket's column builder keeps for its next one: small batches,
 * the ones whose cost is the builder's, reuse its memory, while a node of many buckets holds
 * little of each between writes (a larger batch allocates afresh, for many rows).
 */
const MAX_KEPT_CHANGELOG_BYTES = 64 << 10;
/** Rows per lmdb transaction while replaying the changelog. */
const REPLAY_TXN_ROWS = 50_000;
/** How long a KV state write that found the disk full waits before it is tried again. */
const STORE_RETRY_MS = 5000;
const ignore = (): void => undefined;
/** The last offset of a batch being appended: above every high watermark. */
const PENDING = Number.POSITIVE_INFINITY;

/** Where an opened KV state came from: a registered snapshot, the replica's own state on disk, or nothing (empty, then the changelog). */
export type KvRecoverySource = 'snapshot' | 'local' | 'none';

/** A change of one key not yet visible in lmdb. */
interface Version {
  key: Uint8Array;
  /** The new KV value, or null for a deleted key. */
  value: Uint8Array | null;
  /** The batch that made it: the version is committed once the batch's last offset is below the high watermark. */
  batch: AppendedBatch;
  /** The key's previous version while that one is not in lmdb either. */
  older: Version | undefined;
}

/** The versions of one changelog batch, waiting for the high watermark. */
interface AppendedBatch {
  /** Last changelog offset of the batch; PENDING while it is appended (and for ever if that fails). */
  lastOffset: number;
  versions: Version[];
  /** How the batch changes the row count; undefined until counted when the writes did not read the stored rows (rowDeltaOf). */
  rowDelta: number | undefined;
}

export interface PutKvResult {
  logEndOffset: bigint;
  /** One past the last changelog offset of the batches written. */
  endOffset: bigint;
}

/** The schemas of a table by id, as the coordinator stores them. */
export type SchemaLookup = (schemaId: number) => Schema | undefined;

/** What writes need of the table's current schema; made anew when the schema changes. */
interface WriteSchema {
  schemaId: number;
  schema: Schema;
  rowEncoder: CompactedRowEncoder;
  /** Incoming rows and stored values of any schema id, read in this schema. */
  rows: KvValueDecoder;
  engine: MergeEngine;
  blind: BlindMerges;
  options: PrimaryKeyTableOptions;
  /** The changelog rows of the batch being applied; kept for the next batch (`buildToEncode`). */
  changelog: ColumnBatchBuilder;
}

/**
 * What the merge engine makes of writes it never looks into: full-row deletes, and full-row
 * upserts of an engine that `upsertsBlind` (merge-engine.ts). Its answer then depends only on whether the key holds
 * a row, so it is asked once per case, with stand-in rows: each change it returns is the written
 * row (`written`) or the stored one, and the caller takes that row's bytes.
 */
class BlindMerges {
  /** Stands for the written row (for deletes, the row given to delete). */
  readonly written: unknown[];
  private readonly stored: unknown[];
  /** By case: upsert or delete, of a key without or with a stored row. */
  private readonly results: (MergeResult | undefined)[] = [undefined, undefined, undefined, undefined];

  constructor(
    private readonly engine: MergeEngine,
    width: number,
  ) {
    // Full width, so that the engine takes them as they are.
    this.written = new Array(width).fill(null);
    this.stored = new Array(width).fill(null);
  }

  merge(isDelete: boolean, hasStored: boolean): MergeResult {
    const i = (isDelete ? 2 : 0) + (hasStored ? 1 : 0);
    const old = hasStored ? this.stored : undefined;
    // An engine that refuses deletes throws each time, as it would for each real one.
    return (this.results[i] ??= this.engine.merge(isDelete ? { old, delete: this.written } : { old, upsert: this.written }));
  }
}

function writeSchemaOf(table: TableInfo, schemas: SchemaLookup): WriteSchema {
  const schema = table.schema;
  const engine = createMergeEngine(table);
  return {
    schemaId: table.schemaId,
    schema,
    rowEncoder: new CompactedRowEncoder(schema.columns.map((c) => c.type)),
    rows: new KvValueDecoder(schema, table.schemaId, schemas),
    engine,
    blind: new BlindMerges(engine, schema.columns.length),
    options: primaryKeyTableOptions(schema, table.properties),
    changelog: new ColumnBatchBuilder(schema),
  };
}

export class KvTablet {
  private readonly env: RootDatabase<Uint8Array, Uint8Array>;
  private readonly state: Database<Uint8Array, Uint8Array>;
  private readonly meta: Database<string, string>;
  /** The newest version of every key with a change not yet visible in lmdb. */
  private readonly versions = new KeyMap<Version>();
  /** Appended batches whose versions are not yet written to lmdb, in offset order. */
  private readonly unwritten: AppendedBatch[] = [];
  /** Primary-key columns never change, nor their places: the key encoding outlives schema changes. */
  private readonly keyEncoder: CompactedKeyEncoder;
  private current: WriteSchema;
  private readonly compression: ArrowCompression;
  private readonly zstdLevel: number;
  private writing: Promise<unknown> = Promise.resolve();
  /** The offset the state in lmdb reaches (its "flushed-offset"). */
  private flushedOffset: bigint;
  /** The offset the state reaches once the lmdb transaction in flight is visible. */
  private flushingOffset: bigint;
  /** The lmdb transaction in flight: resolves (never rejects) once it is visible or has failed. */
  private storeWrite: Promise<void> | undefined;
  private storeFailure: TributaryError | undefined;
  /** Set while lmdb's last write found the disk full (DISK_WRITE_LOCKED): it is retried on a timer. */
  private storeBlocked: TributaryError | undefined;
  private storeRetry: NodeJS.Timeout | undefined;
  /** When the last lmdb transaction started (performance.now()), and the timer of the next one. */
  private storeWriteStarted = -Infinity;
  private storeWriteTimer: NodeJS.Timeout | undefined;
  /** Live keys in lmdb once the transaction in flight is visible. */
  private rowCountValue: number;
  private flushPaused = 0;
  /** Resolves when the latest snapshot asked for has been taken (or has failed). */
  private snapshotTaken: Promise<void> = Promise.resolve();
  /** First changelog offset of the batch being appended, while its append runs. */
  private inflightFrom?: bigint;
  private readonly unsubscribe: () => void;
  private closed = false;
  /** Snapshots of the tablet, copy and registration, one at a time. */
  private snapshotting: Promise<unknown> = Promise.resolve();
  /** A standby's replay of the changelog up to the high watermark, while one runs. */
  private following: Promise<void> | undefined;
  private followAgain = false;
  /** What the state was recovered from when the tablet opened. */
  recoveredFrom: KvRecoverySource = 'none';

  private constructor(
    private readonly dir: string,
    private readonly log: LogTablet,
    table: TableInfo,
    private readonly schemas: SchemaLookup,
    readonly snapshots: KvSnapshotStore,
    private readonly logger: Logger,
    /** The leader epoch changelog batches are written in. */
    private readonly leaderEpoch: () => number,
    /** A standby applies the replicated changelog up to the high watermark and serves nothing. */
    readonly standby: boolean,
    /** kv.flush.interval: the least time between two lmdb transactions that commits start on their own. */
    private readonly flushIntervalMs: number,
  ) {
    this.env = open<Uint8Array, Uint8Array>({ path: dir, keyEncoding: 'binary', encoding: 'binary', compression: false, maxDbs: 4, noMetaSync: true });
    this.state = this.env.openDB<Uint8Array, Uint8Array>({ name: 'state', keyEncoding: 'binary', encoding: 'binary', compression: false });
    this.meta = this.env.openDB<string, string>({ name: 'meta', encoding: 'string', compression: false });
    const schema = table.schema;
    this.keyEncoder = CompactedKeyEncoder.forColumns(schema, primaryKeyLayout(schema, table.bucketKeys, table.partitionKeys));
    this.current = writeSchemaOf(table, schemas);
    this.compression = tableOption(table.properties, 'table.log.arrow.compression.type')!.toUpperCase() as ArrowCompression;
    this.zstdLevel = Number(tableOption(table.properties, 'table.log.arrow.compression.zstd.level'));
    this.flushedOffset = BigInt(this.meta.get(FLUSHED_OFFSET) ?? '0');
    this.flushingOffset = this.flushedOffset;
    this.rowCountValue = Number(this.meta.get(ROW_COUNT) ?? '0');
    this.unsubscribe = standby ? log.onHighWatermark(() => this.followHighWatermark()) : log.onHighWatermark(() => this.flushSoon());
  }

  /**
   * Opens the state of a bucket, restoring the registered snapshot and replaying the changelog as
   * needed. A leader replays all of it, to the log's durable end, also what is above the high
   * watermark (a new leader's log, which the followers copy), since writes are merged with the
   * state it leads to; a standby replays to the high watermark only.
   */
  static async open(
    dir: string,
    log: LogTablet,
    table: TableInfo,
    schemas: SchemaLookup,
    snapshots: KvSnapshotStore,
    logger: Logger,
    leaderEpoch: () => number = () => 0,
    role: 'leader' | 'standby' = 'leader',
    flushIntervalMs = 0,
  ): Promise<KvTablet> {
    const standby = role === 'standby';
    const hasLocal = fs.existsSync(path.join(dir, 'data.mdb'));
    let restored: KvSnapshotHandle | undefined;
    let local = hasLocal;
    if (!hasLocal) restored = await snapshots.restoreRegistered(dir);
    else await fs.promises.mkdir(dir, { recursive: true });
    let tablet = new KvTablet(dir, log, table, schemas, snapshots, logger, leaderEpoch, standby, flushIntervalMs);
    if (tablet.flushedOffset < log.logStartOffset || tablet.flushedOffset > log.logEndOffset) {
      // The changelog after the local state was deleted by retention, or the log lost a tail the
      // state already holds (an OS crash under a lazy flush policy): start from the snapshot.
      await tablet.closeStore();
      await fs.promises.rm(dir, { recursive: true, force: true });
      local = false;
      restored = await snapshots.restoreRegistered(dir);
      tablet = new KvTablet(dir, log, table, schemas, snapshots, logger, leaderEpoch, standby, flushIntervalMs);
      if (tablet.flushedOffset < log.logStartOffset || tablet.flushedOffset > log.logEndOffset) {
        throw new TributaryError(
          'KV_STORAGE_EXCEPTION',
          `bucket state at offset ${tablet.flushedOffset} cannot be recovered: the changelog holds [${log.logStartOffset}, ${log.logEndOffset}) and no snapshot fits it`,
        );
      }
    }
    tablet.recoveredFrom = restored ? 'snapshot' : local ? 'local' : 'none';
    const fromOffset = tablet.flushedOffset;
    const replayed = await tablet.replay(standby ? log.highWatermark : log.durableEndOffset);
    if (!standby) tablet.flushBelow(log.highWatermark);
    if (restored || replayed > 0) {
      logger.info({ source: tablet.recoveredFrom, snapshot: restored?.snapshotId, fromOffset: String(fromOffset), replayed, rows: tablet.rowCount, standby }, 'kv state recovered');
    }
    // The high watermark may have moved while the state was recovered.
    if (standby) tablet.followHighWatermark();
    return tablet;
  }

  /** Live keys of the committed state: lmdb's count and the changes committed since. */
  get rowCount(): number {
    const end = Number(this.log.highWatermark);
    let count = this.rowCountValue;
    for (const batch of this.unwritten) {
      if (batch.lastOffset >= end) break;
      count += this.rowDeltaOf(batch);
    }
    return count;
  }

  /** The changelog offset the lmdb state corresponds to. */
  get stateOffset(): bigint {
    return this.flushedOffset;
  }

  /** Takes the table's new options and schema; writes already running finish with the schema they began with. */
  tableAltered(table: TableInfo): void {
    this.current = writeSchemaOf(table, this.schemas);
  }

  // ------------------------------------------------------------------ writes

  /**
   * Applies KV batches in order. Each becomes one changelog batch; `waitFor` 'written' answers once
   * it is in the log file (acks=1), 'high-watermark' once it is committed (acks=all).
   */
  putKv(batches: Buffer[], targetColumns: number[] | undefined, waitFor: 'high-watermark' | 'written'): Promise<PutKvResult> {
    this.checkServing();
    if (targetColumns) validatePartialUpdate(this.current.schema, this.current.options.mergeEngine, targetColumns);
    const run = this.writing.then(async () => {
      let lastOffset = -1n;
      for (const batch of batches) lastOffset = await this.applyBatch(batch, targetColumns);
      return lastOffset;
    });
    this.writing = run.catch(() => undefined);
    return run.then(async (lastOffset) => {
      if (waitFor === 'high-watermark') await this.waitForHighWatermark(lastOffset + 1n);
      return { logEndOffset: this.log.logEndOffset, endOffset: lastOffset + 1n };
    });
  }

  private async applyBatch(bytes: Buffer, targetColumns: number[] | undefined): Promise<bigint> {
    this.checkOpen();
    if (this.storeFailure) throw this.storeFailure;
    const batch = openKvBatch(bytes);
    // The schema this batch is merged and logged in, even if the table changes while it is appended.
    const current = this.current;
    if (batch.schemaId > current.schemaId) {
      throw new TributaryError('SCHEMA_NOT_EXIST', `KV batch written with schema ${batch.schemaId}, newer than the table's schema ${current.schemaId} on this server`);
    }
    const partial = targetColumns && targetColumns.length > 0 ? targetColumns : undefined;
    // Full-row upserts under last_row with a WAL changelog never look at the stored row; their
    // row count is found when they are written.
    const counted = current.engine.needsOldValue;
    // Writes whose merge never looks into the rows go from their bytes to the changelog and the
    // store: full-row deletes, and full-row upserts under last_row in the table's current schema.
    const fullRow = partial === undefined;
    const blindUpserts = fullRow && current.engine.upsertsBlind && batch.schemaId === current.schemaId;
    const builder = current.changelog;
    const changeTypes: number[] = [];
    const appended: AppendedBatch = { lastOffset: PENDING, versions: [], rowDelta: undefined };
    // The new values of the batch share buffers, roughly the size of the rows that came in.
    const values = new KvValuePacker(current.schemaId, bytes.length + KvValuePacker.OVERHEAD * batch.recordCount);
    let rowDelta = 0;
    let result;
    try {
      // Records are read one at a time: none is kept beyond its turn but its key and new value.
      for (const record = batch.records; record.next(); ) {
        const newest = this.versions.get(record.key);
        const row = record.row;
        let stored: Uint8Array | undefined;
        if (counted || row === null || partial !== undefined) stored = (newest ? newest.value : this.storedValue(record.key)) ?? undefined;
        let value: Uint8Array | null;
        if (row === null ? fullRow : blindUpserts) {
          const merged = current.blind.merge(row === null, stored !== undefined);
          for (const change of merged.changes) {
            if (change.row === current.blind.written) builder.appendCompactedRow(row!);
            else this.appendStored(builder, current, stored!);
            changeTypes.push(CHANGE_TYPE_BYTE[change.type]);
          }
          if (merged.value === undefined) continue;
          value = merged.value === null ? null : values.pack(row!);
        } else {
          const old = stored === undefined ? undefined : current.rows.decode(stored);
          const upsert = row === null ? undefined : current.rows.decodeRow(batch.schemaId, row);
          const input = upsert === undefined ? { old, delete: old ?? new Array(current.schema.columns.length).fill(null) } : { old, upsert };
          const merged = current.engine.merge(partial ? { ...input, targetColumns: partial } : input);
          for (const change of merged.changes) {
            builder.appendInternalRow(change.row);
            changeTypes.push(CHANGE_TYPE_BYTE[change.type]);
          }
          if (merged.value === undefined) continue;
          // A row kept as written (same schema) is stored with the bytes it came in, without re-encoding.
          const asWritten = merged.value === upsert && batch.schemaId === current.schemaId;
          value = merged.value === null ? null : values.pack(asWritten ? row! : current.rowEncoder.encodeView(merged.value));
        }
        if (counted) rowDelta += (value === null ? 0 : 1) - (stored === undefined ? 0 : 1);
        const version: Version = { key: record.key, value, batch: appended, older: newest };
        this.versions.set(record.key, version);
        appended.versions.push(version);
      }
      const payload = encodeChangelogPayload(Uint8Array.from(changeTypes), builder.buildToEncode(MAX_KEPT_CHANGELOG_BYTES), this.compression, this.zstdLevel);
      const logBatch = buildLogBatch({
        schemaId: current.schemaId,
        appendOnly: false,
        recordCount: changeTypes.length,
        payload,
        writerId: batch.writerId,
        batchSequence: batch.batchSequence,
      });
      // Until the append returns, this batch's offsets are unknown: no flush may record the state as
      // complete past its first offset (a lazy flush policy moves the high watermark during the append).
      this.inflightFrom = this.log.logEndOffset;
      try {
        [result] = await this.log.append([logBatch], this.leaderEpoch(), 'written');
      } finally {
        this.inflightFrom = undefined;
      }
    } catch (err) {
      // A record that failed part-way leaves its rows in the builder: they are not the next batch's.
      builder.truncate(0);
      this.takeBack(appended.versions);
      throw err;
    }
    if (result.duplicate) this.takeBack(appended.versions);
    else if (appended.versions.length > 0) {
      appended.lastOffset = Number(result.lastOffset);
      if (counted) appended.rowDelta = rowDelta;
      this.unwritten.push(appended);
    }
    this.flushSoon();
    return result.lastOffset;
  }

  /** Appends a stored KV value to a changelog: from its bytes, or through its values when written with another schema. */
  private appendStored(builder: ColumnBatchBuilder, current: WriteSchema, stored: Uint8Array): void {
    if (kvValueSchemaId(stored) === current.schemaId) builder.appendCompactedRow(stored, KV_VALUE_ROW_START);
    else builder.appendInternalRow(current.rows.decode(stored));
  }

  /** The stored value of a key as a view valid until the next lmdb read, or undefined. */
  private storedValue(key: Uint8Array): Uint8Array | undefined {
    const fast = this.state.getBinaryFast(key);
    // lmdb's shared read buffer says how much of it this value is through its length property only.
    // A plain Uint8Array made here, not a Buffer view (see decodeLookupRequest in lookup-messages.ts).
    return fast && new Uint8Array(fast.buffer, fast.byteOffset, fast.length);
  }

  /** Removes the versions of a batch that was not appended, newest first. */
  private takeBack(appended: Version[]): void {
    for (let i = appended.length - 1; i >= 0; i--) {
      const v = appended[i];
      if (v.older) this.versions.set(v.key, v.older);
      else this.versions.delete(v.key);
    }
  }

  private waitForHighWatermark(offset: bigint): Promise<void> {
    if (this.log.highWatermark >= offset) return Promise.resolve();
    return new Promise((resolve) => {
      const off = this.log.onHighWatermark((hw) => {
        if (hw >= offset) {
          off();
          resolve();
        }
      });
    });
  }

  /** Where committed changes end: the high watermark, or the start of a batch being appended if lower. */
  private committedEnd(highWatermark = this.log.highWatermark): bigint {
    return this.inflightFrom !== undefined && this.inflightFrom < highWatermark ? this.inflightFrom : highWatermark;
  }

  /**
   * Starts one lmdb transaction with every version committed below the high watermark, the row
   * count and the offset the state then reaches, unless one is already in flight (its completion
   * starts the next). lmdb runs it on its write thread; its versions stay readable here until it is
   * visible.
   */
  private flushBelow(highWatermark: bigint): void {
    if (this.closed || this.flushPaused > 0 || this.storeWrite || this.storeFailure || this.storeRetry) return;
    const upTo = this.committedEnd(highWatermark);
    if (upTo <= this.flushingOffset) return;
    clearTimeout(this.storeWriteTimer);
    this.storeWriteTimer = undefined;
    this.storeWriteStarted = performance.now();
    const end = Number(upTo);
    const written: AppendedBatch[] = [];
    let delta = 0;
    // Every async write of one synchronous stretch goes into the same lmdb transaction. A failed
    // commit rejects every write of it: `done` is awaited, the others are seen through it.
    while (this.unwritten.length > 0 && this.unwritten[0].lastOffset < end) {
      const batch = this.unwritten.shift()!;
      delta += this.rowDeltaOf(batch);
      for (const v of batch.versions) {
        if (v.value === null) this.state.remove(v.key).catch(ignore);
        else this.state.put(v.key, v.value).catch(ignore);
      }
      written.push(batch);
    }
    this.rowCountValue += delta;
    this.meta.put(ROW_COUNT, String(this.rowCountValue)).catch(ignore);
    const done = this.meta.put(FLUSHED_OFFSET, upTo.toString());
    this.flushingOffset = upTo;
    this.storeWrite = done.then(
      () => {
        // lmdb renewed its read transaction before resolving: reads now find these versions there.
        for (const batch of written) for (const v of batch.versions) this.forget(v);
        this.flushedOffset = upTo;
        this.storeWrite = undefined;
        if (this.storeBlocked) this.logger.info({ dir: this.dir }, 'kv state written again');
        this.storeBlocked = undefined;
        this.flushSoon();
      },
      async (err: unknown) => {
        // lmdb also rejects a commit promise of its own for the failed batch, which nobody holds.
        this.env.committed.then(ignore, ignore);
        const reason = await commitFailure(err);
        // The versions stay readable here; lmdb's state stays at its last good offset.
        this.storeWrite = undefined;
        if (isNoSpace(reason)) {
          // A full disk: the same versions go again once there may be space.
          this.unwritten.unshift(...written);
          this.rowCountValue -= delta;
          this.flushingOffset = this.flushedOffset;
          if (!this.storeBlocked) this.logger.warn({ err: reason, dir: this.dir }, 'kv state write waits for space on the data disk');
          this.storeBlocked = ioError('KV_STORAGE_EXCEPTION', `cannot write the KV state of ${this.dir}`, reason);
          this.storeRetry = setTimeout(() => {
            this.storeRetry = undefined;
            this.flushBelow(this.log.highWatermark);
          }, STORE_RETRY_MS);
          this.storeRetry.unref();
          return;
        }
        // Anything else stops writes to lmdb; a restart replays the changelog from its last good offset.
        this.storeFailure = new TributaryError('KV_STORAGE_EXCEPTION', `cannot write the KV state of ${this.dir}: ${(reason as Error).message}`, { cause: reason });
        this.logger.error({ err: reason, dir: this.dir }, 'kv state write failed');
      },
    );
  }

  /**
   * Starts the next lmdb transaction once `kv.flush.interval` has passed since the last one
   * started: each transaction ends in an fsync of lmdb's file, and the changelog, fsynced with
   * every batch, is what makes a write durable. Commits in between are read from their buffered
   * versions. Whoever needs lmdb to hold everything now (`written`, snapshots) calls `flushBelow`.
   */
  private flushSoon(): void {
    if (this.storeWriteTimer || this.closed) return;
    const wait = this.storeWriteStarted + this.flushIntervalMs - performance.now();
    if (wait <= 0) {
      this.flushBelow(this.log.highWatermark);
      return;
    }
    this.storeWriteTimer = setTimeout(() => {
      this.storeWriteTimer = undefined;
      this.flushBelow(this.log.highWatermark);
    }, wait);
    this.storeWriteTimer.unref();
  }

  /**
   * How a batch changes the row count. Writes that did not read the stored rows are counted the
   * first time this is asked: whether each key held a value before is then its older version, or
   * else lmdb, which holds no newer change of the key until this batch is written.
   */
  private rowDeltaOf(batch: AppendedBatch): number {
    if (batch.rowDelta === undefined) {
      let delta = 0;
      for (const v of batch.versions) {
        const existed = v.older ? v.older.value !== null : this.state.doesExist(v.key);
        delta += (v.value === null ? 0 : 1) - (existed ? 1 : 0);
      }
      batch.rowDelta = delta;
    }
    return batch.rowDelta;
  }

  /** Drops a version now visible in lmdb: always the oldest of its key. */
  private forget(v: Version): void {
    if (this.versions.deleteIfValue(v.key, v)) return;
    for (let x = this.versions.get(v.key); x !== undefined; x = x.older) {
      if (x.older === v) {
        x.older = undefined;
        return;
      }
    }
  }

  /** Resolves once lmdb holds every change committed now; throws if writing to it has failed. */
  private async written(): Promise<void> {
    const target = this.committedEnd();
    while (this.flushedOffset < target && !this.closed) {
      if (this.storeFailure) throw this.storeFailure;
      if (this.storeBlocked && !this.storeWrite) throw this.storeBlocked;
      if (!this.storeWrite && this.flushPaused === 0) this.flushBelow(this.log.highWatermark);
      if (this.storeWrite) await this.storeWrite;
      else if (this.flushPaused > 0) await this.snapshotTaken; // it flushes when it ends
      else return; // nothing left to write: the state is complete
    }
  }

  /** Waits until no lmdb transaction is in flight. */
  private async storeIdle(): Promise<void> {
    while (this.storeWrite) await this.storeWrite;
  }

  // ------------------------------------------------------------------ reads

  /**
   * Hands the committed value of each of `keys` (encoded primary keys), in order, to `visit`:
   * undefined when the key holds no row. A value is a view valid only until `visit` returns.
   */
  lookup(keys: readonly Uint8Array[], visit: (value: Uint8Array | undefined) => void): void {
    this.checkServing();
    const end = Number(this.log.highWatermark);
    for (let i = 0; i < keys.length; i++) visit(this.committedValue(keys[i], end));
  }

  /** The committed value of a key below `end`, or undefined; a view valid until the next lmdb read. */
  private committedValue(key: Uint8Array, end: number): Uint8Array | undefined {
    for (let v = this.versions.get(key); v !== undefined; v = v.older) {
      if (v.batch.lastOffset < end) return v.value ?? undefined;
    }
    return this.storedValue(key);
  }

  /** Committed values whose key starts with each prefix (an encoded bucket key). */
  async prefixLookup(prefixes: Uint8Array[]): Promise<Uint8Array[][]> {
    this.checkServing();
    // Ranges are read from lmdb alone, once it holds every change committed at the call.
    await this.written();
    this.checkOpen();
    return prefixes.map((prefix) => {
      const out: Uint8Array[] = [];
      for (const { key, value } of this.state.getRange({ start: prefix })) {
        if (!startsWith(key as Uint8Array, prefix)) break;
        out.push(value as Uint8Array);
      }
      return out;
    });
  }

  /**
   * A consistent read of the whole state: the values, in key order, and the changelog offset they
   * correspond to. lmdb's state at one read transaction, with the committed versions not yet
   * visible there laid over it.
   */
  scanAll(): { offset: bigint; values: Iterable<Uint8Array>; done: () => void } {
    this.checkServing();
    const offset = this.committedEnd();
    const end = Number(offset);
    const txn = this.env.useReadTransaction();
    const newer: Version[] = [];
    for (const newest of this.versions.values()) {
      for (let v: Version | undefined = newest; v !== undefined; v = v.older) {
        if (v.batch.lastOffset < end) {
          newer.push(v);
          break;
        }
      }
    }
    newer.sort((a, b) => Buffer.compare(a.key, b.key));
    const range = this.state.getRange({ transaction: txn });
    return {
      offset,
      values: (function* () {
        let next = 0;
        for (const { key, value } of range) {
          let order = -1;
          while (next < newer.length && (order = Buffer.compare(newer[next].key, key as Uint8Array)) < 0) {
            const v = newer[next++];
            if (v.value !== null) yield v.value;
          }
          if (order === 0) {
            const v = newer[next++];
            if (v.value !== null) yield v.value;
          } else yield value as Uint8Array;
        }
        for (; next < newer.length; next++) if (newer[next].value !== null) yield newer[next].value!;
      })(),
      done: () => txn.done(),
    };
  }

  // ------------------------------------------------------------------ snapshots and recovery

  /**
   * Copies the committed state to the snapshot store (the log offset it holds is recorded with it),
   * then has `register` commit it to the coordinator; a snapshot that is not registered is removed.
   * Snapshots of the tablet, copy and registration, are taken one at a time.
   */
  async snapshot(register: (handle: KvSnapshotHandle) => Promise<void>): Promise<KvSnapshotHandle> {
    this.checkServing();
    const run = this.snapshotting.then(async () => {
      const handle = await this.copyState();
      try {
        await register(handle);
      } catch (err) {
        await this.snapshots.remove(handle).catch((e: unknown) => this.logger.warn({ err: e, dir: this.dir }, 'could not remove a KV snapshot that was not registered'));
        throw err;
      }
      this.snapshots.learn(handle);
      return handle;
    });
    this.snapshotting = run.catch(() => undefined);
    return run;
  }

  private async copyState(): Promise<KvSnapshotHandle> {
    // What is committed goes to lmdb first, not at the next kv.flush.interval: the snapshot then
    // holds it. A store that cannot write is copied at its last good state.
    await this.written().catch(() => undefined);
    let taken!: () => void;
    this.snapshotTaken = new Promise((resolve) => (taken = resolve));
    // No lmdb write may run while the state is copied, so that the recorded offset is exact.
    this.flushPaused++;
    try {
      this.checkOpen();
      await this.storeIdle();
      if (this.storeFailure) throw this.storeFailure;
      return await this.snapshots.take(this.env, { logOffset: this.flushedOffset, rowCount: this.rowCountValue });
    } finally {
      this.flushPaused--;
      taken();
      this.flushBelow(this.log.highWatermark);
    }
  }

  /**
   * A standby's catch-up: replays the changelog up to the high watermark, again while it moves
   * during a replay. A failure (a full disk, say) is retried when the high watermark moves next.
   */
  private followHighWatermark(): void {
    if (this.closed) return;
    if (this.following) {
      this.followAgain = true;
      return;
    }
    this.following = (async () => {
      try {
        do {
          this.followAgain = false;
          await this.replay(this.log.highWatermark);
        } while (this.followAgain && !this.closed);
      } catch (err) {
        this.logger.warn({ err, dir: this.dir }, 'standby kv state could not apply the changelog: it tries again when the high watermark moves');
      } finally {
        this.following = undefined;
      }
    })();
  }

  /**
   * Re-applies the changelog from the stored state's offset up to `end` (a batch boundary: the
   * durable end or the high watermark), literally; returns the number of changes applied. Recovery
   * and a standby's catch-up both come here.
   */
  private async replay(end: bigint): Promise<number> {
    let offset = this.flushedOffset;
    if (offset >= end) return 0;
    const current = this.current;
    let applied = 0;
    let pending: { key: Uint8Array; value: Uint8Array | null }[] = [];
    const writePending = (upTo: bigint): void => {
      this.writeReplayed(pending, upTo);
      pending = [];
    };
    while (offset < end && !this.closed) {
      const { records } = await this.log.read(offset, 8 * 1024 * 1024, 'durable-end');
      if (records.length === 0) break;
      for (const batch of logBatchesOf(records)) {
        const header = readLogBatchHeader(batch);
        const next = header.baseOffset + BigInt(header.lastOffsetDelta) + 1n;
        if (next <= offset) continue;
        if (next > end) break;
        if (header.recordCount > 0) {
          const { changeTypes, arrow } = splitChangelogPayload(logBatchPayload(batch), header.recordCount);
          const written = this.schemas(header.schemaId);
          if (!written) throw new TributaryError('SCHEMA_NOT_EXIST', `changelog batch at offset ${header.baseOffset} was written with schema ${header.schemaId}, which the table does not have`);
          // Rows come back in the current schema: columns the batch's schema lacks are null.
          const read = internalRowReader(decodeArrowPayload(toArrowSchema(written), arrow), current.schema);
          const internal: unknown[] = [];
          for (let i = 0; i < header.recordCount; i++) {
            if (header.baseOffset + BigInt(i) < offset) continue;
            const type = changeTypeOf(changeTypes[i]);
            if (type === '-U') continue;
            read(i, internal);
            const key = this.keyEncoder.encode(internal);
            pending.push({ key, value: type === '-D' ? null : encodeKvValue(current.schemaId, current.rowEncoder.encode(internal)) });
            applied++;
          }
        }
        offset = next;
        if (pending.length >= REPLAY_TXN_ROWS) writePending(offset);
      }
    }
    if (!this.closed) writePending(offset);
    return applied;
  }

  /**
   * Writes replayed changes and the offset they bring the state to in one synchronous
   * transaction, before the tablet serves (no asynchronous write is in flight then). Each key is
   * checked for existence to keep the row count. On a full disk they, and all replayed after them,
   * are kept as committed versions instead, which reads see and the store takes once it can
   * (flushBelow), so a restart on a full disk needs no write.
   */
  private writeReplayed(changes: { key: Uint8Array; value: Uint8Array | null }[], upTo: bigint): void {
    if (changes.length === 0 && upTo === this.flushedOffset) return;
    if (this.unwritten.length === 0) {
      try {
        let delta = 0;
        this.env.transactionSync(() => {
          for (const c of changes) {
            delta += (c.value === null ? 0 : 1) - (this.state.doesExist(c.key) ? 1 : 0);
            if (c.value === null) this.state.removeSync(c.key);
            else this.state.putSync(c.key, c.value);
          }
          this.meta.putSync(ROW_COUNT, String(this.rowCountValue + delta));
          this.meta.putSync(FLUSHED_OFFSET, upTo.toString());
        });
        this.rowCountValue += delta;
        this.flushedOffset = upTo;
        this.flushingOffset = upTo;
        return;
      } catch (err) {
        // A standby keeps nothing in memory: its next catch-up replays the same changes again.
        if (!isNoSpace(err) || this.standby) throw err;
        this.logger.warn({ err, dir: this.dir, fromOffset: String(this.flushedOffset) }, 'kv state replay kept in memory: the data disk is full');
      }
    }
    // One batch ending below `upTo`: committed, since recovery ends at the high watermark.
    if (changes.length === 0) return;
    const batch: AppendedBatch = { lastOffset: Number(upTo) - 1, versions: [], rowDelta: undefined };
    for (const c of changes) {
      const version: Version = { key: c.key, value: c.value, batch, older: this.versions.get(c.key) };
      this.versions.set(c.key, version);
      batch.versions.push(version);
    }
    this.unwritten.push(batch);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    if (this.standby) {
      this.closed = true;
      await this.following;
      await this.closeStore();
      return;
    }
    await this.writing;
    await this.written().catch(() => undefined); // a failed store keeps its last good state
    await this.storeIdle();
    this.closed = true;
    if (this.storeBlocked) {
      // lmdb's close waits for the batch its failed commit left open, which a full disk never
      // ends: the environment is left to the process. Its state stays at its last good offset.
      this.logger.warn({ dir: this.dir }, 'kv state closed on a full disk: lmdb is left open');
      clearTimeout(this.storeRetry);
      clearTimeout(this.storeWriteTimer);
      this.unsubscribe();
      return;
    }
    await this.closeStore();
  }

  private async closeStore(): Promise<void> {
    clearTimeout(this.storeRetry);
    clearTimeout(this.storeWriteTimer);
    this.unsubscribe();
    await this.env.close();
  }

  private checkOpen(): void {
    if (this.closed) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `the KV state of ${this.dir} is closed`);
  }

  /** Reads, writes and snapshots are the leader's: a standby's state serves none. */
  private checkServing(): void {
    this.checkOpen();
    if (this.standby) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `the KV state of ${this.dir} is a standby's`);
  }
}

/** lmdb rejects each write of a failed commit with the same generic error; its `commitError` holds the reason. */
async function commitFailure(err: unknown): Promise<unknown> {
  const reason = (err as { commitError?: Promise<unknown> }).commitError;
  return reason ? reason.then(() => err, (e: unknown) => e) : err;
}

function startsWith(key: Uint8Array, prefix: Uint8Array): boolean {
  if (key.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (key[i] !== prefix[i]) return false;
  return true;
}
