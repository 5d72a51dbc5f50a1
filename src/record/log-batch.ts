/**
 * Log record batch: the unit of the log, identical on disk and on the wire (DESIGN.md §3).
 *
 * Grammar (all integers little-endian; 56-byte header):
 *
 *   off size field
 *     0    8  BaseOffset       i64  assigned by the server on append
 *     8    4  Length           i32  bytes after this field (batch size = 12 + Length)
 *    12    1  Magic            i8   2
 *    13    8  CommitTimestamp  i64  server append time, ms since epoch
 *    21    4  LeaderEpoch      i32
 *    25    4  CRC              u32  CRC-32C over bytes [29, end)
 *    29    2  SchemaId         i16
 *    31    1  Attributes       i8   bit0 = append-only (log table); bit1 = record sequences:
 *                                     BatchSequence is the sequence of the batch's last record and
 *                                     counts records, as a Kafka producer's (writer-state.ts)
 *    32    4  LastOffsetDelta  i32  last offset = BaseOffset + LastOffsetDelta
 *    36    8  WriterId         i64  -1 when not idempotent
 *    44    4  BatchSequence    i32  -1 when not idempotent
 *    48    4  RecordCount      i32
 *    52    4  StatisticsLength i32  0 = no statistics
 *    56    .  Statistics, then the records payload (an Arrow IPC RecordBatch message)
 *
 * The CRC starts after BaseOffset, CommitTimestamp and LeaderEpoch because the server
 * stamps those in place on append without recomputing it.
 */
import { crc32c } from '@node-rs/crc32';
import { TributaryError } from '../common/errors.js';

export const MAGIC = 2;
export const HEADER_SIZE = 56;
/** BaseOffset + Length: the bytes before `Length` counts. */
export const LOG_OVERHEAD = 12;
export const NO_WRITER_ID = -1n;
export const NO_BATCH_SEQUENCE = -1;

const O_BASE_OFFSET = 0;
const O_LENGTH = 8;
const O_MAGIC = 12;
const O_COMMIT_TS = 13;
const O_LEADER_EPOCH = 21;
const O_CRC = 25;
const O_SCHEMA_ID = 29;
const O_ATTRIBUTES = 31;
const O_LAST_OFFSET_DELTA = 32;
const O_WRITER_ID = 36;
const O_BATCH_SEQUENCE = 44;
const O_RECORD_COUNT = 48;
const O_STATS_LENGTH = 52;
const CRC_START = O_SCHEMA_ID;
const ATTR_APPEND_ONLY = 1;
const ATTR_RECORD_SEQUENCES = 2;

export interface LogBatchHeader {
  baseOffset: bigint;
  /** Whole batch size in bytes, header included. */
  sizeInBytes: number;
  magic: number;
  commitTimestamp: bigint;
  leaderEpoch: number;
  crc: number;
  schemaId: number;
  appendOnly: boolean;
  /** BatchSequence counts records (a Kafka producer's batch), not batches. */
  recordSequences: boolean;
  lastOffsetDelta: number;
  writerId: bigint;
  batchSequence: number;
  recordCount: number;
  statisticsLength: number;
}

export interface NewLogBatch {
  schemaId: number;
  appendOnly: boolean;
  recordCount: number;
  payload: Uint8Array;
  recordSequences?: boolean;
  writerId?: bigint;
  batchSequence?: number;
}

/** Builds a batch with BaseOffset, CommitTimestamp and LeaderEpoch zero, ready to be sent. */
export function buildLogBatch(b: NewLogBatch): Buffer {
  const buf = Buffer.allocUnsafe(HEADER_SIZE + b.payload.length);
  buf.set(b.payload, HEADER_SIZE);
  return writeLogBatchHeader(buf, b);
}

/**
 * The same, for a payload encoded with HEADER_SIZE bytes of headroom before it (see
 * encodeArrowPayload's `headroom`): the header is written there and the payload is not copied.
 */
export function buildLogBatchInHeadroom(b: NewLogBatch): Buffer {
  const p = b.payload;
  if (p.byteOffset < HEADER_SIZE) throw new RangeError('the payload has no headroom for a log batch header');
  return writeLogBatchHeader(Buffer.from(p.buffer, p.byteOffset - HEADER_SIZE, HEADER_SIZE + p.length), b);
}

/** Writes the header of `buf` (whose payload is in place after HEADER_SIZE) and its CRC. */
function writeLogBatchHeader(buf: Buffer, b: NewLogBatch): Buffer {
  buf.writeBigInt64LE(0n, O_BASE_OFFSET);
  buf.writeInt32LE(buf.length - LOG_OVERHEAD, O_LENGTH);
  buf.writeInt8(MAGIC, O_MAGIC);
  buf.writeBigInt64LE(0n, O_COMMIT_TS);
  buf.writeInt32LE(0, O_LEADER_EPOCH);
  buf.writeInt16LE(b.schemaId, O_SCHEMA_ID);
  buf.writeInt8((b.appendOnly ? ATTR_APPEND_ONLY : 0) | (b.recordSequences ? ATTR_RECORD_SEQUENCES : 0), O_ATTRIBUTES);
  buf.writeInt32LE(Math.max(0, b.recordCount - 1), O_LAST_OFFSET_DELTA);
  buf.writeBigInt64LE(b.writerId ?? NO_WRITER_ID, O_WRITER_ID);
  buf.writeInt32LE(b.batchSequence ?? NO_BATCH_SEQUENCE, O_BATCH_SEQUENCE);
  buf.writeInt32LE(b.recordCount, O_RECORD_COUNT);
  buf.writeInt32LE(0, O_STATS_LENGTH);
  buf.writeUInt32LE(crc32c(buf.subarray(CRC_START)), O_CRC);
  return buf;
}

