/**
 * Kafka record batch, magic 2 (the only format Produce v3+ and Fetch v4+ carry here).
 *
 *   off size field                 (integers big-endian)
 *     0    8  BaseOffset            int64
 *     8    4  BatchLength           int32  bytes after this field
 *    12    4  PartitionLeaderEpoch  int32
 *    16    1  Magic                 int8   2
 *    17    4  CRC                   uint32 CRC-32C of bytes [21, end)
 *    21    2  Attributes            int16  bits 0-2 codec (compression.ts), bit 3 timestamp type
 *                                          (1 = log append time), bit 4 transactional, bit 5 control
 *    23    4  LastOffsetDelta       int32
 *    27    8  BaseTimestamp         int64
 *    35    8  MaxTimestamp          int64
 *    43    8  ProducerId            int64  -1 when not idempotent
 *    51    2  ProducerEpoch         int16
 *    53    4  BaseSequence          int32  -1 when not idempotent
 *    57    4  RecordCount           int32
 *    61    .  Records               compressed as a whole by the codec
 *
 *   Record = Length varint, Attributes int8 (unused), TimestampDelta varlong, OffsetDelta varint,
 *            KeyLength varint (-1 = null), Key, ValueLength varint (-1 = null), Value,
 *            HeaderCount varint, Header*
 *   Header = KeyLength varint, Key (UTF-8), ValueLength varint (-1 = null), Value
 *
 * Decoding checks the magic, the length and the CRC before it decompresses anything, then that
 * every record is whole and that the count and offset deltas agree with the header. The records
 * are read in one pass by a RecordCursor, which makes no object per record: a raw topic copies
 * fields from it into its columns, a JSON topic takes the values.
 */
import { isUtf8 } from 'node:buffer';
import { crc32c } from '@node-rs/crc32';
import { KafkaDecodeError, Reader, Writer } from '../protocol/primitives.js';
import { Codec, type CodecId, compressRecords, decompressRecords } from './compression.js';

export const BATCH_HEADER_SIZE = 61;
const CRC_AT = 17;
const CRC_FROM = 21;
const ATTR_CODEC_MASK = 0x07;
const ATTR_LOG_APPEND_TIME = 0x08;
const ATTR_TRANSACTIONAL = 0x10;
const ATTR_CONTROL = 0x20;

export interface KafkaHeader {
  key: string;
  value: Buffer | null;
}

/** A batch's header: everything but its records. */
export interface KafkaBatchHeader {
  baseOffset: bigint;
  partitionLeaderEpoch: number;
  codec: number;
  logAppendTime: boolean;
  transactional: boolean;
  control: boolean;
  lastOffsetDelta: number;
  baseTimestamp: bigint;
  maxTimestamp: bigint;
  producerId: bigint;
  producerEpoch: number;
  baseSequence: number;
  recordCount: number;
}

/**
 * The records of a batch, read in one pass without an object per record: each `next()` reads and
 * checks one record and sets the fields below to it; after the last record it checks that nothing
 * follows and that the offset deltas agree with the header, and returns false. A key or value is
 * `length` bytes of `body` from `at`, length -1 for null.
 */
export interface RecordCursor {
  /** The records section, decompressed. */
  readonly body: Buffer;
  /** ms since epoch. */
  readonly timestamp: bigint;
  readonly keyAt: number;
  readonly keyLength: number;
  readonly valueAt: number;
  readonly valueLength: number;
  readonly headerCount: number;
  /** Where the record's headers start (their count first); they run to the record's `end`. */
  readonly headersAt: number;
  readonly end: number;
  /**
   * Whether the headers are written as this format's encoder writes those they decode to
   * (shortest varints, keys well-formed UTF-8), so that encoding them again gives these bytes.
   */
  readonly headersCanonical: boolean;
  next(): boolean;
  /** The current record's value, a view into `body`. */
  value(): Buffer | null;
  /** The current record's headers, decoded. */
  headers(): KafkaHeader[];
}

export interface OpenBatch extends KafkaBatchHeader {
  records: RecordCursor;
}

/** A batch that breaks the format: Produce answers it with CORRUPT_MESSAGE. */
export class CorruptBatchError extends KafkaDecodeError {}

/** Splits a Produce request's records into batches (views into `buf`), checking each one's framing. */
export function splitBatches(buf: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < buf.length; ) {
    if (buf.length - at < BATCH_HEADER_SIZE) throw new CorruptBatchError(`record batch cut off: ${buf.length - at} bytes left at position ${at}`);
    const size = buf.readInt32BE(at + 8) + 12;
    if (size < BATCH_HEADER_SIZE || at + size > buf.length) throw new CorruptBatchError(`record batch at position ${at} declares ${size} bytes, ${buf.length - at} left`);
    out.push(buf.subarray(at, at + size));
    at += size;
  }
  return out;
}

/**
 * Checks a batch's header and CRC and decompresses its records, `maxBytes` bounding what they may
 * decompress to; its records are checked as they are read.
 */
