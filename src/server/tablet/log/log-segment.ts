/**
 * LogSegment: one `.log` file of a bucket's log with its `.index` (OffsetIndex) and `.timeindex`
 * (TimeIndex), all three named by the segment's base offset written as 20 zero-padded digits.
 *
 * Grammar of `.log`: record batches (src/record/log-batch.ts) back to back, nothing else.
 *
 * Invariants:
 * - the file holds whole batches with consecutive offsets from `baseOffset`; `size` is where the
 *   next batch goes and `nextOffset` the offset it gets;
 * - only the active (last) segment of a log grows; a sealed segment is immutable until deleted, or
 *   cut by `truncateTo`, after which it is the active one again;
 * - offset-index entries point at batch starts below `size`; positions and relative offsets fit in
 *   i32 because the log rolls before they would not;
 * - a failed write is cut off the file before the error is reported, so the file never keeps a
 *   partial batch; readers are bounded by the high watermark and never see the unacknowledged end;
 * - past `size` the active segment's file may hold zeros written ahead (preallocation, up to
 *   `aheadEnd`); a sealed or closed segment's file ends at `size`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from '../../../common/errors.js';
import type { BatchCut } from '../../../record/batch-projection.js';
import { HEADER_SIZE, isCrcValid, LOG_OVERHEAD, MAGIC, type LogBatchHeader, readLogBatchHeader, sealLogBatch } from '../../../record/log-batch.js';
import { OffsetIndex } from './offset-index.js';
import { RecentBytes } from './recent-bytes.js';
import { storageError } from './storage-error.js';
import { TimeIndex } from './time-index.js';

/** `Length` (i32) follows the 8-byte BaseOffset; the batch is LOG_OVERHEAD + Length bytes. */
const LENGTH_AT = LOG_OVERHEAD - 4;
const MAGIC_AT = LOG_OVERHEAD;
/** First bytes of a batch read to plan its cut: header and Arrow metadata of wide batches fit. */
const CUT_HEAD_BYTES = 8192;
/** Recovery reads the log in chunks of this size (a bigger batch is read whole). */
const RECOVERY_CHUNK = 1 << 20;
/** Zeros written ahead of the active segment come from this buffer, one write per chunk. */
const ZEROS = Buffer.alloc(1 << 20);
/** Preallocation keeps whole pages zeroed: a write into a page the file ends in would extend it. */
const PAGE = 4096;

export interface SegmentConfig {
  readonly indexIntervalBytes: number;
  /** log.recent-batches.size: bytes of the last batches appended that the active segment keeps in memory. */
  readonly recentBytes: number;
  /** log.preallocate.size: bytes of zeros the active segment keeps written and fsynced ahead of its end (0 or absent: none). */
  readonly preallocateBytes?: number;
  /** log.segment.file-size: no zeros are written past it, since the segment rolls before. */
  readonly segmentBytes?: number;
}

/** The paths of a segment's files. */
export interface SegmentFiles {
  log: string;
  index: string;
  timeindex: string;
}

/** Where a batch starts and how big it is. */
export interface BatchLocation {
  position: number;
  header: LogBatchHeader;
}

/**
 * Plans the projection of a stored batch from its first bytes (batch-projection.ts's cutLogBatch
 * bound to a table's layouts): the projected batch and the copies that complete it, or how many
 * first bytes it needs.
 */
export type BatchCutter = (head: Buffer) => BatchCut | number;

/** Cut batches, and how many bytes of stored batches they were cut from. */
export interface CutBatches {
  batches: Buffer[];
  storedBytes: number;
}

export function segmentFileName(baseOffset: bigint, suffix: '.log' | '.index' | '.timeindex'): string {
  return `${baseOffset.toString().padStart(20, '0')}${suffix}`;
}

export async function syncDirectory(dir: string): Promise<void> {
  const dh = await fs.promises.open(dir, 'r');
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}

