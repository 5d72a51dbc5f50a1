/**
 * ARROW log payloads (DESIGN.md §3): one encapsulated Arrow IPC RecordBatch message, without the
 * schema message, which comes from the batch's schema id (arrow-schema.ts).
 *
 *   payload      := 0xFFFFFFFF i32, MetadataSize i32, Metadata, Padding, Body
 *   Metadata     := flatbuffer Message { version V5, bodyLength, header RecordBatch { length,
 *                   nodes: one FieldNode { length, nullCount } per column, buffers: Buffer
 *                   { offset, length } per body buffer, compression? } }
 *   MetadataSize := bytes of Metadata + Padding (zeros), so that Body starts 8-byte aligned
 *   Body         := per column in schema order its buffers (validity, [offsets,] values), each
 *                   starting at a multiple of 8, zero padded, stored as compression.ts says
 *
 * The schema message, then any number of payloads, then the end-of-stream marker (0xFFFFFFFF, 0)
 * make a valid Arrow IPC stream (`arrowIpcStream`) that any Arrow library reads.
 *
 * The validity buffer of a column without nulls is empty. Buffers of columns of the same batch are
 * copied one by one into the body, so shared memory between columns cannot corrupt it.
 */
import { isAscii } from 'node:buffer';
import * as arrow from 'apache-arrow';
import { BodyCompressionMethod } from 'apache-arrow/fb/body-compression-method';
import { BodyCompression, BufferRegion, Message, RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';
import { VectorAssembler } from 'apache-arrow/visitor/vectorassembler';
import { CompressedVectorLoader, VectorLoader } from 'apache-arrow/visitor/vectorloader';
import { TributaryError } from '../common/errors.js';
import type { Schema } from '../common/schema.js';
import type { DataType } from '../common/types.js';
import { type Row, toExternal } from '../common/values.js';
import {
  type ArrowCompression,
  arrowCodecOf,
  checkZstdLevel,
  compressBodyBuffer,
  DEFAULT_ZSTD_LEVEL,
  decompressBodyBuffer,
  LENGTH_PREFIX_SIZE,
  writeLengthPrefix,
} from './compression.js';

const CONTINUATION = -1;
/** Continuation marker and metadata size. */
const PREFIX_SIZE = 8;
const END_OF_STREAM = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

export const align8 = (n: number): number => (n + 7) & ~7;

/**
 * Memory for an encoded payload: `size` bytes, of any content (every byte is written). Writers pass
 * one that hands out recycled buffers.
 */
export type PayloadAllocator = (size: number) => Uint8Array;

const newBytes: PayloadAllocator = (size) => new Uint8Array(size);

/**
 * Encodes `batch` as a payload; `zstdLevel` applies to ZSTD only. With `headroom`, the payload
 * starts that many bytes into the memory from `allocate`.
 */
export function encodeArrowPayload(
  batch: arrow.RecordBatch,
  compression: ArrowCompression = 'ZSTD',
  zstdLevel = DEFAULT_ZSTD_LEVEL,
  headroom = 0,
  allocate: PayloadAllocator = newBytes,
): Uint8Array {
  const codec = arrowCodecOf(compression);
  if (codec === arrow.CompressionType.ZSTD) checkZstdLevel(zstdLevel);
  const assembled = VectorAssembler.assemble(batch);
  const raws = assembled.buffers.map((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
  // Per buffer: the bytes to store and, when compressing, the prefix (uncompressed size, or null for raw).
  const stored: Uint8Array[] = new Array(raws.length);
  const prefixes: (number | null)[] = new Array(raws.length);
  const regions: BufferRegion[] = new Array(raws.length);
  let bodyLength = 0;
  for (let i = 0; i < raws.length; i++) {
    const raw = raws[i];
    let size = raw.length;
    stored[i] = raw;
    if (codec !== null && raw.length > 0) {
      const frame = compressBodyBuffer(codec, raw, zstdLevel);
      if (frame) stored[i] = frame;
      prefixes[i] = frame ? raw.length : null;
      size = LENGTH_PREFIX_SIZE + stored[i].length;
    }
    regions[i] = new BufferRegion(bodyLength, size);
    bodyLength += align8(size);
  }
  const header = new RecordBatchHeader(batch.numRows, assembled.nodes, regions, codec === null ? null : new BodyCompression(codec), assembled.variadicBufferCounts);
  const { out, bodyStart } = frameMessage(Message.encode(Message.from(header, bodyLength)), bodyLength, headroom, allocate);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  for (let i = 0; i < raws.length; i++) {
    let pos = bodyStart + regions[i].offset;
    if (codec !== null && raws[i].length > 0) {
      writeLengthPrefix(view, pos, prefixes[i]);
      pos += LENGTH_PREFIX_SIZE;
    }
    out.set(stored[i], pos);
    pos += stored[i].length;
    out.fill(0, pos, bodyStart + align8(regions[i].offset + regions[i].length));
  }
  return out;
}

/**
 * Lays out continuation marker, metadata size, metadata and padding, leaving room for the body:
 * zeroed, unless it comes from `allocate` (the caller then writes all of it).
 */
export function frameMessage(metadata: Uint8Array, bodyLength: number, headroom = 0, allocate: PayloadAllocator = newBytes): { out: Uint8Array; bodyStart: number } {
  const bodyStart = PREFIX_SIZE + align8(metadata.length);
  // `headroom` free bytes before the message let a caller put a header in front without a copy.
  const out = allocate(headroom + bodyStart + bodyLength).subarray(headroom);
  const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
  view.setInt32(0, CONTINUATION, true);
  view.setInt32(4, bodyStart - PREFIX_SIZE, true);
  out.set(metadata, PREFIX_SIZE);
  out.fill(0, PREFIX_SIZE + metadata.length, bodyStart);
  return { out, bodyStart };
}

export interface PayloadMessage {
  header: RecordBatchHeader;
  /** The body as stored (buffers still compressed). */
  body: Uint8Array;
}

function corrupt(why: string, cause?: unknown): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `invalid Arrow payload: ${why}`, cause === undefined ? undefined : { cause });
}

/**
 * The bytes an Arrow payload begins with up to its body (prefix, metadata, padding), read from its
 * first 8 bytes: what a reader needs of a stored payload to know where its buffers are.
 */
export function arrowPayloadBodyStart(head: Uint8Array, payloadLength: number): number {
  if (head.length < PREFIX_SIZE || payloadLength < PREFIX_SIZE) throw corrupt(`${payloadLength} bytes`);
  const view = new DataView(head.buffer, head.byteOffset, PREFIX_SIZE);
  if (view.getInt32(0, true) !== CONTINUATION) throw corrupt('no continuation marker');
  const metadataSize = view.getInt32(4, true);
  const bodyStart = PREFIX_SIZE + metadataSize;
  if (metadataSize <= 0 || bodyStart > payloadLength) throw corrupt(`metadata of ${metadataSize} bytes in ${payloadLength}`);
  return bodyStart;
}

/** `head` holds at least the payload's first `arrowPayloadBodyStart` bytes. */
function readMessage(head: Uint8Array, payloadLength: number): { header: RecordBatchHeader; bodyLength: number; bodyStart: number } {
  const bodyStart = arrowPayloadBodyStart(head, payloadLength);
  if (head.length < bodyStart) throw corrupt(`metadata cut short at ${head.length} of ${bodyStart} bytes`);
  let message: Message;
  let header: RecordBatchHeader;
  try {
    message = Message.decode(head.subarray(PREFIX_SIZE, bodyStart));
    if (!message.isRecordBatch()) throw corrupt(`message type ${arrow.MessageHeader[message.headerType]}, not RecordBatch`);
    header = message.header();
  } catch (err) {
    if (err instanceof TributaryError) throw err;
    throw corrupt('unreadable metadata', err);
  }
  return { header, bodyLength: message.bodyLength, bodyStart };
}

/**
 * Reads the metadata of a payload of `payloadLength` bytes written with `arrowSchema` from `head`,
 * its first bytes up to the body at least, and checks it: one field node per column, each as long
 * as the batch, the schema's number of buffers, each inside the body, and a known codec. The body
 * is not needed.
 */
export function readPayloadMetadata(head: Uint8Array, payloadLength: number, arrowSchema: arrow.Schema): { header: RecordBatchHeader; bodyStart: number } {
  const { header, bodyLength, bodyStart } = readMessage(head, payloadLength);
  if (bodyStart + bodyLength !== payloadLength) throw corrupt(`body of ${bodyLength} bytes, ${payloadLength - bodyStart} present`);
  const fields = arrowSchema.fields;
  const bufferCount = fields.reduce((n, f) => n + bufferCountOf(f.type), 0);
  if (header.nodes.length !== fields.length || header.buffers.length !== bufferCount) {
    throw corrupt(`${header.nodes.length} columns and ${header.buffers.length} buffers, the schema has ${fields.length} columns and ${bufferCount} buffers`);
  }
  if (header.length < 0) throw corrupt(`${header.length} records`);
  for (const node of header.nodes) {
    if (node.length !== header.length || node.nullCount < 0 || node.nullCount > node.length) throw corrupt(`a column of ${node.length} values with ${node.nullCount} nulls in a batch of ${header.length}`);
  }
  for (const r of header.buffers) {
    if (r.offset < 0 || r.length < 0 || r.offset + r.length > bodyLength) throw corrupt(`buffer [${r.offset}, +${r.length}) outside the body of ${bodyLength} bytes`);
  }
  const compression = header.compression;
  if (compression && (arrow.CompressionType[compression.type] === undefined || compression.method !== BodyCompressionMethod.BUFFER)) {
    throw corrupt(`unknown body compression (codec ${compression.type}, method ${compression.method})`);
  }
  return { header, bodyStart };
}

/** `readPayloadMetadata` of a whole payload, and its body as stored (buffers still compressed). */
export function readPayloadMessage(payload: Uint8Array, arrowSchema: arrow.Schema): PayloadMessage {
  const { header, bodyStart } = readPayloadMetadata(payload, payload.length, arrowSchema);
  return { header, body: payload.subarray(bodyStart) };
}

/**
 * Checks a payload as the server receives it, from its metadata only (`readPayloadMessage`), and
 * that it holds `recordCount` records as its batch header says. Throws CORRUPT_MESSAGE.
 */
export function checkArrowPayload(payload: Uint8Array, arrowSchema: arrow.Schema, recordCount: number): void {
  const { header } = readPayloadMessage(payload, arrowSchema);
  if (header.length !== recordCount) throw corrupt(`${header.length} records, the batch header says ${recordCount}`);
}

/** The number of records of a payload, read from its metadata only. */
export function arrowPayloadRecordCount(payload: Uint8Array): number {
  return readMessage(payload, payload.length).header.length;
}

/** Body buffers per column of a flat Arrow type in IPC order; the types of our mapping and their kin. */
export function bufferCountOf(type: arrow.DataType): number {
  switch (type.typeId) {
    case arrow.Type.Null:
      return 0;
    case arrow.Type.Bool:
    case arrow.Type.Int:
    case arrow.Type.Float:
    case arrow.Type.Decimal:
    case arrow.Type.Date:
    case arrow.Type.Time:
    case arrow.Type.Timestamp:
    case arrow.Type.Interval:
    case arrow.Type.Duration:
    case arrow.Type.FixedSizeBinary:
      return 2;
    case arrow.Type.Utf8:
    case arrow.Type.Binary:
    case arrow.Type.LargeUtf8:
    case arrow.Type.LargeBinary:
      return 3;
    default:
      throw new TributaryError('INVALID_ARGUMENT', `Arrow type ${String(type)} is not supported in log payloads`);
  }
}

/** Typed arrays over the body need their natural alignment; a payload may sit anywhere in a frame. */
function aligned(bytes: Uint8Array): Uint8Array {
  return bytes.byteOffset % 8 === 0 ? bytes : new Uint8Array(bytes); // a copy, even of a Buffer
}

/**
 * Decodes a payload written with `arrowSchema` (any of the three compressions). Buffers that were
 * stored uncompressed and aligned are views of `payload`, not copies.
 */
export function decodeArrowPayload(arrowSchema: arrow.Schema, payload: Uint8Array): arrow.RecordBatch {
  const { header, body } = readPayloadMessage(payload, arrowSchema);
  const fields = arrowSchema.fields;
  let children: arrow.Data[];
  try {
    if (header.compression) {
      const codec = header.compression.type;
      const chunks = header.buffers.map((r) => aligned(decompressBodyBuffer(codec, body.subarray(r.offset, r.offset + r.length))));
      children = new CompressedVectorLoader(chunks, header.nodes, header.buffers, new Map(), arrow.MetadataVersion.V5).visitMany(fields);
    } else {
      children = new VectorLoader(aligned(body), header.nodes, header.buffers, new Map()).visitMany(fields);
    }
  } catch (err) {
    if (err instanceof TributaryError) throw err;
    throw corrupt('unreadable column buffers', err);
  }
  children.forEach((data, i) => checkColumn(data, header.length, fields[i].name));
  return new arrow.RecordBatch(arrowSchema, arrow.makeData({ type: new arrow.Struct(fields), length: header.length, nullCount: 0, children }));
}

/** Checks that the buffers of a decoded column hold `length` values, so reading them cannot run off the end. */
function checkColumn(data: arrow.Data, length: number, name: string): void {
  const short = (what: string): TributaryError => corrupt(`column '${name}': ${what} too short for ${length} values`);
  if (data.nullCount > 0 && (data.nullBitmap?.length ?? 0) < (length + 7) >> 3) throw short('validity buffer');
  if (arrow.DataType.isBool(data.type)) {
    if (data.values.length < (length + 7) >> 3) throw short('values');
  } else if (data.valueOffsets) {
    const offsets = data.valueOffsets;
    if (offsets.length < length + 1) throw short('offsets');
    if (Number(offsets[0]) < 0 || Number(offsets[length]) > data.values.length) throw corrupt(`column '${name}': offsets outside the values`);
  } else if (data.values && data.values.length < length * data.stride) {
    throw short('values');
  }
}

const schemaMessages = new WeakMap<arrow.Schema, Uint8Array>();

/** An Arrow IPC stream: the schema message, the payloads, end of stream. */
export function arrowIpcStream(arrowSchema: arrow.Schema, payloads: readonly Uint8Array[]): Uint8Array {
  let schemaMessage = schemaMessages.get(arrowSchema);
  if (!schemaMessage) {
    schemaMessage = frameMessage(Message.encode(Message.from(arrowSchema)), 0).out;
    schemaMessages.set(arrowSchema, schemaMessage);
  }
  return Buffer.concat([schemaMessage, ...payloads, END_OF_STREAM]);
}

/**
 * The rows `from` to `to` (exclusive) of a batch in their external form (values.ts): BIGINT as
 * bigint, DECIMAL as exact strings, timestamps as Timestamp, and so on. Columns are matched to
 * `schema` by name, so the batch may hold a projection.
 */
export function recordBatchRows(batch: arrow.RecordBatch, schema: Schema, from = 0, to = batch.numRows): Row[] {
  const readers = batch.schema.fields.map((field, i) => {
    const column = schema.columns.find((c) => c.name === field.name);
    if (!column) throw new TributaryError('INVALID_ARGUMENT', `record batch column '${field.name}' is not in the schema`);
    const data = batch.data.children[i];
    const read = internalValueReader(column.type, data);
    const value = (r: number): unknown => toExternal(column.type, read(r));
    return data.nullCount === 0 ? value : (r: number) => (data.getValid(r) ? value(r) : null);
  });
  const make = rowMakerOf(batch.schema);
  const rows: Row[] = new Array(Math.max(0, to - from));
  for (let r = from; r < to; r++) rows[r - from] = make(readers, r);
  return rows;
}

type RowMaker = (readers: readonly ((row: number) => unknown)[], row: number) => Row;

const rowMakers = new WeakMap<arrow.Schema, RowMaker>();

/**
 * Makes the row objects of batches of `arrowSchema`, one value reader per field: an object literal
 * of the field names, compiled once per schema, so that each row is created with all its
 * properties in place. Adding them one by one makes V8 grow every object through a chain of
 * shapes into a separate property store: about 4× the time, and more memory per row.
 */
function rowMakerOf(arrowSchema: arrow.Schema): RowMaker {
  let make = rowMakers.get(arrowSchema);
  if (!make) {
    const entries = arrowSchema.fields.map((f, i) => `${JSON.stringify(f.name)}: readers[${i}](row)`);
    make = new Function('readers', 'row', `return { ${entries.join(', ')} };`) as RowMaker;
    rowMakers.set(arrowSchema, make);
  }
  return make;
}

/**
 * A reader of whole rows of a batch as internal values (values.ts) in `schema` column order, null
 * for null and for schema columns the batch lacks. Built once per batch; `out` is filled and returned.
 */
export function internalRowReader(batch: arrow.RecordBatch, schema: Schema): (row: number, out?: unknown[]) => unknown[] {
  const columns = schema.columns.map((column) => {
    const i = batch.schema.fields.findIndex((f) => f.name === column.name);
    if (i < 0) return undefined;
    const data = batch.data.children[i];
    return { data, read: internalValueReader(column.type, data) };
  });
  return (row, out = new Array(columns.length)) => {
    for (let c = 0; c < columns.length; c++) {
      const col = columns[c];
      out[c] = col && col.data.getValid(row) ? col.read(row) : null;
    }
    return out;
  };
}

const utf8 = new TextDecoder();

/**
 * Reads the internal value (values.ts) at a row of a column. A sliced Data has its fixed-width
 * values and its offsets cut to the slice, but not its bits (read from `data.offset` on) nor the
 * bytes the offsets point into.
 */
function internalValueReader(type: DataType, data: arrow.Data): (row: number) => unknown {
  const values = data.values;
  switch (type.kind) {
    case 'BOOLEAN':
      return (r) => {
        const bit = data.offset + r;
        return (values[bit >> 3] & (1 << (bit & 7))) !== 0;
      };
    case 'DECIMAL':
      return (r) => {
        const w = 4 * r;
        return BigInt.asIntN(128, (BigInt(values[w + 3]) << 96n) | (BigInt(values[w + 2]) << 64n) | (BigInt(values[w + 1]) << 32n) | BigInt(values[w]));
      };
    case 'CHAR':
    case 'STRING': {
      const offsets = data.valueOffsets;
      // ASCII text, the common case, reads as Latin-1 without a UTF-8 decoder: a third faster per value.
      if (isAscii(values)) {
        const bytes = Buffer.from(values.buffer, values.byteOffset, values.byteLength);
        return (r) => bytes.toString('latin1', offsets[r], offsets[r + 1]);
      }
      return (r) => utf8.decode(values.subarray(offsets[r], offsets[r + 1]));
    }
    case 'BINARY':
    case 'BYTES': {
      const offsets = data.valueOffsets;
      return (r) => values.slice(offsets[r], offsets[r + 1]);
    }
    case 'TIME':
      return (r) => Number(values[r]);
    default:
      // Ints, floats and days are numbers; BIGINT and timestamps are bigints: as stored.
      return (r) => values[r];
  }
}
