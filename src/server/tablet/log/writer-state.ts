/**
 * Idempotent writers of one bucket: per writer id, the metadata of its last
 * WRITER_BATCHES_RETAINED batches, so that a retried batch is acknowledged with the offsets it
 * got the first time instead of being appended twice.
 *
 * Sequence rules for a batch (writerId, batchSequence) of an idempotent writer:
 * - sequence among the retained batches: a duplicate, answered with the original offsets;
 * - sequence = last + step (wrapping after i32 max): appended;
 * - any other sequence: OUT_OF_ORDER_SEQUENCE_EXCEPTION (a gap, or older than the window);
 * - unknown writer: sequence step - 1 starts it, anything else is UNKNOWN_WRITER_ID_EXCEPTION.
 * The step is 1 for Tributary's writers, whose sequences count batches. A Kafka producer's count
 * records: its batches carry the sequence of their last record and the step is their record
 * count, which makes the rules Kafka's (a batch's first sequence follows the last one's).
 *
 * Snapshot file `writer-snapshot`, written atomically at checkpoint (little-endian):
 *   Version      i16  1
 *   Crc          u32  CRC-32C of every byte after this field
 *   Offset       i64  the snapshot reflects exactly the batches below this offset
 *   WriterCount  i32
 *   WriterCount × {
 *     WriterId   i64
 *     BatchCount i32  1..5, oldest first
 *     BatchCount × { BatchSequence i32, BaseOffset i64, LastOffset i64, CommitTimestamp i64 }
 *   }
 * The log rebuilds what follows `Offset` from batch headers on recovery.
 */
import fs from 'node:fs';
import path from 'node:path';
import { crc32c } from '@node-rs/crc32';
import { TributaryError } from '../../../common/errors.js';
import { writeFileAtomic } from '../../../common/files.js';
import { storageError } from './storage-error.js';

export const WRITER_BATCHES_RETAINED = 5;
export const WRITER_SNAPSHOT_FILE = 'writer-snapshot';

const SNAPSHOT_VERSION = 1;
const CRC_END = 6;
const MAX_SEQUENCE = 0x7fffffff;

export interface WriterBatch {
  sequence: number;
  baseOffset: bigint;
  lastOffset: bigint;
  /** Commit timestamp, ms. */
  timestamp: number;
}

function nextSequence(sequence: number, step: number): number {
  return (sequence + step) % (MAX_SEQUENCE + 1);
}

export class WriterStateManager {
  /** Per writer, its last batches, oldest first. */
  private readonly writers = new Map<bigint, WriterBatch[]>();

  get writerCount(): number {
    return this.writers.size;
  }

  /** Starts checking the batches of one append; nothing changes until `commit()`. */
  begin(): WriterAppend {
    return new WriterAppend(this.writers);
  }

  /** Records a batch found in the log during recovery, without sequence checks. */
  replay(writerId: bigint, batch: WriterBatch): void {
    this.writers.set(writerId, withBatch(this.writers.get(writerId), batch));
  }

  /** Forgets writers whose last batch is older than `nowMs - expirationMs`; returns how many. */
  removeExpired(nowMs: number, expirationMs: number): number {
    let removed = 0;
    for (const [id, batches] of this.writers) {
      if (batches[batches.length - 1].timestamp < nowMs - expirationMs) {
        this.writers.delete(id);
        removed++;
      }
    }
    return removed;
  }

  /**
   * Forgets batches at or above `offset` (the log ends there); writers left without any are
   * dropped and returned: batches of theirs older than the retained window may still be in the log.
   */
  truncateFrom(offset: bigint): Set<bigint> {
    const dropped = new Set<bigint>();
    for (const [id, batches] of this.writers) {
      const kept = batches.filter((b) => b.lastOffset < offset);
      if (kept.length === 0) {
        this.writers.delete(id);
        dropped.add(id);
      } else if (kept.length !== batches.length) this.writers.set(id, kept);
    }
    return dropped;
  }

  /** The snapshot file's bytes for the state as of `offset`. */
  snapshot(offset: bigint): Buffer {
    let size = 18;
    for (const batches of this.writers.values()) size += 12 + batches.length * 28;
    const buf = Buffer.allocUnsafe(size);
    buf.writeInt16LE(SNAPSHOT_VERSION, 0);
    buf.writeBigInt64LE(offset, CRC_END);
    buf.writeInt32LE(this.writers.size, CRC_END + 8);
    let at = CRC_END + 12;
    for (const [id, batches] of this.writers) {
      buf.writeBigInt64LE(id, at);
      buf.writeInt32LE(batches.length, at + 8);
      at += 12;
      for (const b of batches) {
        buf.writeInt32LE(b.sequence, at);
        buf.writeBigInt64LE(b.baseOffset, at + 4);
        buf.writeBigInt64LE(b.lastOffset, at + 12);
        buf.writeBigInt64LE(BigInt(b.timestamp), at + 20);
        at += 28;
      }
    }
    buf.writeUInt32LE(crc32c(buf.subarray(CRC_END)), 2);
    return buf;
  }