export class LogSegment {
  /** Bytes of whole batches in the file. */
  size = 0;
  /** The offset the next batch appended here gets. */
  nextOffset: bigint;
  /** Largest commit timestamp of the segment's batches (ms), -1 while empty. */
  maxTimestamp = -1;
  /** Set when a failed write could not be cut off, or an fsync failed: what the file holds is unknown. */
  damaged = false;
  private offsetOfMaxTimestamp = 0;
  private bytesSinceIndexEntry = 0;
  private closed = false;
  /** fsyncs of the `.log` file running: while one runs, an append goes through the file thread pool (see append). */
  private syncing = 0;
  /**
   * Past `size` the file may hold zeros up to here, written ahead and then fsynced (preallocation):
   * an fsync after an append below it writes data blocks only, where one that grows the file also
   * commits ext4's journal, which makes the slowest fsyncs slower (a 4 KiB write + fdatasync every
   * 2 ms on the reference disk: p99.9 7.4–8.3 ms growing the file, 3.2 ms overwriting zeros).
   */
  private aheadEnd = 0;
  /** The zeros being written ahead, from byte `from`; an append reaching that far waits for `done`. */
  private zeroing: { from: number; done: Promise<void> } | undefined;
  private readonly offsetIndex: OffsetIndex;
  private readonly timeIndex: TimeIndex;
  /** The last bytes appended while the segment is the active one (log.recent-batches.size). */
  private readonly recent: RecentBytes;
  /**
   * The memory of the header walks (`findBatch`), reused: every fetch walks headers, and a fresh
   * read buffer per walk was external memory that set off full collections at high fetch rates.
   * One walk at a time borrows it; a walk that finds it lent reads into memory of its own.
   */
  private walkScratch: Buffer | undefined;

  private constructor(
    private readonly dir: string,
    readonly baseOffset: bigint,
    private readonly fh: fs.promises.FileHandle,
    private readonly config: SegmentConfig,
  ) {
    this.nextOffset = baseOffset;
    this.recent = new RecentBytes(config.recentBytes);
    this.offsetIndex = new OffsetIndex(this.file('.index'));
    this.timeIndex = new TimeIndex(this.file('.timeindex'));
  }

  /** Creates the empty files of a new segment (replacing leftovers of the same name). */
  static async create(dir: string, baseOffset: bigint, config: SegmentConfig): Promise<LogSegment> {
    const logPath = path.join(dir, segmentFileName(baseOffset, '.log'));
    try {
      const segment = new LogSegment(dir, baseOffset, await fs.promises.open(logPath, 'w+'), config);
      await segment.offsetIndex.flush();
      await segment.timeIndex.flush();
      await syncDirectory(dir);
      return segment;
    } catch (err) {
      throw storageError(`cannot create segment ${logPath}`, err);
    }
  }

  /**
   * Opens an existing segment and loads its indexes. `indexesValid` is false when an index file is
   * missing or damaged, or a non-empty segment has no time index entry: the segment must then be
   * recovered. `nextBaseOffset` (the following segment's base) is its end when it is sealed.
   */
  static async open(
    dir: string,
    baseOffset: bigint,
    nextBaseOffset: bigint | undefined,
    config: SegmentConfig,
  ): Promise<{ segment: LogSegment; indexesValid: boolean }> {
    const logPath = path.join(dir, segmentFileName(baseOffset, '.log'));
    let fh: fs.promises.FileHandle;
    try {
      fh = await fs.promises.open(logPath, 'r+');
    } catch (err) {
      throw storageError(`cannot open segment ${logPath}`, err);
    }
    const segment = new LogSegment(dir, baseOffset, fh, config);
    try {
      segment.size = (await fh.stat()).size;
      const offsetsLoaded = await segment.offsetIndex.load();
      const timesLoaded = await segment.timeIndex.load();
      const offsets = segment.offsetIndex;
      const times = segment.timeIndex;
      if (times.length > 0) {
        segment.maxTimestamp = times.lastKey;
        segment.offsetOfMaxTimestamp = times.valueAt(times.length - 1);
      }
      if (nextBaseOffset !== undefined) segment.nextOffset = nextBaseOffset;
      const indexesValid =
        offsetsLoaded &&
        timesLoaded &&
        (offsets.length === 0 || offsets.valueAt(offsets.length - 1) < segment.size) &&
        (segment.size === 0 || times.length > 0);
      return { segment, indexesValid };
    } catch (err) {
      await fh.close();
      throw storageError(`cannot open segment ${logPath}`, err);
    }
  }

