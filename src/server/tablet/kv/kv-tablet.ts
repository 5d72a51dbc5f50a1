/**
 * KvTablet: the current state of one primary-key bucket, on lmdb, with the bucket's log as its WAL.
 *
 * Write path (DESIGN.md §3): for each record of a KV batch, read the old value (pre-write buffer,
 * then the store), merge it with the merge engine, collect the changelog (+I, -U, +U, -D); append the
 * changelog as one log batch (carrying the KV batch's writer id and sequence, so the log's
 * idempotence also dedupes KV writes); then put the new values into the pre-write buffer. When the
 * log's high watermark passes a buffered change it is written to lmdb, in the same synchronous step
 * that moves the high watermark, so lookups (which read lmdb only) and log readers (which read below
 * the high watermark) see exactly the same committed changes.
 *
 * lmdb layout (one environment per bucket, `kv-<bucket>/`):
 *   db "state": encoded primary key → KV value (schema id i16 + compacted row)
 *   db "meta":  "flushed-offset" → first changelog offset NOT applied (decimal text),
 *               "row-count" → live keys (decimal text); both written in the same transaction as the state
 *
 * Recovery: the state is what lmdb holds up to "flushed-offset"; the changelog from there to the end
 * of the log is replayed literally (+I/+U put, -D delete, -U skipped). When there is no local state, or
 * the log no longer holds the changelog after it (retention), the latest KV snapshot is restored first.
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
import { CompactedKeyEncoder } from '../../../common/key-encoder.js';
import { type PrimaryKeyTableOptions, primaryKeyTableOptions, validatePartialUpdate } from '../../../common/pk-table.js';
import { CompactedRowEncoder, encodeKvValue, KvValueDecoder, primaryKeyLayout } from '../../../common/row-encoder.js';
import type { Schema, TableInfo } from '../../../common/schema.js';
import { decodeArrowPayload, internalRowReader } from '../../../record/arrow-payload.js';
import { toArrowSchema } from '../../../record/arrow-schema.js';
import { encodeChangelogPayload, splitChangelogPayload } from '../../../record/changelog.js';
import { ColumnBatchBuilder } from '../../../record/column-batch-builder.js';
import type { ArrowCompression } from '../../../record/compression.js';
import { buildLogBatch, logBatchesOf, logBatchPayload, readLogBatchHeader } from '../../../record/log-batch.js';
import { readKvBatch } from '../../../record/kv-batch.js';
import type { Logger } from '../../logger.js';
import type { LogTablet } from '../log/log-tablet.js';
import { createMergeEngine, type MergeEngine } from './merge-engine.js';
import { KvSnapshotStore, type KvSnapshotInfo } from './kv-snapshot-store.js';

const FLUSHED_OFFSET = 'flushed-offset';
const ROW_COUNT = 'row-count';
/** Rows per lmdb transaction while replaying the changelog. */
const REPLAY_TXN_ROWS = 50_000;

interface Buffered {
  /** New value, or null for a deleted key. */
  value: Uint8Array | null;
  /** Last changelog offset of the batch that made this value; committed once below the high watermark. */
  offset: bigint;
}

export interface PutKvResult {
  logEndOffset: bigint;
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
  options: PrimaryKeyTableOptions;
}

function writeSchemaOf(table: TableInfo, schemas: SchemaLookup): WriteSchema {
  const schema = table.schema;
  return {
    schemaId: table.schemaId,
    schema,
    rowEncoder: new CompactedRowEncoder(schema.columns.map((c) => c.type)),
    rows: new KvValueDecoder(schema, table.schemaId, schemas),
    engine: createMergeEngine(table),
    options: primaryKeyTableOptions(schema, table.properties),
  };
}