/** Reads the header at `pos`; the caller must have checked that HEADER_SIZE bytes are there. */
export function readLogBatchHeader(buf: Buffer, pos = 0): LogBatchHeader {
  return {
    baseOffset: buf.readBigInt64LE(pos + O_BASE_OFFSET),
    sizeInBytes: buf.readInt32LE(pos + O_LENGTH) + LOG_OVERHEAD,
    magic: buf.readInt8(pos + O_MAGIC),
    commitTimestamp: buf.readBigInt64LE(pos + O_COMMIT_TS),
    leaderEpoch: buf.readInt32LE(pos + O_LEADER_EPOCH),
    crc: buf.readUInt32LE(pos + O_CRC),
    schemaId: buf.readInt16LE(pos + O_SCHEMA_ID),
    appendOnly: (buf.readInt8(pos + O_ATTRIBUTES) & ATTR_APPEND_ONLY) !== 0,
    recordSequences: (buf.readInt8(pos + O_ATTRIBUTES) & ATTR_RECORD_SEQUENCES) !== 0,
    lastOffsetDelta: buf.readInt32LE(pos + O_LAST_OFFSET_DELTA),
    writerId: buf.readBigInt64LE(pos + O_WRITER_ID),
    batchSequence: buf.readInt32LE(pos + O_BATCH_SEQUENCE),
    recordCount: buf.readInt32LE(pos + O_RECORD_COUNT),
    statisticsLength: buf.readInt32LE(pos + O_STATS_LENGTH),
  };
}

/** The batch's Arrow payload (after header and statistics). */
export function logBatchPayload(batch: Buffer): Buffer {
  const stats = batch.readInt32LE(O_STATS_LENGTH);
  return batch.subarray(HEADER_SIZE + stats, batch.readInt32LE(O_LENGTH) + LOG_OVERHEAD);
}

export function computeCrc(batch: Buffer): number {
  return crc32c(batch.subarray(CRC_START, batch.readInt32LE(O_LENGTH) + LOG_OVERHEAD));
}

export function isCrcValid(batch: Buffer): boolean {
  return computeCrc(batch) === batch.readUInt32LE(O_CRC);
}

/** Stamps the server-assigned fields in place (the CRC does not cover them). */
export function stampLogBatch(buf: Buffer, pos: number, baseOffset: bigint, commitTimestamp: bigint, leaderEpoch: number): void {
  buf.writeBigInt64LE(baseOffset, pos + O_BASE_OFFSET);
  buf.writeBigInt64LE(commitTimestamp, pos + O_COMMIT_TS);
  buf.writeInt32LE(leaderEpoch, pos + O_LEADER_EPOCH);
}

/**
 * Splits a buffer holding whole batches one after another, checking framing, magic and CRC of
 * each. Used for incoming produce requests, where anything malformed is CORRUPT_MESSAGE.
 */
export function splitLogBatches(buf: Buffer): Buffer[] {
  const batches: Buffer[] = [];
  let pos = 0;
  while (pos < buf.length) {
    if (buf.length - pos < HEADER_SIZE) throw new TributaryError('CORRUPT_MESSAGE', `truncated record batch header at byte ${pos}`);
    const size = buf.readInt32LE(pos + O_LENGTH) + LOG_OVERHEAD;
    if (size < HEADER_SIZE || pos + size > buf.length) throw new TributaryError('CORRUPT_MESSAGE', `record batch at byte ${pos} declares ${size} bytes, ${buf.length - pos} present`);
    const batch = buf.subarray(pos, pos + size);
    if (batch.readInt8(O_MAGIC) !== MAGIC) throw new TributaryError('CORRUPT_MESSAGE', `unsupported record batch magic ${batch.readInt8(O_MAGIC)}`);
    const stats = batch.readInt32LE(O_STATS_LENGTH);
    if (stats < 0 || HEADER_SIZE + stats > size) throw new TributaryError('CORRUPT_MESSAGE', 'record batch statistics overflow the batch');
    if (batch.readInt32LE(O_RECORD_COUNT) < 0) throw new TributaryError('CORRUPT_MESSAGE', 'negative record count');
    if (!isCrcValid(batch)) throw new TributaryError('CORRUPT_RECORD_EXCEPTION', `record batch at byte ${pos} fails its CRC-32C check`);
    batches.push(batch);
    pos += size;
  }
  return batches;
}

/**
 * Gives `out`, a batch whose payload fills the rest of it, the header of `stored` (server-side
 * projection): same offsets, timestamps and writer fields, statistics dropped, Length set. Once
 * the payload is in place, `sealLogBatch` sets the CRC.
 */
export function reframeLogBatch(stored: Buffer, out: Buffer): void {
  stored.copy(out, 0, 0, HEADER_SIZE);
  out.writeInt32LE(out.length - LOG_OVERHEAD, O_LENGTH);
  out.writeInt32LE(0, O_STATS_LENGTH);
}

/** Sets the CRC of a batch whose bytes are all in place. */
export function sealLogBatch(batch: Buffer): void {
  batch.writeUInt32LE(computeCrc(batch), O_CRC);
}

/** Iterates the whole batches of a buffer read from the log (trusted: framing only, no CRC check). */
export function* logBatchesOf(records: Buffer): Generator<Buffer> {
  let pos = 0;
  while (pos + HEADER_SIZE <= records.length) {
    const size = records.readInt32LE(pos + O_LENGTH) + LOG_OVERHEAD;
    if (size < HEADER_SIZE || pos + size > records.length) return;
    yield records.subarray(pos, pos + size);
    pos += size;
  }
}