  get fileName(): string {
    return segmentFileName(this.baseOffset, '.log');
  }

  /**
   * Validates the batches from the last index entry below `recoveryPoint` (the whole file when
   * there is none) to the end: size bounds, magic, CRC-32C, consecutive offsets. Cuts the file at
   * the first bad or torn batch, rebuilds the indexes for the scanned part and reports every valid
   * batch to `visit`. Returns the number of bytes cut off, not counting the zeros that end the
   * file (written ahead by preallocation, or left by a crash before the data).
   */
  async recover(recoveryPoint: bigint, visit: (header: LogBatchHeader) => void): Promise<number> {
    const fileSize = this.size;
    let start = { relativeOffset: 0, position: 0 };
    if (recoveryPoint > this.baseOffset) {
      const entry = this.offsetIndex.lookup(Number(recoveryPoint - this.baseOffset) - 1);
      if (entry.position < fileSize) start = entry;
    }
    let end = await this.scan(start.relativeOffset, start.position, fileSize, visit);
    if (end === start.position && start.position > 0) {
      // The index entry points at no valid batch: trust none of the index and scan the whole file.
      end = await this.scan(0, 0, fileSize, visit);
    }
    if (end === fileSize) return 0;
    // Zeros after the last batch were written ahead of it (preallocation): not part of a torn write.
    const torn = (await this.endOfData(end, fileSize)) - end;
    try {
      await this.fh.truncate(end);
    } catch (err) {
      throw storageError(`cannot truncate ${this.file('.log')}`, err);
    }
    this.aheadEnd = end;
    return torn;
  }

  /** Where the bytes of the file from `position` to `end` stop being zeros for good. */
  private async endOfData(position: number, end: number): Promise<number> {
    const buf = Buffer.allocUnsafe(Math.min(ZEROS.length, end - position));
    let dataEnd = position;
    for (let at = position; at < end; ) {
      const n = await this.readInto(buf, Math.min(buf.length, end - at), at);
      if (n === 0) break;
      if (!buf.subarray(0, n).equals(ZEROS.subarray(0, n))) {
        let last = n - 1;
        while (buf[last] === 0) last--;
        dataEnd = at + last + 1;
      }
      at += n;
    }
    return dataEnd;
  }

  /** Scans valid batches from a batch start; returns where the valid log ends. */
  private async scan(relativeOffset: number, position: number, fileSize: number, visit: (header: LogBatchHeader) => void): Promise<number> {
    this.resetIndexesFrom(relativeOffset, position);
    let expected = this.baseOffset + BigInt(relativeOffset);
    let pos = position;
    let chunk = Buffer.allocUnsafe(Math.min(RECOVERY_CHUNK, Math.max(fileSize - pos, HEADER_SIZE)));
    let buf = chunk.subarray(0, 0);
    let bufPos = pos;
    while (pos + HEADER_SIZE <= fileSize) {
      let at = pos - bufPos;
      if (at + HEADER_SIZE > buf.length) {
        buf = chunk.subarray(0, await this.readInto(chunk, Math.min(chunk.length, fileSize - pos), pos));
        bufPos = pos;
        at = 0;
        if (buf.length < HEADER_SIZE) break;
      }
      const size = buf.readInt32LE(at + LENGTH_AT) + LOG_OVERHEAD;
      if (size < HEADER_SIZE || pos + size > fileSize) break;
      if (at + size > buf.length) {
        if (size > chunk.length) chunk = Buffer.allocUnsafe(size);
        buf = chunk.subarray(0, await this.readInto(chunk, Math.min(chunk.length, fileSize - pos), pos));
        bufPos = pos;
        at = 0;
        if (buf.length < size) break;
      }
      const batch = buf.subarray(at, at + size);
      if (batch.readInt8(MAGIC_AT) !== MAGIC) break;
      const header = readLogBatchHeader(batch);
      if (
        header.baseOffset !== expected ||
        header.lastOffsetDelta < 0 ||
        header.statisticsLength < 0 ||
        HEADER_SIZE + header.statisticsLength > size ||
        !isCrcValid(batch)
      ) {
        break;
      }
      visit(header);
      this.indexBatch(Number(expected - this.baseOffset), pos, size, Number(header.commitTimestamp));
      expected += BigInt(header.lastOffsetDelta) + 1n;
      pos += size;
    }
    this.size = pos;
    this.nextOffset = expected;
    return pos;
  }