export class KvTablet {
  private readonly env: RootDatabase<Uint8Array, Uint8Array>;
  private readonly state: Database<Uint8Array, Uint8Array>;
  private readonly meta: Database<string, string>;
  private readonly preWrite = new Map<string, Buffered & { key: Uint8Array }>();
  /** Row-count change of each appended batch not yet in lmdb, in offset order. */
  private readonly pendingCounts: { offset: bigint; delta: number }[] = [];
  /** Primary-key columns never change, nor their places: the key encoding outlives schema changes. */
  private readonly keyEncoder: CompactedKeyEncoder;
  private current: WriteSchema;
  private readonly compression: ArrowCompression;
  private readonly zstdLevel: number;
  private writing: Promise<unknown> = Promise.resolve();
  private flushedOffset: bigint;
  private rowCountValue: number;
  private flushPaused = 0;
  /** First changelog offset of the batch being appended, while its append runs. */
  private inflightFrom?: bigint;
  private readonly unsubscribe: () => void;
  private closed = false;

  private constructor(
    private readonly dir: string,
    private readonly log: LogTablet,
    table: TableInfo,
    private readonly schemas: SchemaLookup,
    readonly snapshots: KvSnapshotStore,
    private readonly logger: Logger,
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
    this.rowCountValue = Number(this.meta.get(ROW_COUNT) ?? '0');
    this.unsubscribe = log.onHighWatermark((hw) => this.flushBelow(hw));
  }

  /** Opens the state of a bucket, restoring the latest snapshot and replaying the changelog as needed. */
  static async open(dir: string, log: LogTablet, table: TableInfo, schemas: SchemaLookup, snapshots: KvSnapshotStore, logger: Logger): Promise<KvTablet> {
    const hasLocal = fs.existsSync(path.join(dir, 'data.mdb'));
    let restored: KvSnapshotInfo | undefined;
    if (!hasLocal) restored = await snapshots.restoreLatest(dir);
    else await fs.promises.mkdir(dir, { recursive: true });
    let tablet = new KvTablet(dir, log, table, schemas, snapshots, logger);
    if (tablet.flushedOffset < log.logStartOffset || tablet.flushedOffset > log.logEndOffset) {
      // The changelog after the local state was deleted by retention, or the log lost a tail the
      // state already holds (an OS crash under a lazy flush policy): start from the snapshot.
      await tablet.closeStore();
      await fs.promises.rm(dir, { recursive: true, force: true });
      restored = await snapshots.restoreLatest(dir);
      tablet = new KvTablet(dir, log, table, schemas, snapshots, logger);
      if (tablet.flushedOffset < log.logStartOffset || tablet.flushedOffset > log.logEndOffset) {
        throw new TributaryError(
          'KV_STORAGE_EXCEPTION',
          `bucket state at offset ${tablet.flushedOffset} cannot be recovered: the changelog holds [${log.logStartOffset}, ${log.logEndOffset}) and no snapshot fits it`,
        );
      }
    }
    const fromOffset = tablet.flushedOffset;
    const replayed = await tablet.replay();
    if (restored || replayed > 0) {
      logger.info({ snapshot: restored?.snapshotId, fromOffset: String(fromOffset), replayed, rows: tablet.rowCount }, 'kv state recovered');
    }
    return tablet;
  }

  get rowCount(): number {
    return this.rowCountValue;
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
    if (targetColumns) validatePartialUpdate(this.current.schema, this.current.options.mergeEngine, targetColumns);
    const run = this.writing.then(async () => {
      let lastOffset = -1n;
      for (const batch of batches) lastOffset = await this.applyBatch(batch, targetColumns);
      return lastOffset;
    });
    this.writing = run.catch(() => undefined);
    return run.then(async (lastOffset) => {
      if (waitFor === 'high-watermark') await this.waitForHighWatermark(lastOffset + 1n);
      return { logEndOffset: this.log.logEndOffset };
    });
  }