  /** Replaces the snapshot file of `dir` with `snapshot` (made by `snapshot()`), atomically. */
  static save(dir: string, snapshot: Buffer): Promise<void> {
    return writeFileAtomic(dir, WRITER_SNAPSHOT_FILE, snapshot);
  }

  /**
   * Loads the snapshot of `dir`: the state and the offset it covers, or undefined when there is
   * none. A damaged snapshot is an error the caller reports before rebuilding from the log.
   */
  static async load(dir: string): Promise<{ state: WriterStateManager; offset: bigint } | undefined> {
    const file = path.join(dir, WRITER_SNAPSHOT_FILE);
    let buf: Buffer;
    try {
      buf = await fs.promises.readFile(file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw storageError(`cannot read ${file}`, err);
    }
    return WriterStateManager.decode(buf, file);
  }

  /**
   * The state below `offset` from a snapshot taken at or after it: each writer's batches below
   * `offset` (writers with none are left out). Replaying the batches from `offset` on then gives
   * the state of the snapshot's log, the batches that pushed older ones out of a writer's window
   * included. Undefined when the snapshot is older than `offset`.
   */
  static below(offset: bigint, buf: Buffer, source: string): WriterStateManager | undefined {
    const snapshot = WriterStateManager.decode(buf, source);
    if (snapshot.offset < offset) return undefined;
    snapshot.state.truncateFrom(offset);
    return snapshot.state;
  }

  /** The state and offset of a snapshot's bytes (read from `source`, named in errors). */
  static decode(buf: Buffer, source: string): { state: WriterStateManager; offset: bigint } {
    const corrupt = (why: string) => new TributaryError('LOG_STORAGE_EXCEPTION', `writer snapshot ${source}: ${why}`);
    if (buf.length < CRC_END + 12) throw corrupt('truncated');
    if (buf.readInt16LE(0) !== SNAPSHOT_VERSION) throw corrupt(`unknown version ${buf.readInt16LE(0)}`);
    if (buf.readUInt32LE(2) !== crc32c(buf.subarray(CRC_END))) throw corrupt('CRC mismatch');
    const state = new WriterStateManager();
    const offset = buf.readBigInt64LE(CRC_END);
    const count = buf.readInt32LE(CRC_END + 8);
    let at = CRC_END + 12;
    for (let i = 0; i < count; i++) {
      const id = buf.readBigInt64LE(at);
      const n = buf.readInt32LE(at + 8);
      at += 12;
      const batches: WriterBatch[] = [];
      for (let j = 0; j < n; j++) {
        batches.push({
          sequence: buf.readInt32LE(at),
          baseOffset: buf.readBigInt64LE(at + 4),
          lastOffset: buf.readBigInt64LE(at + 12),
          timestamp: Number(buf.readBigInt64LE(at + 20)),
        });
        at += 28;
      }
      if (batches.length > 0) state.writers.set(id, batches);
    }
    return { state, offset };
  }
}

/** Sequence checks of one append, seeing the batches staged before it in the same append. */
export class WriterAppend {
  private readonly staged = new Map<bigint, WriterBatch[]>();

  constructor(private readonly writers: Map<bigint, WriterBatch[]>) {}

  /** The original batch when `sequence` is a duplicate; undefined when the batch is to be appended. */
  check(writerId: bigint, sequence: number, step = 1): WriterBatch | undefined {
    const batches = this.staged.get(writerId) ?? this.writers.get(writerId);
    if (!batches) {
      if (sequence === step - 1) return undefined;
      throw new TributaryError(
        'UNKNOWN_WRITER_ID_EXCEPTION',
        `writer ${writerId} is not known to this bucket (new or expired) and sent batch sequence ${sequence} instead of ${step - 1}`,
      );
    }
    for (const b of batches) if (b.sequence === sequence) return b;
    const expected = nextSequence(batches[batches.length - 1].sequence, step);
    if (sequence === expected) return undefined;
    throw new TributaryError('OUT_OF_ORDER_SEQUENCE_EXCEPTION', `writer ${writerId} sent batch sequence ${sequence}, expected ${expected}`);
  }

  /** Stages a batch that passed `check`. */
  record(writerId: bigint, batch: WriterBatch): void {
    this.staged.set(writerId, withBatch(this.staged.get(writerId) ?? this.writers.get(writerId), batch));
  }

  /** Applies the staged batches once they are written. */
  commit(): void {
    for (const [id, batches] of this.staged) this.writers.set(id, batches);
  }
}

/** A new list with `batch` last, keeping the retained window (lists are never shared mutably). */
function withBatch(batches: WriterBatch[] | undefined, batch: WriterBatch): WriterBatch[] {
  const next = batches ? batches.slice(Math.max(0, batches.length - WRITER_BATCHES_RETAINED + 1)) : [];
  next.push(batch);
  return next;
}