  /**
   * Forgets the index entries a scan from this batch start rebuilds: those after it (the offset
   * entry pointing at it stays), or all of them when the scan starts at the file's start.
   */
  private resetIndexesFrom(relativeOffset: number, position: number): void {
    this.offsetIndex.truncate(position === 0 ? 0 : this.offsetIndex.floor(relativeOffset) + 1);
    let n = this.timeIndex.length;
    while (n > 0 && this.timeIndex.valueAt(n - 1) >= relativeOffset) n--;
    this.timeIndex.truncate(n);
    this.maxTimestamp = n > 0 ? this.timeIndex.keyAt(n - 1) : -1;
    this.offsetOfMaxTimestamp = n > 0 ? this.timeIndex.valueAt(n - 1) : 0;
    this.bytesSinceIndexEntry = 0;
  }

  /** Adds index entries for a batch written at `position` (one per index interval of bytes). */
  private indexBatch(relativeOffset: number, position: number, size: number, timestamp: number): void {
    if (this.bytesSinceIndexEntry > this.config.indexIntervalBytes) {
      this.offsetIndex.append(relativeOffset, position);
      if (this.maxTimestamp > this.timeIndex.lastKey) this.timeIndex.append(this.maxTimestamp, this.offsetOfMaxTimestamp);
      this.bytesSinceIndexEntry = 0;
    }
    this.bytesSinceIndexEntry += size;
    if (timestamp > this.maxTimestamp) {
      this.maxTimestamp = timestamp;
      this.offsetOfMaxTimestamp = relativeOffset;
    }
  }

  /**
   * Appends stamped batches (consecutive offsets up to `nextOffset`, commit timestamps not going
   * backwards) with one write. On failure the file is cut back to its previous size.
   */
  async append(batches: Buffer[], nextOffset: bigint): Promise<void> {
    let bytes = 0;
    for (const b of batches) bytes += b.length;
    if (this.zeroing && this.size + bytes > this.zeroing.from) await this.zeroing.done;
    try {
      // Written into the page cache on the event loop (~10 µs, where the file thread pool costs
      // ~50 µs of CPU and a loop turn) unless an fsync of this file runs: that fsync holds the
      // file's last page locked while ext4 allocates its blocks, which waits for the journal, so
      // the write would sleep in the kernel as long as the slowest fsync (45 ms seen), and every
      // bucket's appends and fetches with it. Then it goes through the pool.
      const bytesWritten = this.syncing === 0 ? fs.writevSync(this.fh.fd, batches, this.size) : (await this.fh.writev(batches, this.size)).bytesWritten;
      if (bytesWritten !== bytes) throw new Error(`short write of ${bytesWritten} of ${bytes} bytes (disk full?)`);
    } catch (err) {
      try {
        await this.fh.truncate(this.size);
      } catch (cutErr) {
        this.damaged = true;
        throw storageError(`cannot cut a failed write off ${this.file('.log')}`, cutErr);
      }
      throw storageError(`cannot append to ${this.file('.log')}`, err);
    }
    let position = this.size;
    for (const b of batches) {
      const h = readLogBatchHeader(b);
      this.indexBatch(Number(h.baseOffset - this.baseOffset), position, b.length, Number(h.commitTimestamp));
      this.recent.append(position, b);
      position += b.length;
    }
    this.size = position;
    this.nextOffset = nextOffset;
    this.preallocate(bytes);
  }