  private async applyBatch(bytes: Buffer, targetColumns: number[] | undefined): Promise<bigint> {
    this.checkOpen();
    const batch = readKvBatch(bytes);
    // The schema this batch is merged and logged in, even if the table changes while it is appended.
    const current = this.current;
    if (batch.schemaId > current.schemaId) {
      throw new TributaryError('SCHEMA_NOT_EXIST', `KV batch written with schema ${batch.schemaId}, newer than the table's schema ${current.schemaId} on this server`);
    }
    const columns = current.schema.columns;
    const staged = new Map<string, { key: Uint8Array; value: Uint8Array | null; row: unknown[] | null; existedBefore: boolean }>();
    const builder = new ColumnBatchBuilder(current.schema);
    const changeTypes: number[] = [];
    for (const record of batch.records) {
      const k = keyString(record.key);
      // Full-row upserts under last_row with a WAL changelog never look at the stored row.
      const needsOld = current.engine.needsOldValue || record.row === null || targetColumns !== undefined;
      const old = this.currentRow(current, k, record.key, staged, needsOld);
      const upsert = record.row === null ? undefined : current.rows.decodeRow(batch.schemaId, record.row);
      const input = upsert === undefined ? { old, delete: old ?? new Array(columns.length).fill(null) } : { old, upsert };
      const result = current.engine.merge(targetColumns && targetColumns.length > 0 ? { ...input, targetColumns } : input);
      for (const change of result.changes) {
        builder.appendInternalRow(change.row);
        changeTypes.push(CHANGE_TYPE_BYTE[change.type]);
      }
      if (result.value === undefined) continue;
      // A row kept as written (last_row, same schema) is stored with the bytes it came in, without re-encoding.
      const asWritten = result.value === upsert && record.row !== null && batch.schemaId === current.schemaId;
      const rowBytes = asWritten ? record.row : result.value && current.rowEncoder.encode(result.value);
      const value = result.value === null || !rowBytes ? null : encodeKvValue(current.schemaId, rowBytes);
      const existedBefore = staged.get(k)?.existedBefore ?? old !== undefined;
      staged.set(k, { key: record.key, value, row: result.value, existedBefore });
    }
    const payload = encodeChangelogPayload(Uint8Array.from(changeTypes), builder.build(), this.compression, this.zstdLevel);
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
    let result;
    try {
      [result] = await this.log.append([logBatch], 0, 'written');
    } finally {
      this.inflightFrom = undefined;
    }
    if (!result.duplicate) {
      let delta = 0;
      for (const [k, s] of staged) {
        this.preWrite.set(k, { key: s.key, value: s.value, offset: result.lastOffset });
        delta += (s.value === null ? 0 : 1) - (s.existedBefore ? 1 : 0);
      }
      if (current.engine.needsOldValue) this.pendingCounts.push({ offset: result.lastOffset, delta });
    }
    this.flushBelow(this.log.highWatermark);
    return result.lastOffset;
  }

