/**
 * LogTablet: the log of one bucket (Kafka's UnifiedLog, Fluss's LogTablet): its segments, high
 * watermark, idempotent writer state and leader-epoch cache, all in one directory.
 *
 * Files of the bucket dir:
 *   <base offset, 20 digits>.log .index .timeindex   one LogSegment (log-segment.ts)
 *   recovery-point-checkpoint   checkpoint-file.ts layout, one entry `<offset>`: every batch below
 *                               it, and the index entries below it, were fsynced before the file was
 *                               written
 *   high-watermark-checkpoint   replicated logs only, same layout, one entry `<offset>`: the high
 *                               watermark when the file was written
 *   leader-epoch-checkpoint     leader-epoch-cache.ts
 *   writer-snapshot             writer-state.ts
 *   *.tmp                       an interrupted atomic write, removed on open
 *
 * Two ends below the log end: the durable end (what the flush policy made safe) and the high
 * watermark (what readers see). A log that is not replicated has one: the high watermark is the
 * durable end. A replicated one (a replica of a bucket with followers) moves its high watermark
 * only when told (`advanceHighWatermark`: the leader's lowest log end of its in-sync replicas, or
 * what a follower's leader reported), and followers read up to the durable end.
 *
 * Invariants:
 * - logStartOffset <= highWatermark <= durableEndOffset <= logEndOffset, all at batch boundaries;
 *   both ends only move forward except when a truncation cuts them back; readers see only batches
 *   below the high watermark ('durable-end' reads: below the durable end);
 * - with log.flush.interval-messages = 1 the durable end is the fsynced end of the log and a
 *   durable append resolves once its batches are below it; appends waiting meanwhile share the next
 *   fsync (group commit). Otherwise it is the written end, which survives a process kill;
 * - on open the high watermark of a replicated log is its checkpoint, at most the recovered log
 *   end (the log start without one): never above what the files hold;
 * - appends (a leader's, stamped here, and a follower's, as the leader stamped them), truncations,
 *   rolls, retention and close run one at a time in call order (one queue); reads run beside them;
 *   a checkpoint reads the state it saves in that queue and then waits for its fsyncs and writes
 *   its files beside appends, one checkpoint at a time, so that appends never wait for a
 *   checkpoint's disk writes; a truncation first waits for those writes and fsyncs to finish;
 * - a truncation saves writer state and epochs of what remains before it cuts the files, and the
 *   recovery point after: a crash in between recovers the uncut log, consistent with both;
 * - commit timestamps never go backwards within the log;
 * - after open, the files hold exactly the longest valid prefix of what was written.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from '../../../common/errors.js';
import { isNoSpace } from '../../../common/files.js';
import { isCrcValid, type LogBatchHeader, MAGIC, NO_WRITER_ID, readLogBatchHeader, stampLogBatch } from '../../../record/log-batch.js';
import { readCheckpoint, writeCheckpoint } from './checkpoint-file.js';
import { LeaderEpochCache } from './leader-epoch-cache.js';
import { type BatchCutter, type CutBatches, LogSegment, type SegmentFiles, syncDirectory } from './log-segment.js';
import { storageError } from './storage-error.js';
import { WriterStateManager } from './writer-state.js';

export interface LogConfig {
  /** log.segment.file-size: the active segment rolls before it would grow past this size. */
  segmentBytes: number;
  /** log.index.interval-size: bytes of log between two offset-index entries. */
  indexIntervalBytes: number;
  /** log.recent-batches.size: bytes of the last batches appended kept in memory for reads (0: none). */
  recentBytes: number;
  /** log.preallocate.size: zeros kept written ahead of the active segment's end (0: none). */
  preallocateBytes: number;
  /** log.flush.interval-messages: fsync after this many batches; 1 = fsync before every ack. */
  flushIntervalMessages: number;
  /** log.flush.interval: longest delay of an fsync when flushIntervalMessages > 1. */
  flushIntervalMs: number;
  /** table.log.ttl: segments older than this are deleted; 0 keeps them forever. */
  ttlMs: number;
  /** server.writer-id.expiration-time: idle writers are forgotten after this long. */
  writerIdExpirationMs: number;
}

/** A sealed segment below the high watermark: its offsets [baseOffset, endOffset), bytes, newest commit timestamp and files. */
export interface ClosedSegment {
  baseOffset: bigint;
  endOffset: bigint;
  sizeBytes: number;
  /** Largest commit timestamp of its batches (ms), -1 when empty. */
  maxTimestamp: number;
  files: SegmentFiles;
}

export interface AppendResult {
  baseOffset: bigint;
  lastOffset: bigint;
  commitTimestamp: bigint;
  /** The batch was appended before (same writer and sequence): these are its original offsets. */
  duplicate: boolean;
}

export interface FetchResult {
  /** Whole batches, empty when there is nothing below the high watermark (or durable end) at the fetch offset. */
  records: Buffer;
  highWatermark: bigint;
  logStartOffset: bigint;
}

/** The part of the server's logger (pino) the log uses. */
export interface LogTabletLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface LogTabletOptions {
  /**
   * A replica of a replicated bucket: the high watermark is set by `advanceHighWatermark` (the
   * leader's view of its in-sync replicas) instead of following the durable end.
   */
  replicated?: boolean;
  /** Wall clock in ms, for commit timestamps and writer expiry. */
  clock?: () => number;
  /** Told of each fdatasync on the append path: when it started (performance.now()) and how long it took. */
  onFlush?: (start: number, ms: number) => void;
}

/**
 * What an append waits for: the high watermark (one node: the same as durable), the durable end,
 * or only the write to the file (acks=1).
 */
export type AppendWaitFor = 'high-watermark' | 'durable' | 'written';

/** How far a read goes: to the high watermark (clients), or to the durable end (followers). */
export type ReadIsolation = 'high-watermark' | 'durable-end';

/** What one checkpoint saves, read at one point of the append order. */
interface CheckpointState {
  /** The recovery point: every batch below it is fsynced before the files are written. */
  end: bigint;
  highWatermark: bigint;
  /** The active segment then, whose indexes are flushed (sealed ones were at their roll). */
  segment: LogSegment;
  writers: Buffer;
  epochs: bigint[][];
}

/** A point of the log: an offset and where it sits in which segment. */
interface LogPosition {
  offset: bigint;
  segment: LogSegment;
  position: number;
}