  /**
   * After an append of `bytes`, writes zeros ahead of the end once less than half of
   * `preallocateBytes` is left, up to `preallocateBytes` past it (at most to the segment size),
   * then fsyncs them: in the background, through the file thread pool. Appends of more than a
   * sixteenth of `preallocateBytes` set off none: their fsync is mostly their data, and zeros
   * ahead of them would double the disk writes of a high-throughput log. A failure (a full disk)
   * only leaves the file growing as before.
   */
  private preallocate(bytes: number): void {
    const ahead = this.config.preallocateBytes ?? 0;
    if (ahead === 0 || bytes > ahead / 16 || this.zeroing || this.closed || this.damaged || this.aheadEnd - this.size >= ahead / 2) return;
    const from = Math.max(this.aheadEnd, this.size);
    const to = Math.min(Math.ceil((this.size + ahead) / PAGE) * PAGE, this.config.segmentBytes ?? Infinity);
    if (to <= from) return;
    this.aheadEnd = to;
    const done = (async () => {
      // Counted as an fsync: appends beside it go through the pool (see append).
      this.syncing++;
      try {
        for (let at = from; at < to; at += ZEROS.length) await this.fh.write(ZEROS, 0, Math.min(ZEROS.length, to - at), at);
        await this.fh.datasync();
      } catch {
        // Appends go on growing the file, and sealing or recovery cuts what zeros it holds.
      } finally {
        this.syncing--;
        this.zeroing = undefined;
      }
    })();
    this.zeroing = { from, done };
  }

  /** Cuts the zeros written ahead off the file, once their write has ended. */
  private async cutZeros(): Promise<void> {
    await this.zeroing?.done;
    if (this.aheadEnd <= this.size) return;
    try {
      await this.fh.truncate(this.size);
    } catch (err) {
      throw storageError(`cannot cut the preallocated end off ${this.file('.log')}`, err);
    }
    this.aheadEnd = this.size;
  }

  /**
   * Cuts the file at byte `position`, the start of the batch at `offset` (replication: the log
   * diverged from the leader's there), and rebuilds the index entries and the largest timestamp of
   * what is left from the last offset-index entry before the cut. The caller flushes.
   */
  async truncateTo(offset: bigint, position: number): Promise<void> {
    if (position >= this.size) return;
    await this.zeroing?.done;
    try {
      await this.fh.truncate(position);
    } catch (err) {
      throw storageError(`cannot truncate ${this.file('.log')}`, err);
    }
    this.size = this.aheadEnd = position;
    this.recent.clear();
    if ((await this.recover(offset, () => undefined)) > 0) {
      throw new TributaryError('LOG_STORAGE_EXCEPTION', `${this.file('.log')} holds an invalid batch before the cut at offset ${offset}`);
    }
  }

  /**
   * Whole batches from the one holding `offset`, reading below byte `bound`: at least that batch,
   * then as many as fit in `maxBytes`, read into memory from `allocate`. Empty when no batch below
   * `bound` holds the offset.
   */
  async read(offset: bigint, maxBytes: number, bound: number, allocate?: (length: number) => Buffer): Promise<Buffer> {
    const found = await this.locate(offset, bound);
    if (!found) return Buffer.alloc(0);
    const length = Math.min(bound - found.position, Math.max(maxBytes, found.header.sizeInBytes));
    const buf = await this.readAt(found.position, length, allocate);
    let end = 0;
    while (end + LOG_OVERHEAD <= buf.length) {
      const next = end + buf.readInt32LE(end + LENGTH_AT) + LOG_OVERHEAD;
      if (next > buf.length) break;
      end = next;
    }
    return end === buf.length ? buf : buf.subarray(0, end);
  }