export function openBatch(batch: Buffer, maxBytes: number): OpenBatch {
  if (batch.length < BATCH_HEADER_SIZE) throw new CorruptBatchError(`record batch of ${batch.length} bytes is shorter than its header`);
  const magic = batch.readInt8(16);
  if (magic !== 2) throw new CorruptBatchError(`record batch magic ${magic}: only magic 2 is supported`);
  const crc = batch.readUInt32BE(CRC_AT);
  if (crc32c(batch.subarray(CRC_FROM)) !== crc) throw new CorruptBatchError('record batch CRC mismatch');
  const attributes = batch.readInt16BE(21);
  const codec = attributes & ATTR_CODEC_MASK;
  const header: KafkaBatchHeader = {
    baseOffset: batch.readBigInt64BE(0),
    partitionLeaderEpoch: batch.readInt32BE(12),
    codec,
    logAppendTime: (attributes & ATTR_LOG_APPEND_TIME) !== 0,
    transactional: (attributes & ATTR_TRANSACTIONAL) !== 0,
    control: (attributes & ATTR_CONTROL) !== 0,
    lastOffsetDelta: batch.readInt32BE(23),
    baseTimestamp: batch.readBigInt64BE(27),
    maxTimestamp: batch.readBigInt64BE(35),
    producerId: batch.readBigInt64BE(43),
    producerEpoch: batch.readInt16BE(51),
    baseSequence: batch.readInt32BE(53),
    recordCount: batch.readInt32BE(57),
  };
  const { recordCount } = header;
  if (recordCount < 0) throw new CorruptBatchError(`negative record count ${recordCount}`);
  const body = decompressRecords(codec, batch.subarray(BATCH_HEADER_SIZE), maxBytes);
  if (recordCount > body.length) throw new CorruptBatchError(`${recordCount} records in ${body.length} bytes`);
  return { ...header, records: new BatchRecords(body, header) };
}

/** The headers of a record without any: one array shared by all of them, never written to. */
const NO_HEADERS: KafkaHeader[] = Object.freeze([]) as unknown as KafkaHeader[];

/** The one reading of the records grammar, for every use of the records. */
class BatchRecords implements RecordCursor {
  timestamp = 0n;
  keyAt = 0;
  keyLength = -1;
  valueAt = 0;
  valueLength = -1;
  headerCount = 0;
  headersAt = 0;
  end = 0;
  headersCanonical = true;
  private index = -1;
  /** The batch's reader (none of each record's own: one per record cost more than the record). */
  private readonly r: Reader;

  constructor(
    readonly body: Buffer,
    private readonly header: KafkaBatchHeader,
  ) {
    this.r = new Reader(body);
  }

  next(): boolean {
    const r = this.r;
    const { recordCount, baseTimestamp } = this.header;
    if (this.index + 1 >= recordCount) {
      if (r.remaining !== 0) throw new CorruptBatchError(`${r.remaining} bytes after the last of ${recordCount} records`);
      if (recordCount > 0 && this.header.lastOffsetDelta !== recordCount - 1) throw new CorruptBatchError(`last offset delta ${this.header.lastOffsetDelta} with ${recordCount} records`);
      return false;
    }
    const index = ++this.index;
    const length = r.varint();
    if (length < 0 || length > r.remaining) throw new CorruptBatchError(`record length ${length} with ${r.remaining} bytes left`);
    const end = r.pos + length;
    r.int8();
    const delta = r.varlong();
    this.timestamp = delta === 0n ? baseTimestamp : baseTimestamp + delta;
    const offsetDelta = r.varint();
    if (offsetDelta !== index) throw new CorruptBatchError(`record ${index} has offset delta ${offsetDelta}`);
    const keyLength = (this.keyLength = bytesLength(r));
    this.keyAt = r.skip(keyLength < 0 ? 0 : keyLength);
    const valueLength = (this.valueLength = bytesLength(r));
    this.valueAt = r.skip(valueLength < 0 ? 0 : valueLength);
    this.headersAt = r.pos;
    this.end = end;
    this.readHeaders(r, null);
    if (r.pos !== end) throw new CorruptBatchError(`record ${index} declares ${length} bytes, its fields take ${length + r.pos - end}`);
    return true;
  }

  value(): Buffer | null {
    return this.valueLength < 0 ? null : this.body.subarray(this.valueAt, this.valueAt + this.valueLength);
  }

  headers(): KafkaHeader[] {
    if (this.headerCount === 0) return NO_HEADERS;
    const out: KafkaHeader[] = [];
    this.readHeaders(new Reader(this.body, this.headersAt, this.end), out);
    return out;
  }