const RECOVERY_POINT_FILE = 'recovery-point-checkpoint';
const HIGH_WATERMARK_FILE = 'high-watermark-checkpoint';
/** Offset-index positions and relative offsets are i32. */
const INT32_MAX = 0x7fffffff;
/** fsyncs of the log run side by side at most: a second overlaps a slow one; more would only queue in the kernel. */
const SYNCS_IN_FLIGHT = 2;
const SEGMENT_FILE = /^(\d{20})\.(log|index|timeindex)$/;
const EMPTY = Buffer.alloc(0);
const SILENT: LogTabletLogger = { info() {}, warn() {}, error() {} };

export class LogTablet {
  private readonly segments: LogSegment[] = [];
  private logEnd!: LogPosition;
  /** The end of what the flush policy made durable; with the default policy, fsynced. */
  private durable!: LogPosition;
  private hw!: LogPosition;
  /** Replicated: the end of every batch above the high watermark, in order, where it may move to. */
  private batchEnds: LogPosition[] = [];
  /** Every batch below this offset is fsynced: the in-memory recovery point. */
  private flushedOffset = 0n;
  private checkpointedOffset = -1n;
  private checkpointedHighWatermark = -1n;
  /** Counts truncations, so that an append waiting for durability learns its batches may be gone. */
  private truncations = 0;
  private lastTimestamp = -1;
  private writers = new WriterStateManager();
  private epochs = new LeaderEpochCache();
  private queue: Promise<unknown> = Promise.resolve();
  private checkpointWrites: Promise<void> = Promise.resolve();
  /** The leader epochs as the checkpoint file holds them (`epochsKey`); undefined when unknown. */
  private savedEpochs: string | undefined;
  /** fsyncs running, oldest first, each with the log end it covers. */
  private runningSyncs: { target: bigint; done: Promise<void> }[] = [];
  private queuedSync: Promise<void> | undefined;
  private unflushedBatches = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private failure: TributaryError | undefined;
  private closed = false;
  private readonly listeners = new Set<(highWatermark: bigint) => void>();
  private readonly durableListeners = new Set<(durableEnd: bigint) => void>();

  private constructor(
    readonly dir: string,
    private readonly config: LogConfig,
    readonly replicated: boolean,
    private readonly log: LogTabletLogger,
    private readonly clock: () => number,
    private readonly onFlush: (start: number, ms: number) => void,
  ) {}

  /** Opens the log in `dir` (created if missing) and recovers it: see `recover`. */
  static async open(dir: string, config: LogConfig, log: LogTabletLogger = SILENT, options: LogTabletOptions = {}): Promise<LogTablet> {
    const tablet = new LogTablet(dir, checkConfig(config), options.replicated ?? false, log, options.clock ?? Date.now, options.onFlush ?? (() => undefined));
    try {
      await tablet.recover();
    } catch (err) {
      for (const s of tablet.segments) await s.close().catch(() => undefined);
      throw storageError(`cannot open log ${dir}`, err);
    }
    return tablet;
  }

  get logStartOffset(): bigint {
    return this.segments[0].baseOffset;
  }

  get logEndOffset(): bigint {
    return this.logEnd.offset;
  }

  get highWatermark(): bigint {
    return this.hw.offset;
  }

  /** The end of what is durable (fsynced with the default flush policy); the high watermark when not replicated. */
  get durableEndOffset(): bigint {
    return this.durable.offset;
  }

  /** Bytes of batches in the log's segment files. */
  get sizeInBytes(): number {
    let size = 0;
    for (const segment of this.segments) size += segment.size;
    return size;
  }

  get segmentCount(): number {
    return this.segments.length;
  }

  /** The latest leader epoch that wrote to the log, -1 when none has. */
  get latestEpoch(): number {
    return this.epochs.latestEpoch;
  }

  /**
   * The largest epoch at most `epoch` that wrote to the log and where it ends (the next epoch's
   * start, or the log end for the latest): where a follower's log diverges from this one.
   * `{ epoch: -1, endOffset: -1n }` when the log knows no such epoch.
   */
  endOffsetForEpoch(epoch: number): { epoch: number; endOffset: bigint } {
    return this.epochs.endOffsetFor(epoch, this.logEnd.offset);
  }