  /**
   * The batches from the one holding `offset` below byte `bound`, each cut by `cutter` (server-side
   * projection): of every batch only its first bytes and the bytes its cut copies are read. At
   * least one batch, then more while their cut size stays under `maxBytes` and their stored size
   * under `maxStoredBytes`; with the stored bytes they came from. None when no batch below `bound`
   * holds the offset.
   */
  async readCut(offset: bigint, maxBytes: number, maxStoredBytes: number, bound: number, cutter: BatchCutter): Promise<CutBatches> {
    const found = await this.locate(offset, bound);
    if (!found) return { batches: [], storedBytes: 0 };
    const out: Buffer[] = [];
    let size = 0;
    let stored = 0;
    let pos = found.position;
    let head: Promise<Buffer> | undefined = this.readAt(pos, Math.min(CUT_HEAD_BYTES, found.header.sizeInBytes));
    while (head) {
      let first = await head;
      const batchSize = first.readInt32LE(LENGTH_AT) + LOG_OVERHEAD;
      let cut = cutter(first.subarray(0, batchSize));
      while (typeof cut === 'number') {
        // The cut needs more of the batch's first bytes, within the batch.
        if (cut <= first.length || cut > batchSize) throw new TributaryError('LOG_STORAGE_EXCEPTION', `batch at byte ${pos} of ${this.file('.log')} cannot be cut: its first ${cut} bytes are asked for`);
        first = Buffer.allocUnsafe(cut);
        await this.readExactly(first, pos);
        cut = cutter(first);
      }
      const batch = cut.out;
      const at = pos;
      pos += batchSize;
      size += batch.length;
      stored += batchSize;
      // The next batch's first bytes are read while this one's buffers are; a failure surfaces when awaited.
      head = size < maxBytes && stored < maxStoredBytes && pos + HEADER_SIZE <= bound ? this.readAt(pos, Math.min(CUT_HEAD_BYTES, bound - pos)) : undefined;
      head?.catch(() => undefined);
      const held = first;
      await Promise.all(
        cut.copies.map(({ from, to, length }) =>
          from + length <= held.length ? void batch.set(held.subarray(from, from + length), to) : this.readExactly(batch.subarray(to, to + length), at + from),
        ),
      );
      sealLogBatch(batch);
      out.push(batch);
    }
    return { batches: out, storedBytes: stored };
  }

  /** The batch holding `offset` below byte `bound`: floor entry of the offset index, then a header scan. */
  locate(offset: bigint, bound: number): Promise<BatchLocation | undefined> {
    const from = this.offsetIndex.lookup(Number(offset - this.baseOffset)).position;
    return this.findBatch(from, bound, (h) => h.baseOffset + BigInt(h.lastOffsetDelta) >= offset);
  }

  /** The first batch below byte `bound` whose commit timestamp is at least `timestamp`. */
  locateTimestamp(timestamp: number, bound: number): Promise<BatchLocation | undefined> {
    const from = this.offsetIndex.lookup(this.timeIndex.lookup(timestamp)).position;
    return this.findBatch(from, bound, (h) => Number(h.commitTimestamp) >= timestamp);
  }

  /** Calls `visit` with the header and end position of each batch from byte `from` (a batch start) to byte `bound`. */
  async walkBatches(from: number, bound: number, visit: (header: LogBatchHeader, end: number) => void): Promise<void> {
    let end = from;
    await this.findBatch(from, bound, (h) => {
      end += h.sizeInBytes;
      visit(h, end);
      return false;
    });
  }

  /** Walks batch headers from `from`, reading about one index interval of bytes per system call. */
  private async findBatch(from: number, bound: number, match: (h: LogBatchHeader) => boolean): Promise<BatchLocation | undefined> {
    const chunk = Math.max(this.config.indexIntervalBytes, 4096) + HEADER_SIZE;
    const scratch = this.walkScratch?.length === chunk ? this.walkScratch : Buffer.allocUnsafe(chunk);
    this.walkScratch = undefined;
    try {
      let buf = scratch.subarray(0, 0);
      let bufPos = from;
      let pos = from;
      while (pos + HEADER_SIZE <= bound) {
        if (pos + HEADER_SIZE > bufPos + buf.length) {
          buf = scratch.subarray(0, await this.readInto(scratch, Math.min(chunk, bound - pos), pos));
          bufPos = pos;
        }
        const header = readLogBatchHeader(buf, pos - bufPos);
        if (header.sizeInBytes < HEADER_SIZE) {
          throw new TributaryError('LOG_STORAGE_EXCEPTION', `corrupt batch header at byte ${pos} of ${this.file('.log')}`);
        }
        if (match(header)) return { position: pos, header };
        pos += header.sizeInBytes;
      }
      return undefined;
    } finally {
      this.walkScratch = scratch;
    }
  }