  /** The row a write merges with, in the current schema: staged in this batch, else buffered, else stored. */
  private currentRow(current: WriteSchema, k: string, key: Uint8Array, staged: Map<string, { row: unknown[] | null }>, needed: boolean): unknown[] | undefined {
    const s = staged.get(k);
    if (s) return s.row ?? undefined;
    if (!needed) return undefined;
    const buffered = this.preWrite.get(k);
    const value = buffered ? buffered.value : this.state.getBinary(key);
    return value ? current.rows.decode(value) : undefined;
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

  /** Writes every buffered change below the high watermark into lmdb, in one transaction. */
  private flushBelow(highWatermark: bigint): void {
    const hw = this.inflightFrom !== undefined && this.inflightFrom < highWatermark ? this.inflightFrom : highWatermark;
    if (this.closed || this.flushPaused > 0 || this.preWrite.size === 0) {
      if (!this.closed && this.flushPaused === 0 && hw > this.flushedOffset) this.setFlushed(hw);
      return;
    }
    // Row counts: when every write saw the stored row, each batch knows how it changed the count;
    // otherwise (last_row with a WAL changelog) the store is asked whether each key existed.
    const counted = this.current.engine.needsOldValue;
    let delta = 0;
    while (counted && this.pendingCounts.length > 0 && this.pendingCounts[0].offset < hw) delta += this.pendingCounts.shift()!.delta;
    const due: { key: Uint8Array; value: Uint8Array | null }[] = [];
    for (const [k, b] of this.preWrite) {
      if (b.offset >= hw) continue;
      due.push(b);
      this.preWrite.delete(k);
    }
    this.commit(due, hw, counted ? delta : undefined);
  }

  /**
   * Writes changes into lmdb with the offset they bring the state to, in one transaction. Without
   * a known `rowDelta`, each key is checked for existence to keep the row count.
   */
  private commit(changes: { key: Uint8Array; value: Uint8Array | null }[], upTo: bigint, rowDelta?: number): void {
    let delta = rowDelta ?? 0;
    this.env.transactionSync(() => {
      for (const c of changes) {
        if (rowDelta === undefined) delta += (c.value === null ? 0 : 1) - (this.state.doesExist(c.key) ? 1 : 0);
        if (c.value === null) this.state.removeSync(c.key);
        else this.state.putSync(c.key, c.value);
      }
      this.rowCountValue += delta;
      this.meta.putSync(ROW_COUNT, String(this.rowCountValue));
      if (upTo > this.flushedOffset) this.meta.putSync(FLUSHED_OFFSET, upTo.toString());
    });
    if (upTo > this.flushedOffset) this.flushedOffset = upTo;
  }

  private setFlushed(hw: bigint): void {
    if (hw <= this.flushedOffset) return;
    this.env.transactionSync(() => this.meta.putSync(FLUSHED_OFFSET, hw.toString()));
    this.flushedOffset = hw;
  }

  // ------------------------------------------------------------------ reads

  /** Committed values of `keys` (encoded primary keys), undefined when absent. */
  lookup(keys: Uint8Array[]): (Uint8Array | undefined)[] {
    this.checkOpen();
    return keys.map((k) => this.state.getBinary(k) ?? undefined);
  }

  /** Committed values whose key starts with each prefix (an encoded bucket key). */
  prefixLookup(prefixes: Uint8Array[]): Uint8Array[][] {
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

  /** A consistent read of the whole state: the values and the changelog offset they correspond to. */
  scanAll(): { offset: bigint; values: Iterable<Uint8Array>; done: () => void } {
    this.checkOpen();
    const txn = this.env.useReadTransaction();
    const offset = BigInt((this.meta.get(FLUSHED_OFFSET, { transaction: txn } as never) as string | undefined) ?? '0');
    const range = this.state.getRange({ transaction: txn });
    return {
      offset,
      values: (function* () {
        for (const { value } of range) yield value as Uint8Array;
      })(),
      done: () => txn.done(),
    };
  }

  // ------------------------------------------------------------------ snapshots and recovery

  /** Copies the committed state to the snapshot store; the log offset it holds is recorded with it. */
  async snapshot(): Promise<KvSnapshotInfo> {
    this.checkOpen();
    // No flush may change the state while it is copied, so that the recorded offset is exact.
    this.flushPaused++;
    try {
      return await this.snapshots.take(this.env, { logOffset: this.flushedOffset, rowCount: this.rowCountValue });
    } finally {
      this.flushPaused--;
      this.flushBelow(this.log.highWatermark);
    }
  }

  /** Re-applies the changelog after the stored state, literally; returns the number of changes applied. */
  private async replay(): Promise<number> {
    const end = this.log.logEndOffset;
    let offset = this.flushedOffset;
    if (offset >= end) return 0;
    const current = this.current;
    let applied = 0;
    let pending: { key: Uint8Array; value: Uint8Array | null }[] = [];
    const writePending = (upTo: bigint): void => {
      this.commit(pending, upTo);
      pending = [];
    };
    while (offset < end) {
      const { records } = await this.log.read(offset, 8 * 1024 * 1024);
      if (records.length === 0) break;
      for (const batch of logBatchesOf(records)) {
        const header = readLogBatchHeader(batch);
        const next = header.baseOffset + BigInt(header.lastOffsetDelta) + 1n;
        if (next <= offset) continue;
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
    writePending(offset);
    return applied;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.writing;
    this.flushBelow(this.log.highWatermark);
    this.closed = true;
    await this.closeStore();
  }

  private async closeStore(): Promise<void> {
    this.unsubscribe();
    await this.env.close();
  }

  private checkOpen(): void {
    if (this.closed) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `the KV state of ${this.dir} is closed`);
  }
}

function keyString(key: Uint8Array): string {
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1');
}

function startsWith(key: Uint8Array, prefix: Uint8Array): boolean {
  if (key.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (key[i] !== prefix[i]) return false;
  return true;
}