  /** Calls `listener` with each new high watermark; returns the unsubscribe function. */
  onHighWatermark(listener: (highWatermark: bigint) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Calls `listener` with each new durable end; returns the unsubscribe function. */
  onDurableEnd(listener: (durableEnd: bigint) => void): () => void {
    this.durableListeners.add(listener);
    return () => this.durableListeners.delete(listener);
  }

  /**
   * Replicated: moves the high watermark up to `offset` (the lowest log end of the in-sync
   * replicas), never past the durable end nor into a batch, and never back. Wakes its listeners.
   */
  advanceHighWatermark(offset: bigint): void {
    if (!this.replicated) throw new Error(`the log ${this.dir} is not replicated: its high watermark follows the durable end`);
    const target = offset < this.durable.offset ? offset : this.durable.offset;
    let n = 0;
    while (n < this.batchEnds.length && this.batchEnds[n].offset <= target) n++;
    if (n === 0) return;
    const position = this.batchEnds[n - 1];
    this.batchEnds.splice(0, n);
    this.setHighWatermark(position);
  }

  /** Applies changed options (ttl, flush policy, sizes); sizes apply from the next roll or index entry. */
  updateConfig(config: LogConfig): void {
    Object.assign(this.config, checkConfig(config));
  }

  /**
   * Appends batches (already split and CRC-checked) with consecutive offsets, stamping BaseOffset,
   * CommitTimestamp and LeaderEpoch in place. Returns one result per batch; a duplicate of an
   * idempotent writer gets its original offsets and is not appended again. Resolves once every
   * batch is below the high watermark (not replicated) or the durable end (`'durable'`), or with
   * `'written'` once the batches are written to the file (acks=1). A replicated log's high
   * watermark waits for followers, which is the caller's to wait for. A sequence or epoch error
   * rejects the whole call.
   */
  async append(batches: Buffer[], leaderEpoch: number, waitFor: AppendWaitFor = 'high-watermark'): Promise<AppendResult[]> {
    if (waitFor === 'high-watermark' && this.replicated) throw new Error(`append to the replicated log ${this.dir} waits for 'durable' or 'written'`);
    if (batches.length === 0) return [];
    const { results, endOffset, truncations } = await this.enqueue(async () => ({ ...(await this.write(batches, leaderEpoch)), truncations: this.truncations }));
    if (waitFor === 'written') {
      // acks=1: the batches are in the log file; their fsync (per the flush policy) follows.
      if (this.durable.offset < endOffset) void this.syncCovering(endOffset);
      return results;
    }
    await this.waitDurable(endOffset, truncations);
    return results;
  }

  /**
   * Appends batches fetched from the leader as it wrote them (offsets, epochs and commit timestamps
   * stamped), starting at the log end and contiguous, else nothing is appended. The epoch cache and
   * the writer state learn them without sequence checks (the leader made those), so that a retry
   * of a producer is still recognised once this replica leads. Resolves once they are durable.
   */
  async appendAsFollower(batches: Buffer[]): Promise<void> {
    if (batches.length === 0) return;
    const { endOffset, truncations } = await this.enqueue(async () => ({ endOffset: await this.writeReplicated(batches), truncations: this.truncations }));
    await this.waitDurable(endOffset, truncations);
  }

  /**
   * Whole batches from the one holding `fetchOffset`, below the high watermark (or the durable end)
   * and within one segment: at least that batch, then as many as fit in `maxBytes`, read into
   * memory from `allocate` (fresh by default).
   */
  async read(fetchOffset: bigint, maxBytes: number, isolation: ReadIsolation = 'high-watermark', allocate?: (length: number) => Buffer): Promise<FetchResult> {
    const { records, highWatermark, logStartOffset } = await this.readFrom(fetchOffset, isolation, (segment, bound) => segment.read(fetchOffset, maxBytes, bound, allocate));
    return { records: records ?? EMPTY, highWatermark, logStartOffset };
  }

  /**
   * Like `read`, with each batch cut by `cutter` (server-side projection) and only what the cuts
   * keep read from the file: batches while their cut size stays under `maxBytes` and their stored
   * size under `maxStoredBytes`.
   */
  async readCut(
    fetchOffset: bigint,
    maxBytes: number,
    maxStoredBytes: number,
    cutter: BatchCutter,
    isolation: ReadIsolation = 'high-watermark',
  ): Promise<CutBatches & { highWatermark: bigint; logStartOffset: bigint }> {
    const { records, highWatermark, logStartOffset } = await this.readFrom(fetchOffset, isolation, (segment, bound) =>
      segment.readCut(fetchOffset, maxBytes, maxStoredBytes, bound, cutter),
    );
    return { ...(records ?? { batches: [], storedBytes: 0 }), highWatermark, logStartOffset };
  }

  /** Checks `fetchOffset` and reads, with `reader`, the segment holding it below the isolation's end, if it is below. */
  private async readFrom<T>(
    fetchOffset: bigint,
    isolation: ReadIsolation,
    reader: (segment: LogSegment, bound: number) => Promise<T>,
  ): Promise<{ records: T | undefined; highWatermark: bigint; logStartOffset: bigint }> {
    this.checkOpen();
    const hw = this.hw.offset;
    const end = isolation === 'durable-end' ? this.durable : this.hw;
    const logStartOffset = this.logStartOffset;
    if (fetchOffset < logStartOffset || fetchOffset > this.logEnd.offset) {
      throw new TributaryError(
        'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION',
        `fetch offset ${fetchOffset} is out of range: the log holds [${logStartOffset}, ${this.logEnd.offset})`,
      );
    }
    if (fetchOffset >= end.offset) return { records: undefined, highWatermark: hw, logStartOffset };
    const segment = this.segmentHolding(fetchOffset);
    return { records: await reader(segment, this.boundOf(segment, end)), highWatermark: hw, logStartOffset };
  }

  /** The last batches below the high watermark that hold at least `minRecords` records (all when fewer). */
  async readTail(minRecords: number): Promise<Buffer[]> {
    this.checkOpen();
    const hw = this.hw;
    const start = this.logStartOffset;
    const tail: Buffer[] = [];
    let records = 0;
    let end = hw.offset;
    while (records < minRecords && end > start) {
      // A batch holds at most as many records as it has offsets: start that many offsets back.
      let offset = end - BigInt(minRecords - records);
      if (offset < start) offset = start;
      const part: Buffer[] = [];
      while (offset < end) {
        const buf = await this.readBelow(offset, Infinity, hw);
        if (buf.length === 0) break;
        for (let pos = 0; pos < buf.length && offset < end; ) {
          const header = readLogBatchHeader(buf, pos);
          if (header.baseOffset >= end) {
            offset = end;
            break;
          }
          part.push(buf.subarray(pos, pos + header.sizeInBytes));
          records += header.recordCount;
          offset = header.baseOffset + BigInt(header.lastOffsetDelta) + 1n;
          pos += header.sizeInBytes;
        }
      }
      if (part.length === 0) break;
      tail.unshift(...part);
      end = readLogBatchHeader(part[0]).baseOffset;
    }
    // Drop leading batches the rest does not need.
    while (tail.length > 1 && records - readLogBatchHeader(tail[0]).recordCount >= minRecords) {
      records -= readLogBatchHeader(tail[0]).recordCount;
      tail.shift();
    }
    return tail;
  }

  /** The first offset whose batch has a commit timestamp >= `timestamp`, or the high watermark if none. */
  async offsetForTimestamp(timestamp: bigint): Promise<bigint> {
    this.checkOpen();
    const hw = this.hw;
    const target = Number(timestamp);
    for (const segment of this.segments) {
      if (segment.baseOffset >= hw.offset) break;
      if (segment.maxTimestamp < target) continue;
      const found = await segment.locateTimestamp(target, this.boundOf(segment, hw));
      return found ? found.header.baseOffset : hw.offset;
    }
    return hw.offset;
  }

  /**
   * Deletes the oldest sealed segments whose largest commit timestamp is older than
   * `nowMs - ttl`, moving the log start offset. `canDelete(segmentEndOffset)` may hold a segment
   * back (e.g. until the lake holds its offsets). Returns how many segments were deleted.
   */
  deleteExpiredSegments(nowMs: number, canDelete?: (segmentEndOffset: bigint) => boolean): Promise<number> {
    return this.deleteOldestSegments((s) => this.config.ttlMs > 0 && s.maxTimestamp < nowMs - this.config.ttlMs && (!canDelete || canDelete(s.endOffset)));
  }

  /**
   * Sealed segments wholly below the high watermark, oldest first: what may be copied elsewhere
   * (the remote log) as it is, since they no longer change.
   */
  closedSegments(): ClosedSegment[] {
    const out: ClosedSegment[] = [];
    for (let i = 0; i + 1 < this.segments.length; i++) {
      const s = this.segments[i];
      const endOffset = this.segments[i + 1].baseOffset;
      if (endOffset > this.hw.offset) break;
      out.push({ baseOffset: s.baseOffset, endOffset, sizeBytes: s.size, maxTimestamp: s.maxTimestamp, files: s.files() });
    }
    return out;
  }

  /** The writer state (its snapshot file's bytes, as of the log end) and leader epochs now: what a copy of the log needs beside its segments. */
  logState(): { writerSnapshot: Buffer; epochs: bigint[][] } {
    return { writerSnapshot: this.writers.snapshot(this.logEnd.offset), epochs: this.epochs.snapshot() };
  }

  /**
   * Deletes sealed segments from the start of the log, below the high watermark, while
   * `canDelete(segment, segmentsLeft)` holds (segmentsLeft: segments the log keeps with it),
   * moving the log start offset. Returns how many were deleted.
   */
  async deleteOldestSegments(canDelete: (segment: ClosedSegment, segmentsLeft: number) => boolean): Promise<number> {
    // The segments leave the log in the queue; their files are removed outside it, beside appends.
    const deleted = await this.enqueue(async () => {
      this.checkOpen();
      const out: LogSegment[] = [];
      while (this.segments.length > 1) {
        const oldest = this.segments[0];
        const endOffset = this.segments[1].baseOffset;
        if (endOffset > this.hw.offset) break;
        const closed = { baseOffset: oldest.baseOffset, endOffset, sizeBytes: oldest.size, maxTimestamp: oldest.maxTimestamp, files: oldest.files() };
        if (!canDelete(closed, this.segments.length - 1)) break;
        out.push(this.segments.shift()!);
      }
      if (out.length > 0) this.epochs.truncateFromStart(this.logStartOffset);
      return out;
    });
    for (const segment of deleted) await segment.delete();
    return deleted.length;
  }

  /**
   * Removes every batch at or above `offset` (from the start of the batch holding it): a follower
   * whose log diverged from its new leader's. Segment files and indexes are cut, later segments
   * deleted, the epoch cache and writer state rebuilt for what is left, and high watermark and
   * durable end clamped; all durable before it resolves. Nothing happens at or past the log end;
   * below the log start the log starts again there (`truncateFullyAndStartAt`).
   */
  truncateTo(offset: bigint): Promise<void> {
    return this.enqueue(async () => {
      this.checkWritable();
      if (offset >= this.logEnd.offset) return;
      if (offset < this.logStartOffset) return this.startAt(offset);
      await this.quiesce();
      const cut = await this.positionAt(offset);
      this.truncations++;
      // From here on a failure leaves memory and files apart: the log stops until it is reopened.
      try {
        // Writer state and epochs of the remaining log are saved before the files change: a crash
        // in between recovers the whole log, and replays its tail into both from the batch headers.
        const dropped = this.writers.truncateFrom(cut.offset);
        if (dropped.size > 0) await this.replayWriters(dropped, cut);
        this.epochs.truncateFromEnd(cut.offset);
        await this.saveWritersAndEpochs(this.writers.snapshot(cut.offset), this.epochs.snapshot());
        const later = this.segments.splice(this.segments.indexOf(cut.segment) + 1);
        await cut.segment.truncateTo(cut.offset, cut.position);
        await cut.segment.flush();
        // Ascending: a crash in between leaves a gap, and recovery drops what follows a gap.
        for (const segment of later) await segment.delete();
        if (later.length > 0) await syncDirectory(this.dir);
      } catch (err) {
        throw this.fail(err);
      }
      this.resetEnd(cut);
      await this.saveEnds(cut.offset, this.hw.offset);
    });
  }

  /**
   * Deletes every segment and starts an empty log at `offset`: a follower whose log end is below
   * the leader's log start. The epoch cache starts empty (the batches fetched next carry their
   * epochs); the writer state is `writers` (what the log held below `offset`) when given, else
   * empty; the high watermark is `offset`.
   */
  truncateFullyAndStartAt(offset: bigint, writers?: WriterStateManager): Promise<void> {
    return this.enqueue(async () => {
      this.checkWritable();
      await this.startAt(offset, writers);
    });
  }

  /** fsyncs the log and its indexes, then saves writer state, leader epochs and the recovery point. */
  async checkpoint(): Promise<void> {
    // Only the state is read in the queue (wrapped: the write must not be awaited there).
    const { written } = await this.enqueue(async () => ({ written: this.writeCheckpoint(this.checkpointState()) }));
    await written;
  }

  /** Waits for queued appends, checkpoints and closes the files. Later calls fail. */
  close(): Promise<void> {
    return this.enqueue(async () => {
      if (this.closed) return;
      try {
        if (!this.failure) await this.checkpointUnlessFull();
      } finally {
        this.closed = true;
        clearTimeout(this.flushTimer);
        for (const s of this.segments) await s.close();
      }
    });
  }

  // ------------------------------------------------------------------ recovery

  /**
   * Loads the checkpoints, opens the segments and validates the log from the recovery point on
   * (from the start when a checkpoint is missing or unreadable): the first bad or torn batch and
   * everything after it are cut off, the indexes of the scanned part are rebuilt, and writer state
   * and leader epochs are replayed from the scanned batch headers.
   */
  private async recover(): Promise<void> {
    const names = await fs.promises.readdir(this.dir).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
      await fs.promises.mkdir(this.dir, { recursive: true });
      return [] as string[];
    });
    const bases: bigint[] = [];
    const logs = new Set<string>();
    for (const name of names) {
      const m = SEGMENT_FILE.exec(name);
      if (m?.[2] === 'log') {
        bases.push(BigInt(m[1]));
        logs.add(m[1]);
      }
    }
    for (const name of names) {
      const m = SEGMENT_FILE.exec(name);
      // Temp files of interrupted atomic writes, and indexes whose segment was being deleted.
      if (name.endsWith('.tmp') || (m && !logs.has(m[1]))) await fs.promises.rm(path.join(this.dir, name), { force: true });
    }
    bases.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