  private async readAt(position: number, length: number, allocate: (length: number) => Buffer = Buffer.allocUnsafe): Promise<Buffer> {
    const buf = allocate(length);
    const n = await this.readInto(buf, length, position);
    return n === length ? buf : buf.subarray(0, n);
  }

  /** Fills `buf` from `position`; a batch below the high watermark that is cut short is corrupt storage. */
  private async readExactly(buf: Buffer, position: number): Promise<void> {
    const n = await this.readInto(buf, buf.length, position);
    if (n !== buf.length) throw new TributaryError('LOG_STORAGE_EXCEPTION', `${this.file('.log')} ends at byte ${position + n}, inside a batch`);
  }

  private async readInto(buf: Buffer, length: number, position: number): Promise<number> {
    if (this.closed) throw this.deletedWhileRead();
    const recent = this.recent.read(buf, length, position);
    if (recent >= 0) return recent;
    let done = 0;
    try {
      while (done < length) {
        const { bytesRead } = await this.fh.read(buf, done, length - done, position + done);
        if (bytesRead === 0) break;
        done += bytesRead;
      }
    } catch (err) {
      if (this.closed) throw this.deletedWhileRead();
      throw storageError(`cannot read ${this.file('.log')}`, err);
    }
    return done;
  }

  private deletedWhileRead(): TributaryError {
    return new TributaryError('LOG_OFFSET_OUT_OF_RANGE_EXCEPTION', `segment ${this.fileName} was deleted while being read`);
  }

  /** fdatasync of the `.log` file: makes every appended batch durable. */
  async flushLog(): Promise<void> {
    this.syncing++;
    try {
      await this.fh.datasync();
    } catch (err) {
      // After a failed fsync the kernel may have dropped the unwritten pages (even for ENOSPC).
      this.damaged = true;
      throw storageError(`cannot fsync ${this.file('.log')}`, err);
    } finally {
      this.syncing--;
    }
  }

  /** Makes the log and both indexes durable. */
  async flush(): Promise<void> {
    await this.flushLog();
    await this.flushIndexes();
  }

  /** Makes both indexes durable (nothing once the segment is closed: its files may be gone). */
  async flushIndexes(): Promise<void> {
    if (this.closed) return;
    await this.offsetIndex.flush();
    await this.timeIndex.flush();
  }

  /** Called when the segment stops being the active one: records its largest timestamp and flushes. */
  async seal(): Promise<void> {
    await this.cutZeros();
    this.recent.clear();
    if (this.maxTimestamp > this.timeIndex.lastKey) this.timeIndex.append(this.maxTimestamp, this.offsetOfMaxTimestamp);
    await this.flush();
  }

  /**
   * Closes the file, cut at its last batch; reads still running finish first (FileHandle.close
   * waits for them). Zeros a failed cut leaves are cut by recovery.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.cutZeros().catch(() => undefined);
    await this.fh.close();
  }

  /** Closes and removes the segment's files, the `.log` first: without it the indexes are orphans. */
  async delete(): Promise<void> {
    await this.close();
    try {
      for (const suffix of ['.log', '.index', '.timeindex'] as const) await fs.promises.rm(this.file(suffix), { force: true });
    } catch (err) {
      throw storageError(`cannot delete segment ${this.fileName}`, err);
    }
  }

  /** The paths of the segment's three files. */
  files(): SegmentFiles {
    return { log: this.file('.log'), index: this.file('.index'), timeindex: this.file('.timeindex') };
  }

  private file(suffix: '.log' | '.index' | '.timeindex'): string {
    return path.join(this.dir, segmentFileName(this.baseOffset, suffix));
  }
}
