/**
 * KV batch: what PutKv carries from a writer to the server for one bucket of a primary-key table
 * (fluss.md §3.1, Fluss's KvRecordBatch). Never stored: the server turns it into a changelog batch.
 *
 * Grammar (all integers little-endian; 28-byte header):
 *
 *   off size field
 *     0    4  Length         i32  bytes after this field (batch size = 4 + Length)
 *     4    1  Magic          i8   0
 *     5    4  CRC            u32  CRC-32C over bytes [9, end)
 *     9    2  SchemaId       i16  schema of the rows
 *    11    1  Attributes     i8   0 (no flag defined)
 *    12    8  WriterId       i64  -1 when not idempotent
 *    20    4  BatchSequence  i32  -1 when not idempotent
 *    24    4  RecordCount    i32
 *    28    .  RecordCount records:
 *
 *   record := Length i32 (bytes after this field), KeyLength varint32 (unsigned LEB128),
 *             Key (KeyLength bytes: the encoded primary key, never empty),
 *             Row (the rest: a CompactedRow, row-encoder.ts; absent, zero bytes, = delete the key)
 */
import { crc32c } from '@node-rs/crc32';
import { TributaryError } from '../common/errors.js';
import { NO_BATCH_SEQUENCE, NO_WRITER_ID } from './log-batch.js';

const KV_MAGIC = 0;
export const KV_BATCH_HEADER_SIZE = 28;
/** The Length field: the bytes before what it counts. */
const LENGTH_SIZE = 4;

const O_LENGTH = 0;
const O_MAGIC = 4;
const O_CRC = 5;
const O_SCHEMA_ID = 9;
const O_ATTRIBUTES = 11;
const O_WRITER_ID = 12;
const O_BATCH_SEQUENCE = 20;
const O_RECORD_COUNT = 24;
const CRC_START = O_SCHEMA_ID;

export interface KvRecord {
  /** The encoded primary key. */
  key: Uint8Array;
  /** The CompactedRow to upsert, or null to delete the key. */
  row: Uint8Array | null;
}

export interface NewKvBatch {
  schemaId: number;
  writerId?: bigint;
  batchSequence?: number;
  records: readonly KvRecord[];
}

export interface KvBatch {
  schemaId: number;
  writerId: bigint;
  batchSequence: number;
  /** Keys and rows are views of the batch's bytes, not copies. */
  records: KvRecord[];
}

function varIntSize(value: number): number {
  let size = 1;
  for (let u = value >>> 7; u !== 0; u >>>= 7) size++;
  return size;
}

/** Bytes a record with this key and row adds to a batch: what a writer counts against its batch size. */
export function kvRecordSize(key: Uint8Array, row: Uint8Array | null): number {
  return LENGTH_SIZE + varIntSize(key.length) + key.length + (row?.length ?? 0);
}

/** The batch of `records`, in their order; without writer id and batch sequence they are -1. */
export function buildKvBatch(b: NewKvBatch): Buffer {
  let size = KV_BATCH_HEADER_SIZE;
  for (const r of b.records) size += kvRecordSize(r.key, r.row);
  const builder = new KvBatchBuilder(size);
  for (const { key, row } of b.records) builder.add(key, row);
  return builder.finish(b.schemaId, b.writerId, b.batchSequence);
}

/**
 * Builds one batch record by record, straight into its wire bytes: each key and row is copied
 * once, so callers may pass views of buffers they reuse. The buffer grows by doubling.
 */
export class KvBatchBuilder {
  private buf: Buffer;
  private pos = KV_BATCH_HEADER_SIZE;
  private count = 0;

  constructor(initialBytes = 4096) {
    this.buf = Buffer.allocUnsafe(Math.max(initialBytes, KV_BATCH_HEADER_SIZE));
  }

  get recordCount(): number {
    return this.count;
  }

  /** The size of the batch so far, header included. */
  get sizeInBytes(): number {
    return this.pos;
  }

  /** Adds an upsert of `row`, or with null a delete, of the encoded primary key `key`. */
  add(key: Uint8Array, row: Uint8Array | null): void {
    // Either would read back as something else: no key at all, or a delete.
    if (key.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a KV record needs a non-empty key');
    if (row?.length === 0) throw new TributaryError('INVALID_ARGUMENT', 'a KV record row cannot be empty (null deletes)');
    const size = kvRecordSize(key, row);
    if (this.pos + size > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + size));
      this.buf.copy(grown, 0, 0, this.pos);
      this.buf = grown;
    }
    const buf = this.buf;
    let pos = buf.writeInt32LE(size - LENGTH_SIZE, this.pos);
    for (let u = key.length; ; ) {
      if (u <= 0x7f) {
        buf[pos++] = u;
        break;
      }
      buf[pos++] = (u & 0x7f) | 0x80;
      u >>>= 7;
    }
    buf.set(key, pos);
    pos += key.length;
    if (row) {
      buf.set(row, pos);
      pos += row.length;
    }
    this.pos = pos;
    this.count++;
  }

  /** The finished batch, a view of the builder's buffer; without writer id and batch sequence they are -1. */
  finish(schemaId: number, writerId?: bigint, batchSequence?: number): Buffer {
    const buf = this.buf.subarray(0, this.pos);
    buf.writeInt32LE(this.pos - LENGTH_SIZE, O_LENGTH);
    buf.writeInt8(KV_MAGIC, O_MAGIC);
    buf.writeInt16LE(schemaId, O_SCHEMA_ID);
    buf.writeInt8(0, O_ATTRIBUTES);
    buf.writeBigInt64LE(writerId ?? NO_WRITER_ID, O_WRITER_ID);
    buf.writeInt32LE(batchSequence ?? NO_BATCH_SEQUENCE, O_BATCH_SEQUENCE);
    buf.writeInt32LE(this.count, O_RECORD_COUNT);
    buf.writeUInt32LE(crc32c(buf.subarray(CRC_START)), O_CRC);
    return buf;
  }
}