    const recoveryPoint = await this.loadOrWarn(RECOVERY_POINT_FILE, () => readCheckpoint(this.dir, RECOVERY_POINT_FILE, 1));
    const snapshot = await this.loadOrWarn('writer snapshot', () => WriterStateManager.load(this.dir));
    const epochs = await this.loadOrWarn('leader epoch checkpoint', () => LeaderEpochCache.load(this.dir));
    if (snapshot) this.writers = snapshot.state;
    if (epochs) {
      this.epochs = epochs;
      this.savedEpochs = epochsKey(epochs.snapshot());
    }
    const writersFrom = snapshot?.offset ?? 0n;
    // Scan from where all three files vouch for the log.
    let trusted = recoveryPoint?.[0]?.[0] ?? 0n;
    if (writersFrom < trusted) trusted = writersFrom;
    if (!epochs) trusted = 0n;

    const indexesValid: boolean[] = [];
    for (let i = 0; i < bases.length; i++) {
      const { segment, indexesValid: valid } = await LogSegment.open(this.dir, bases[i], bases[i + 1], this.config);
      this.segments.push(segment);
      indexesValid.push(valid);
    }
    if (this.segments.length === 0) {
      this.segments.push(await LogSegment.create(this.dir, 0n, this.config));
      indexesValid.push(true);
    }