  /** Reads the headers of the current record, from their count on, into `out` when given. */
  private readHeaders(r: Reader, out: KafkaHeader[] | null): void {
    const body = this.body;
    let at = r.pos;
    const count = r.varint();
    if (count < 0 || count > this.end - r.pos) throw new CorruptBatchError(`header count ${count}`);
    let canonical = shortest(r, at);
    for (let i = 0; i < count; i++) {
      at = r.pos;
      const keyLength = bytesLength(r);
      if (keyLength === -1) throw new CorruptBatchError('header with a null key');
      canonical &&= shortest(r, at);
      const keyAt = r.skip(keyLength);
      canonical &&= isUtf8(body.subarray(keyAt, keyAt + keyLength));
      at = r.pos;
      const valueLength = bytesLength(r);
      canonical &&= shortest(r, at);
      const valueAt = r.skip(valueLength < 0 ? 0 : valueLength);
      out?.push({ key: body.toString('utf8', keyAt, keyAt + keyLength), value: valueLength < 0 ? null : body.subarray(valueAt, valueAt + valueLength) });
    }
    this.headerCount = count;
    this.headersCanonical = canonical;
  }
}

/** The length of a nullable byte string (-1 = null), its bytes not read yet. */
function bytesLength(r: Reader): number {
  const n = r.varint();
  if (n < -1) throw new CorruptBatchError(`length ${n}`);
  return n;
}

/** Whether the varint read from `at` to the reader's position is as short as it can be (no last group of zeros). */
function shortest(r: Reader, at: number): boolean {
  return r.pos - at === 1 || r.buf[r.pos - 1] !== 0;
}

export interface NewKafkaBatch {
  baseOffset: bigint;
  partitionLeaderEpoch?: number;
  codec?: CodecId;
  producerId?: bigint;
  producerEpoch?: number;
  baseSequence?: number;
  /** Record timestamps in ms; offsets are baseOffset + index. */
  records: { timestamp: bigint; key: Uint8Array | null; value: Uint8Array | null; headers?: { key: string; value: Uint8Array | null }[] }[];
}

/** Encodes a batch of consecutive offsets (the CRC computed over the finished bytes). */
export function encodeBatch(b: NewKafkaBatch): Buffer {
  return encodeBatchWithin(b, Number.POSITIVE_INFINITY, true)!;
}

/**
 * Encodes the first records of `b` whose batch fits in `maxBytes` (uncompressed, so the size is
 * known as each record is added): all when they fit, at least one when `atLeastOne`, undefined
 * when not even one fits. Its record count says how many it holds.
 */
export function encodeBatchWithin(b: NewKafkaBatch, maxBytes: number, atLeastOne: boolean): Buffer | undefined {
  const records = b.records;
  let baseTimestamp = records.length > 0 ? records[0].timestamp : -1n;
  for (const rec of records) if (rec.timestamp < baseTimestamp) baseTimestamp = rec.timestamp;
  let maxTimestamp = baseTimestamp;
  const codec = b.codec ?? Codec.NONE;
  const bounded = maxBytes !== Number.POSITIVE_INFINITY;
  if (bounded && codec !== Codec.NONE) throw new RangeError('a size-bounded batch is not compressed');
  const body = new Writer(bounded ? Math.min(records.length * 64 + 16, maxBytes) : records.length * 64 + 16);
  const one = new Writer(256);
  let count = 0;
  for (; count < records.length; count++) {
    const rec = records[count];
    one.pos = 0;
    one.int8(0).varlong(rec.timestamp - baseTimestamp).varint(count);
    writeVarBytes(one, rec.key);
    writeVarBytes(one, rec.value);
    const headers = rec.headers ?? [];
    one.varint(headers.length);
    for (const h of headers) {
      writeVarBytes(one, Buffer.from(h.key, 'utf8'));
      writeVarBytes(one, h.value);
    }
    const bytes = one.finish();
    const before = body.pos;
    body.varint(bytes.length).raw(bytes);
    if (BATCH_HEADER_SIZE + body.pos > maxBytes && (count > 0 || !atLeastOne)) {
      body.pos = before;
      break;
    }
    if (rec.timestamp > maxTimestamp) maxTimestamp = rec.timestamp;
  }
  if (count === 0 && records.length > 0) return undefined;
  const payload = compressRecords(codec, body.finish());
  const out = Buffer.allocUnsafe(BATCH_HEADER_SIZE + payload.length);
  out.writeBigInt64BE(b.baseOffset, 0);
  out.writeInt32BE(out.length - 12, 8);
  out.writeInt32BE(b.partitionLeaderEpoch ?? -1, 12);
  out.writeInt8(2, 16);
  out.writeInt16BE(codec, 21);
  out.writeInt32BE(Math.max(0, count - 1), 23);
  out.writeBigInt64BE(baseTimestamp, 27);
  out.writeBigInt64BE(maxTimestamp, 35);
  out.writeBigInt64BE(b.producerId ?? -1n, 43);
  out.writeInt16BE(b.producerEpoch ?? -1, 51);
  out.writeInt32BE(b.baseSequence ?? -1, 53);
  out.writeInt32BE(count, 57);
  out.set(payload, BATCH_HEADER_SIZE);
  out.writeUInt32BE(crc32c(out.subarray(CRC_FROM)), CRC_AT);
  return out;
}

/** How many records a batch from encodeBatch holds. */
export function batchRecordCount(batch: Buffer): number {
  return batch.readInt32BE(57);
}

function writeVarBytes(w: Writer, v: Uint8Array | null): void {
  if (v === null) w.varint(-1);
  else w.varint(v.length).raw(v);
}