function corrupt(why: string): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `invalid KV batch: ${why}`);
}

/** Checks that `buf` is exactly one batch: its Length, Magic and Attributes. */
function checkFraming(buf: Buffer): void {
  if (buf.length < KV_BATCH_HEADER_SIZE) throw corrupt(`${buf.length} bytes, shorter than the ${KV_BATCH_HEADER_SIZE}-byte header`);
  const size = buf.readInt32LE(O_LENGTH) + LENGTH_SIZE;
  if (size !== buf.length) throw corrupt(`declares ${size} bytes, ${buf.length} present`);
  const magic = buf.readInt8(O_MAGIC);
  if (magic !== KV_MAGIC) throw corrupt(`unsupported magic ${magic}`);
  const attributes = buf.readInt8(O_ATTRIBUTES);
  if (attributes !== 0) throw corrupt(`unknown attributes ${attributes}`);
}

/**
 * Reads one whole batch, checking framing (CORRUPT_MESSAGE) and its CRC-32C
 * (CORRUPT_RECORD_EXCEPTION) before anything else.
 */
export function readKvBatch(buf: Buffer): KvBatch {
  const { records: reader, ...header } = openKvBatch(buf);
  const records: KvRecord[] = new Array(header.recordCount);
  for (let i = 0; reader.next(); i++) records[i] = { key: reader.key, row: reader.row };
  return { schemaId: header.schemaId, writerId: header.writerId, batchSequence: header.batchSequence, records };
}

/**
 * Opens one whole batch as `readKvBatch` does, checking framing and CRC, but hands its records out
 * one at a time: nothing is kept of a record the caller drops. A record that is not well formed
 * throws when it is reached.
 */
export function openKvBatch(buf: Buffer): { schemaId: number; writerId: bigint; batchSequence: number; recordCount: number; records: KvRecordReader } {
  checkFraming(buf);
  if (crc32c(buf.subarray(CRC_START)) !== buf.readUInt32LE(O_CRC)) throw new TributaryError('CORRUPT_RECORD_EXCEPTION', 'KV batch fails its CRC-32C check');
  const count = buf.readInt32LE(O_RECORD_COUNT);
  // Every record takes at least 6 bytes (Length, KeyLength, one key byte): bounds the allocation.
  if (count < 0 || count > (buf.length - KV_BATCH_HEADER_SIZE) / 6) throw corrupt(`record count ${count} in ${buf.length} bytes`);
  return {
    schemaId: buf.readInt16LE(O_SCHEMA_ID),
    writerId: buf.readBigInt64LE(O_WRITER_ID),
    batchSequence: buf.readInt32LE(O_BATCH_SEQUENCE),
    recordCount: count,
    records: new KvRecordReader(buf, count),
  };
}

const NO_KEY = Buffer.alloc(0);

/** The records of a batch, one at a time: `next()` moves to the next record and sets `key` and `row`. */
export class KvRecordReader {
  /** The encoded primary key of the current record, a view of the batch. */
  key: Uint8Array = NO_KEY;
  /** Its CompactedRow, a view of the batch, or null for a delete. */
  row: Uint8Array | null = null;
  private pos = KV_BATCH_HEADER_SIZE;
  private index = 0;

  constructor(
    private readonly buf: Buffer,
    private readonly count: number,
  ) {}

  /** Moves to the next record; false after the last, once the batch has been checked to end there. */
  next(): boolean {
    const { buf, count } = this;
    const i = this.index;
    let pos = this.pos;
    if (i === count) {
      if (pos !== buf.length) throw corrupt(`${buf.length - pos} bytes after the last of ${count} records`);
      return false;
    }
    if (buf.length - pos < LENGTH_SIZE) throw corrupt(`record ${i} of ${count} starts past the end`);
    const length = buf.readInt32LE(pos);
    const end = pos + LENGTH_SIZE + length;
    if (length < 0 || end > buf.length) throw corrupt(`record ${i} declares ${length} bytes, ${buf.length - pos - LENGTH_SIZE} left`);
    pos += LENGTH_SIZE;
    let keyLength = 0;
    for (let shift = 0; ; shift += 7) {
      if (pos >= end || shift > 28) throw corrupt(`record ${i} has no readable key length`);
      const b = buf[pos++];
      keyLength |= (b & 0x7f) << shift;
      if (b < 0x80) break;
    }
    if (keyLength <= 0 || pos + keyLength > end) throw corrupt(`record ${i} has a key of ${keyLength} bytes in a record of ${length}`);
    this.key = buf.subarray(pos, pos + keyLength);
    pos += keyLength;
    this.row = pos < end ? buf.subarray(pos, end) : null;
    this.pos = end;
    this.index = i + 1;
    return true;
  }
}

/** Splits whole batches laid one after another, checking their Length only; `readKvBatch` checks the rest. */
export function splitKvBatches(buf: Buffer): Buffer[] {
  const batches: Buffer[] = [];
  let pos = 0;
  while (pos < buf.length) {
    if (buf.length - pos < KV_BATCH_HEADER_SIZE) throw corrupt(`truncated header at byte ${pos}`);
    const size = buf.readInt32LE(pos + O_LENGTH) + LENGTH_SIZE;
    if (size < KV_BATCH_HEADER_SIZE || pos + size > buf.length) throw corrupt(`batch at byte ${pos} declares ${size} bytes, ${buf.length - pos} present`);
    batches.push(buf.subarray(pos, pos + size));
    pos += size;
  }
  return batches;
}