    let holder = 0;
    while (holder + 1 < this.segments.length && this.segments[holder + 1].baseOffset <= trusted) holder++;
    let first = indexesValid.indexOf(false);
    if (first < 0 || first > holder) first = holder;

    const visit = (h: LogBatchHeader): void => {
      if (h.writerId !== NO_WRITER_ID && h.baseOffset >= writersFrom) {
        const lastOffset = h.baseOffset + BigInt(h.lastOffsetDelta);
        this.writers.replay(h.writerId, { sequence: h.batchSequence, baseOffset: h.baseOffset, lastOffset, timestamp: Number(h.commitTimestamp) });
      }
      this.epochs.assign(h.leaderEpoch, h.baseOffset);
    };
    let cutFrom = this.segments.length;
    for (let i = first; i < this.segments.length; i++) {
      const segment = this.segments[i];
      if (i > first && segment.baseOffset !== this.segments[i - 1].nextOffset) {
        cutFrom = i;
        break;
      }
      const dropped = await segment.recover(i === holder ? trusted : segment.baseOffset, visit);
      if (dropped > 0) {
        this.log.warn({ dir: this.dir, segment: segment.fileName, droppedBytes: dropped }, 'cut an invalid or torn tail off the log');
        cutFrom = i + 1;
        break;
      }
    }
    for (const segment of this.segments.splice(cutFrom)) {
      this.log.warn(
        { dir: this.dir, segment: segment.fileName, droppedBytes: segment.size },
        'deleted a log segment that follows an invalid part of the log',
      );
      await segment.delete();
    }
    // What was scanned may sit in the page cache only (the process died): make it durable, and
    // give sealed segments the closing time-index entry they get when they roll.
    // On a full disk rebuilt indexes stay in memory (written at the next roll or checkpoint): the
    // log files themselves are fsynced first and need no space.
    let indexesUnwritten = false;
    const durable = async (segment: LogSegment, flush: () => Promise<void>): Promise<void> => {
      try {
        await flush();
      } catch (err) {
        if (segment.damaged || !isNoSpace(err)) throw err;
        indexesUnwritten = true;
      }
    };
    const last = this.segments.length - 1;
    for (let i = first; i < last; i++) await durable(this.segments[i], () => this.segments[i].seal());
    await durable(this.segments[last], () => this.segments[last].flush());
    if (indexesUnwritten) this.log.warn({ dir: this.dir }, 'log indexes not written: the data disk is full');
    if (cutFrom < bases.length) await syncDirectory(this.dir);

    const active = this.segments[this.segments.length - 1];
    this.logEnd = { offset: active.nextOffset, segment: active, position: active.size };
    this.durable = this.hw = this.logEnd;
    this.flushedOffset = this.logEnd.offset;
    this.lastTimestamp = this.latestTimestamp();
    this.writers.truncateFrom(this.logEnd.offset);
    this.writers.removeExpired(this.clock(), this.config.writerIdExpirationMs);
    this.epochs.truncateFromEnd(this.logEnd.offset);
    this.epochs.truncateFromStart(this.logStartOffset);
    if (this.replicated) await this.recoverHighWatermark();
    await this.checkpointUnlessFull();
  }

  /**
   * The checkpointed high watermark, at most the recovered log end (the log start when there is
   * none), and the batch ends above it that it may move to.
   */
  private async recoverHighWatermark(): Promise<void> {
    const saved = await this.loadOrWarn(HIGH_WATERMARK_FILE, () => readCheckpoint(this.dir, HIGH_WATERMARK_FILE, 1));
    let offset = saved?.[0]?.[0] ?? this.logStartOffset;
    if (offset < this.logStartOffset) offset = this.logStartOffset;
    this.hw = await this.positionAt(offset);
    this.batchEnds = [];
    await this.walk(this.hw, this.logEnd, (_h, end) => this.batchEnds.push(end));
  }

  /**
   * A checkpoint where one is optional (end of recovery, close): on a full disk the log is
   * complete without it, and a restart scans from the previous recovery point instead.
   */
  private async checkpointUnlessFull(): Promise<void> {
    try {
      await this.writeCheckpoint(this.checkpointState());
    } catch (err) {
      if (!isNoSpace(err) || this.failure) throw err;
      this.log.warn({ dir: this.dir, err }, 'log checkpoint skipped: the data disk is full');
    }
  }

  /** A damaged checkpoint is reported and treated as missing: recovery then scans more of the log. */
  private async loadOrWarn<T>(what: string, load: () => Promise<T | undefined>): Promise<T | undefined> {
    try {
      return await load();
    } catch (err) {
      this.log.warn({ dir: this.dir, err }, `ignoring unreadable ${what}; rebuilding it from the log`);
      return undefined;
    }
  }

  // ------------------------------------------------------------------ writes

  private enqueue<T>(task: () => Promise<T>): Promise<T> {
    const run = this.queue.then(task);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async write(batches: Buffer[], leaderEpoch: number): Promise<{ results: AppendResult[]; endOffset: bigint }> {
    this.checkWritable();
    const latestEpoch = this.epochs.latestEpoch;
    if (leaderEpoch < latestEpoch) {
      throw new TributaryError('FENCED_LEADER_EPOCH_EXCEPTION', `leader epoch ${leaderEpoch} is older than the log's latest epoch ${latestEpoch}`);
    }
    const timestamp = Math.max(this.clock(), this.lastTimestamp);
    const stamp = BigInt(timestamp);
    const writerAppend = this.writers.begin();
    const results: AppendResult[] = [];
    const appended: Buffer[] = [];
    const firstOffset = this.logEnd.offset;
    let next = firstOffset;
    let endOffset = 0n;
    let bytes = 0;
    for (const batch of batches) {
      const h = readLogBatchHeader(batch);
      if (h.lastOffsetDelta < 0) throw new TributaryError('CORRUPT_MESSAGE', `record batch has a negative last offset delta ${h.lastOffsetDelta}`);
      const original = h.writerId === NO_WRITER_ID ? undefined : writerAppend.check(h.writerId, h.batchSequence, h.recordSequences ? h.recordCount : 1);
      if (original) {
        results.push({ baseOffset: original.baseOffset, lastOffset: original.lastOffset, commitTimestamp: BigInt(original.timestamp), duplicate: true });
        if (original.lastOffset >= endOffset) endOffset = original.lastOffset + 1n;
        continue;
      }
      const lastOffset = next + BigInt(h.lastOffsetDelta);
      if (h.writerId !== NO_WRITER_ID) writerAppend.record(h.writerId, { sequence: h.batchSequence, baseOffset: next, lastOffset, timestamp });
      stampLogBatch(batch, 0, next, stamp, leaderEpoch);
      results.push({ baseOffset: next, lastOffset, commitTimestamp: stamp, duplicate: false });
      appended.push(batch);
      bytes += batch.length;
      next = lastOffset + 1n;
    }
    if (appended.length === 0) return { results, endOffset };
    await this.appendToSegment(appended, bytes, next, () => {
      writerAppend.commit();
      this.epochs.assign(leaderEpoch, firstOffset);
      this.lastTimestamp = timestamp;
    });
    return { results, endOffset: next };
  }

  /** Appends the leader's batches as they are (appendAsFollower); returns the new log end. */
  private async writeReplicated(batches: Buffer[]): Promise<bigint> {
    this.checkWritable();
    const headers: LogBatchHeader[] = [];
    let next = this.logEnd.offset;
    let bytes = 0;
    for (const batch of batches) {
      const h = readLogBatchHeader(batch);
      if (h.baseOffset !== next) {
        throw new TributaryError('LOG_OFFSET_OUT_OF_RANGE_EXCEPTION', `replicated batch at offset ${h.baseOffset} does not follow on offset ${next} of the log ${this.dir}`);
      }
      if (h.magic !== MAGIC || h.sizeInBytes !== batch.length || h.lastOffsetDelta < 0 || !isCrcValid(batch)) {
        throw new TributaryError('CORRUPT_MESSAGE', `replicated batch at offset ${h.baseOffset} is corrupt (size, magic, offset delta or CRC)`);
      }
      headers.push(h);
      bytes += batch.length;
      next = h.baseOffset + BigInt(h.lastOffsetDelta) + 1n;
    }
    await this.appendToSegment(batches, bytes, next, () => {
      for (const h of headers) {
        const timestamp = Number(h.commitTimestamp);
        if (h.writerId !== NO_WRITER_ID) {
          this.writers.replay(h.writerId, { sequence: h.batchSequence, baseOffset: h.baseOffset, lastOffset: h.baseOffset + BigInt(h.lastOffsetDelta), timestamp });
        }
        this.epochs.assign(h.leaderEpoch, h.baseOffset);
        if (timestamp > this.lastTimestamp) this.lastTimestamp = timestamp;
      }
    });
    return next;
  }

  /**
   * Writes stamped batches ending before `next` to the active segment (rolled first if they do not
   * fit), runs `written` (the bookkeeping of a write that happened) and moves the log end.
   */
  private async appendToSegment(batches: Buffer[], bytes: number, next: bigint, written: () => void): Promise<void> {
    const segment = await this.segmentFor(bytes, next - 1n);
    try {
      await segment.append(batches, next);
    } catch (err) {
      if (segment.damaged) this.fail(err);
      throw err;
    }
    written();
    if (this.replicated) {
      let position = segment.size - bytes;
      for (const b of batches) {
        const h = readLogBatchHeader(b);
        position += h.sizeInBytes;
        this.batchEnds.push({ offset: h.baseOffset + BigInt(h.lastOffsetDelta) + 1n, segment, position });
      }
    }
    this.logEnd = { offset: next, segment, position: segment.size };
    if (this.config.flushIntervalMessages > 1) this.scheduleLazyFlush(batches.length);
  }

  /** Waits until the log is durable up to `endOffset`; fails when the log was truncated since `truncations`. */
  private async waitDurable(endOffset: bigint, truncations: number): Promise<void> {
    while (this.durable.offset < endOffset) {
      this.checkWritable();
      if (this.truncations !== truncations) {
        throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `the log ${this.dir} was truncated before offset ${endOffset} was durable`);
      }
      await this.syncCovering(endOffset);
    }
  }

  /** The active segment, rolled first when `bytes` more (up to `lastOffset`) would not fit in it. */
  private async segmentFor(bytes: number, lastOffset: bigint): Promise<LogSegment> {
    const active = this.logEnd.segment;
    const limit = Math.min(this.config.segmentBytes, INT32_MAX);
    if (active.size === 0 || (active.size + bytes <= limit && lastOffset - active.baseOffset <= BigInt(INT32_MAX))) return active;
    try {
      await active.seal();
    } catch (err) {
      // An index that found no space is written again at the next roll; the log file is intact.
      if (active.damaged || !isNoSpace(err)) throw this.fail(err);
      throw storageError(`cannot roll ${this.dir}`, err);
    }
    const rollOffset = this.logEnd.offset;
    if (rollOffset > this.flushedOffset) this.flushedOffset = rollOffset;
    this.advanceDurableEnd(this.logEnd);
    const segment = await LogSegment.create(this.dir, rollOffset, this.config);
    this.segments.push(segment);
    this.logEnd = { offset: rollOffset, segment, position: 0 };
    return segment;
  }

  /** With a lazy flush policy the written end is visible at once; the fsync follows by count or time. */
  private scheduleLazyFlush(batches: number): void {
    this.advanceDurableEnd(this.logEnd);
    this.unflushedBatches += batches;
    if (this.unflushedBatches >= this.config.flushIntervalMessages) {
      void this.syncCovering(this.logEnd.offset);
    } else if (!this.flushTimer) {
      this.flushTimer = setTimeout(() => {
        this.flushTimer = undefined;
        void this.syncCovering(this.logEnd.offset);
      }, this.config.flushIntervalMs);
      this.flushTimer.unref();
    }
  }

  // ------------------------------------------------------------------ fsync (group commit)

  /**
   * A promise of an fsync covering `offset`: a running one if it does, else a new one started at
   * once while fewer than SYNCS_IN_FLIGHT run, else the one queued until a running one ends
   * (shared by every caller arriving meanwhile). An fsync started while another runs covers
   * everything written before it started, so batches appended during a slow fsync need not wait
   * for it to end before their own begins: the kernel overlaps the two (its journal commits
   * follow each other without a return to this process between them).
   */
  private syncCovering(offset: bigint): Promise<void> {
    const covering = this.runningSyncs.find((s) => s.target >= offset);
    if (covering) return covering.done;
    if (this.runningSyncs.length < SYNCS_IN_FLIGHT) return this.startSync();
    this.queuedSync ??= Promise.race(this.runningSyncs.map((s) => s.done)).then(() => {
      this.queuedSync = undefined;
      return this.startSync();
    });
    return this.queuedSync;
  }

  private startSync(): Promise<void> {
    const target = this.logEnd;
    this.unflushedBatches = 0;
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const done: Promise<void> = this.syncTo(target).finally(() => {
      this.runningSyncs = this.runningSyncs.filter((s) => s.done !== done);
    });
    this.runningSyncs.push({ target: target.offset, done });
    return done;
  }

  /** fsyncs the log up to `target`; never rejects: a failure stops the log and its waiters see it. */
  private async syncTo(target: LogPosition): Promise<void> {
    if (this.closed || this.failure) return;
    if (target.offset > this.flushedOffset) {
      try {
        // Sealed segments were fsynced when they rolled: the target's segment is all that is left.
        const start = performance.now();
        await target.segment.flushLog();
        this.onFlush(start, performance.now() - start);
      } catch (err) {
        this.fail(err);
        return;
      }
      // A failed fsync beside this one may have cost pages this one then found clean.
      if (this.failure) return;
      if (target.offset > this.flushedOffset) this.flushedOffset = target.offset;
    }
    this.advanceDurableEnd(target);
  }

  /** The durable end moves to `position`; not replicated, the high watermark follows it. */
  private advanceDurableEnd(position: LogPosition): void {
    if (position.offset <= this.durable.offset) return;
    this.durable = position;
    this.notify(this.durableListeners, position.offset, 'durable end');
    if (!this.replicated) this.setHighWatermark(position);
  }

  private setHighWatermark(position: LogPosition): void {
    if (position.offset <= this.hw.offset) return;
    this.hw = position;
    this.notify(this.listeners, position.offset, 'high watermark');
  }

  private notify(listeners: Set<(offset: bigint) => void>, offset: bigint, what: string): void {
    for (const listener of listeners) {
      try {
        listener(offset);
      } catch (err) {
        this.log.warn({ dir: this.dir, err }, `${what} listener failed`);
      }
    }
  }

  // ------------------------------------------------------------------ truncation

  /**
   * Lets running fsyncs and checkpoint writes finish, so that none of them acts on files or
   * positions a truncation changes; called in the queue, where no new ones start.
   */
  private async quiesce(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    await this.checkpointWrites;
    while (this.queuedSync || this.runningSyncs.length > 0) await (this.queuedSync ?? Promise.all(this.runningSyncs.map((s) => s.done)));
  }

  /** Replays into the writer state the batches below `end` of the `writers` a truncation dropped. */
  private async replayWriters(writers: Set<bigint>, end: LogPosition): Promise<void> {
    const start: LogPosition = { offset: this.logStartOffset, segment: this.segments[0], position: 0 };
    await this.walk(start, end, (h) => {
      if (!writers.has(h.writerId)) return;
      const batch = { sequence: h.batchSequence, baseOffset: h.baseOffset, lastOffset: h.baseOffset + BigInt(h.lastOffsetDelta), timestamp: Number(h.commitTimestamp) };
      this.writers.replay(h.writerId, batch);
    });
    this.writers.removeExpired(this.clock(), this.config.writerIdExpirationMs);
  }

  /** Deletes every segment and starts an empty log at `offset` (in the queue). */
  private async startAt(offset: bigint, writers = new WriterStateManager()): Promise<void> {
    await this.quiesce();
    this.truncations++;
    // Deleted first (ascending) and created after: a crash in between leaves a consistent log, at
    // worst empty, which the follower fetches again. The list holds the old segments until the new
    // one exists, so that readers beside the queue (metrics, fetches) never find it empty.
    try {
      for (const segment of this.segments) await segment.delete();
      this.segments.splice(0, this.segments.length, await LogSegment.create(this.dir, offset, this.config));
    } catch (err) {
      throw this.fail(err);
    }
    this.writers = writers;
    this.epochs = new LeaderEpochCache();
    const start: LogPosition = { offset, segment: this.segments[0], position: 0 };
    this.durable = this.hw = start;
    this.batchEnds = [];
    this.resetEnd(start);
    await this.saveWritersAndEpochs(this.writers.snapshot(offset), this.epochs.snapshot());
    await this.saveEnds(offset, offset);
  }

  /** After a truncation the log ends at `end`, all of it fsynced: the high watermark is clamped, the durable end is `end`. */
  private resetEnd(end: LogPosition): void {
    this.logEnd = end;
    this.flushedOffset = end.offset;
    this.unflushedBatches = 0;
    if (this.hw.offset > end.offset) this.hw = end;
    if (this.durable.offset > end.offset) this.durable = end;
    this.advanceDurableEnd(end);
    this.batchEnds = this.batchEnds.filter((e) => e.offset <= end.offset);
    this.lastTimestamp = this.latestTimestamp();
    this.checkpointedOffset = -1n;
    this.checkpointedHighWatermark = -1n;
  }

  /** The point of the log at the batch boundary at or below `offset` (at most the log end). */
  private async positionAt(offset: bigint): Promise<LogPosition> {
    if (offset >= this.logEnd.offset) return this.logEnd;
    const segment = this.segmentHolding(offset);
    const found = await segment.locate(offset, segment.size);
    if (!found) throw new TributaryError('LOG_STORAGE_EXCEPTION', `no batch of ${segment.fileName} holds offset ${offset}, below the log end ${this.logEnd.offset}`);
    return { offset: found.header.baseOffset, segment, position: found.position };
  }

  /** Calls `visit` with the header and end of each batch from `from` to `to` (batch boundaries). */
  private async walk(from: LogPosition, to: LogPosition, visit: (header: LogBatchHeader, end: LogPosition) => void): Promise<void> {
    for (let i = this.segments.indexOf(from.segment); i < this.segments.length && from.offset < to.offset; i++) {
      const segment = this.segments[i];
      const start = segment === from.segment ? from.position : 0;
      const bound = segment === to.segment ? to.position : segment.size;
      await segment.walkBatches(start, bound, (h, position) => visit(h, { offset: h.baseOffset + BigInt(h.lastOffsetDelta) + 1n, segment, position }));
      if (segment === to.segment) break;
    }
  }

  private latestTimestamp(): number {
    let latest = -1;
    for (const s of this.segments) if (s.maxTimestamp > latest) latest = s.maxTimestamp;
    return latest;
  }

  // ------------------------------------------------------------------ checkpoints

  /** The state a checkpoint saves, as of now; undefined when it would save what the last one did. */
  private checkpointState(): CheckpointState | undefined {
    this.checkWritable();
    const end = this.logEnd.offset;
    const highWatermark = this.hw.offset;
    const expired = this.writers.removeExpired(this.clock(), this.config.writerIdExpirationMs);
    if (end === this.checkpointedOffset && highWatermark === this.checkpointedHighWatermark && expired === 0) return undefined;
    return { end, highWatermark, segment: this.logEnd.segment, writers: this.writers.snapshot(end), epochs: this.epochs.snapshot() };
  }

  /** Writes the files of checkpoints one at a time, in the order their states were read. */
  private writeCheckpoint(state: CheckpointState | undefined): Promise<void> {
    const run = this.checkpointWrites.then(() => this.saveCheckpoint(state));
    this.checkpointWrites = run.catch(() => undefined);
    return run;
  }

  private async saveCheckpoint(state: CheckpointState | undefined): Promise<void> {
    if (!state) return;
    while (this.flushedOffset < state.end) {
      this.checkWritable();
      await this.syncCovering(state.end);
    }
    await state.segment.flushIndexes();
    await this.saveWritersAndEpochs(state.writers, state.epochs);
    await this.saveEnds(state.end, state.highWatermark);
  }

  private async saveWritersAndEpochs(writers: Buffer, epochs: bigint[][]): Promise<void> {
    await WriterStateManager.save(this.dir, writers);
    // Epochs change with leadership, rarely: a checkpoint that would write the same file again
    // skips its two fsyncs, which would only lengthen the disk's burst beside the appends.
    const key = epochsKey(epochs);
    if (key === this.savedEpochs) return;
    this.savedEpochs = undefined;
    await LeaderEpochCache.save(this.dir, epochs);
    this.savedEpochs = key;
  }

  /** Saves the recovery point `end` (every batch below it fsynced) and, replicated, the high watermark. */
  private async saveEnds(end: bigint, highWatermark: bigint): Promise<void> {
    await writeCheckpoint(this.dir, RECOVERY_POINT_FILE, [[end]]);
    if (this.replicated) await writeCheckpoint(this.dir, HIGH_WATERMARK_FILE, [[highWatermark]]);
    if (end > this.checkpointedOffset) this.checkpointedOffset = end;
    if (highWatermark > this.checkpointedHighWatermark) this.checkpointedHighWatermark = highWatermark;
  }

  // ------------------------------------------------------------------ reads

  private readBelow(offset: bigint, maxBytes: number, hw: LogPosition): Promise<Buffer> {
    const segment = this.segmentHolding(offset);
    return segment.read(offset, maxBytes, this.boundOf(segment, hw));
  }

  /** Bytes of `segment` below the high watermark (segments before its segment are sealed). */
  private boundOf(segment: LogSegment, hw: LogPosition): number {
    return segment === hw.segment ? hw.position : segment.size;
  }

  private segmentHolding(offset: bigint): LogSegment {
    let lo = 0;
    let hi = this.segments.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (this.segments[mid].baseOffset <= offset) lo = mid;
      else hi = mid - 1;
    }
    return this.segments[lo];
  }

  // ------------------------------------------------------------------ state

  /** Stops writes after an I/O failure whose effect on the files is unknown; reopening recovers. */
  private fail(err: unknown): TributaryError {
    if (!this.failure) {
      this.failure = new TributaryError('LOG_STORAGE_EXCEPTION', `log ${this.dir} takes no more writes until it is reopened: ${(err as Error).message}`, { cause: err });
      this.log.error({ dir: this.dir, err }, 'log storage failure: the log stops taking writes');
    }
    return this.failure;
  }

  private checkOpen(): void {
    if (this.closed) throw new TributaryError('NOT_LEADER_OR_FOLLOWER', `the log ${this.dir} is closed`);
  }

  private checkWritable(): void {
    this.checkOpen();
    if (this.failure) throw this.failure;
  }
}

function checkConfig(config: LogConfig): LogConfig {
  const atLeast = (name: keyof LogConfig, min: number): void => {
    const v = config[name];
    if (!Number.isFinite(v) || v < min) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `log option ${name} must be a number >= ${min}, got ${v}`);
  };
  atLeast('segmentBytes', 1);
  atLeast('indexIntervalBytes', 0);
  atLeast('recentBytes', 0);
  atLeast('preallocateBytes', 0);
  atLeast('flushIntervalMessages', 1);
  atLeast('flushIntervalMs', 0);
  atLeast('ttlMs', 0);
  atLeast('writerIdExpirationMs', 0);
  return { ...config };
}

/** Leader epoch entries as one comparable string. */
function epochsKey(epochs: readonly (readonly bigint[])[]): string {
  return epochs.map((e) => e.join(' ')).join('\n');
}
