/**
 * Avro object container files, in memory, as Iceberg writes its manifests and manifest lists
 * (Avro spec "Object Container Files"; Iceberg spec "Appendix A: Format-specific Requirements").
 *
 *   file   := magic meta sync block*
 *   magic  := 'O' 'b' 'j' 0x01
 *   meta   := map<bytes>: avro.schema (the writer's schema, JSON), avro.codec, then the caller's keys
 *   map    := (count:long (key:string value:bytes){count})* 0:long   (a negative count is followed
 *             by the block's byte size)
 *   sync   := 16 random bytes, repeated after every block
 *   block  := count:long size:long data[size] sync   -- data: `count` records, raw deflate (RFC 1951)
 *   long   := zig-zag varint;  string, bytes := length:long then the bytes
 *
 * The header schema is written verbatim because Iceberg readers resolve fields by the `field-id`,
 * `element-id` and `logicalType` attributes in it, which avsc leaves out when it prints a schema
 * itself. Records are encoded and decoded by avsc, with every Avro `long` a bigint both ways since
 * Iceberg snapshot ids use all 64 bits. The framing above is done here, not by avsc's
 * BlockEncoder/BlockDecoder streams: the decoder ends quietly at a truncated block (a manifest that
 * lost its tail would read as a shorter manifest), and the encoder only takes a BigInt long type
 * through a private field.
 */
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { deflateRaw, inflateRaw } from 'node:zlib';
import avro from 'avsc';
import { TributaryError } from '../../common/errors.js';

/** An Avro schema in its JSON form. */
export type AvroSchema = string | readonly AvroSchema[] | { readonly [attribute: string]: unknown };

export interface AvroFile {
  /** The writer's schema, kept verbatim in the header. */
  schema: AvroSchema;
  /** The header's key-value metadata, without the reserved `avro.` keys. */
  metadata: Record<string, string>;
  /** Decoded as iterated, each time; a malformed record fails the iteration with STORAGE_EXCEPTION. */
  records: Iterable<unknown>;
}

const MAGIC = Buffer.from('Obj\x01', 'latin1');
const SYNC_BYTES = 16;
/** Uncompressed bytes of records per block, as Avro's own writers use. */
const BLOCK_BYTES = 64 * 1024;

const deflate = promisify(deflateRaw);
const inflate = promisify(inflateRaw);

// avsc copies the bytes out of toBuffer's result before it returns, so one buffer serves all calls.
const longBytes = Buffer.alloc(8);
const bigintLong = avro.types.LongType.__with({
  fromBuffer: (buf: Buffer) => buf.readBigInt64LE(),
  toBuffer: (n: bigint | number) => {
    if (typeof n === 'bigint') {
      longBytes.writeBigInt64LE(n);
    } else {
      // Counts and sizes arrive as numbers: two 32-bit halves spare a bigint per value.
      const high = Math.floor(n / 2 ** 32);
      longBytes.writeUInt32LE(n - high * 2 ** 32, 0);
      longBytes.writeInt32LE(high, 4);
    }
    return longBytes;
  },
  fromJSON: (n: number | string) => BigInt(n),
  toJSON: (n: bigint) => String(n),
  isValid: (n: unknown) => (typeof n === 'bigint' ? BigInt.asIntN(64, n) === n : Number.isSafeInteger(n)),
  compare: (a: bigint, b: bigint) => (a < b ? -1 : a > b ? 1 : 0),
});

/**
 * The avsc type of a schema, reading and writing every `long` (with or without a logical type) as
 * a bigint. Building one costs about a millisecond and a table's manifests share a few schemas, so
 * the last few are kept, keyed by their JSON text.
 */
function typeOf(schemaText: string, schema: AvroSchema): avro.Type {
  let type = types.get(schemaText);
  if (type === undefined) {
    type = avro.Type.forSchema(schema as avro.Schema, {
      typeHook: (s) => (s === 'long' || (typeof s === 'object' && (s as { type?: unknown }).type === 'long') ? bigintLong : undefined),
    });
    if (types.size === TYPES_KEPT) types.delete(types.keys().next().value!);
    types.set(schemaText, type);
  }
  return type;
}

const TYPES_KEPT = 32;
const types = new Map<string, avro.Type>();

// The container's own fields: plain numbers are exact for counts and sizes.
const LONG = avro.Type.forSchema('long');
const META = avro.Type.forSchema({ type: 'map', values: 'bytes' });

/**
 * Writes an object container file with the deflate codec. Records may come from a generator, so
 * callers can build each one just before it is encoded.
 */
export async function encodeAvroFile(file: AvroFile): Promise<Uint8Array> {
  const schemaText = JSON.stringify(file.schema);
  let type: avro.Type;
  try {
    type = typeOf(schemaText, file.schema);
  } catch (err) {
    throw new TributaryError('INVALID_ARGUMENT', `invalid Avro schema: ${(err as Error).message}`, { cause: err });
  }
  const meta: Record<string, Buffer> = {
    'avro.schema': Buffer.from(schemaText),
    'avro.codec': Buffer.from('deflate'),
  };
  for (const [key, value] of Object.entries(file.metadata)) {
    if (key.startsWith('avro.')) throw new TributaryError('INVALID_ARGUMENT', `Avro metadata key ${key} is reserved`);
    meta[key] = Buffer.from(value);
  }
  const sync = randomBytes(SYNC_BYTES);
  // Blocks are compressed on the thread pool while the next ones are encoded.
  const parts: Promise<Buffer[]>[] = [Promise.resolve([MAGIC, META.toBuffer(meta), sync])];
  const flush = (data: Buffer, count: number) =>
    parts.push(deflate(data).then((deflated) => [LONG.toBuffer(count), LONG.toBuffer(deflated.length), deflated, sync]));

  let block = Buffer.allocUnsafe(BLOCK_BYTES);
  let used = 0;
  let count = 0;
  let i = 0;
  for (const record of file.records) {
    try {
      let end = type.encode(record, block, used);
      if (end < 0 && count > 0) {
        flush(block.subarray(0, used), count);
        block = Buffer.allocUnsafe(BLOCK_BYTES);
        used = count = 0;
        end = type.encode(record, block, 0);
      }
      if (end < 0) {
        // One record larger than a block: it gets a block of its own size (end = -missing bytes).
        block = Buffer.allocUnsafe(block.length - end);
        end = type.encode(record, block, 0);
      }
      used = end;
      count++;
    } catch (err) {
      throw new TributaryError('INVALID_ARGUMENT', `cannot encode Avro record ${i}: ${(err as Error).message}`, { cause: err });
    }
    i++;
  }
  if (count > 0) flush(block.subarray(0, used), count);
  return Buffer.concat((await Promise.all(parts)).flat());
}

/** Reads an object container file (codec deflate or null); any malformed or truncated part is a STORAGE_EXCEPTION. */
export async function decodeAvroFile(bytes: Uint8Array): Promise<AvroFile> {
  try {
    return await decode(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  } catch (err) {
    if (err instanceof TributaryError) throw err;
    throw malformed((err as Error).message, err);
  }
}

function malformed(why: string, cause?: unknown): TributaryError {
  return new TributaryError('STORAGE_EXCEPTION', `malformed Avro file: ${why}`, { cause });
}

async function decode(buf: Buffer): Promise<AvroFile> {
  if (buf.length < MAGIC.length || !buf.subarray(0, MAGIC.length).equals(MAGIC)) throw malformed('no Avro magic');
  const head = META.decode(buf, MAGIC.length);
  if (head.offset < 0 || head.offset + SYNC_BYTES > buf.length) throw malformed('truncated header');
  const meta = head.value as Record<string, Buffer>;
  if (meta['avro.schema'] === undefined) throw malformed('no avro.schema in the header');
  const schemaText = meta['avro.schema'].toString('utf8');
  const schema = JSON.parse(schemaText) as AvroSchema;
  const codec = meta['avro.codec']?.toString('utf8') ?? 'null';
  if (codec !== 'deflate' && codec !== 'null') throw malformed(`unsupported codec ${codec}`);
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta)) {
    if (!key.startsWith('avro.')) metadata[key] = value.toString('utf8');
  }
  const type = typeOf(schemaText, schema);
  const sync = buf.subarray(head.offset, head.offset + SYNC_BYTES);

  const frames: { count: number; data: Buffer }[] = [];
  let pos = head.offset + SYNC_BYTES;
  while (pos < buf.length) {
    const count = LONG.decode(buf, pos);
    const size = count.offset < 0 ? count : LONG.decode(buf, count.offset);
    if (size.offset < 0) throw malformed(`truncated block header at byte ${pos}`);
    if (count.value < 0 || size.value < 0) throw malformed(`negative block count or size at byte ${pos}`);
    const end = size.offset + (size.value as number);
    if (end + SYNC_BYTES > buf.length) throw malformed(`truncated block at byte ${pos}`);
    if (!buf.subarray(end, end + SYNC_BYTES).equals(sync)) throw malformed(`sync marker mismatch after the block at byte ${pos}`);
    frames.push({ count: count.value as number, data: buf.subarray(size.offset, end) });
    pos = end + SYNC_BYTES;
  }
  const blocks =
    codec === 'deflate' ? await Promise.all(frames.map(async (f) => ({ count: f.count, data: await inflate(f.data) }))) : frames;
  return { schema, metadata, records: { [Symbol.iterator]: () => decodeRecords(type, blocks) } };
}

/** Decodes records as they are iterated, so a caller converting them keeps only its own objects. */
function* decodeRecords(type: avro.Type, blocks: { count: number; data: Buffer }[]): Generator<unknown> {
  for (const block of blocks) {
    let at = 0;
    for (let i = 0; i < block.count; i++) {
      let record: { value: unknown; offset: number };
      try {
        record = type.decode(block.data, at);
      } catch (err) {
        throw malformed((err as Error).message, err);
      }
      if (record.offset < 0) throw malformed(`block holds fewer than its ${block.count} records`);
      yield record.value;
      at = record.offset;
    }
    if (at !== block.data.length) throw malformed(`block has ${block.data.length - at} bytes after its ${block.count} records`);
  }
}

// Iceberg's Avro schema idioms (spec Appendix A), shared by manifests and manifest lists.

/** A required record field carrying its Iceberg field id. */
export function requiredField(name: string, fieldId: number, type: AvroSchema): AvroSchema {
  return { name, type, 'field-id': fieldId };
}

/** An optional record field: a union with null, default null. */
export function optionalField(name: string, fieldId: number, type: AvroSchema): AvroSchema {
  return { name, type: ['null', type], default: null, 'field-id': fieldId };
}

/** A list of required elements. */
export function listOf(elementId: number, items: AvroSchema): AvroSchema {
  return { type: 'array', items, 'element-id': elementId };
}

/** A map with non-string keys: an array of {key, value} records with logical type `map`. */
export function mapOf(keyId: number, key: AvroSchema, valueId: number, value: AvroSchema): AvroSchema {
  return {
    type: 'array',
    logicalType: 'map',
    items: {
      type: 'record',
      name: `k${keyId}_v${valueId}`,
      fields: [requiredField('key', keyId, key), requiredField('value', valueId, value)],
    },
  };
}

/** avsc takes and gives Buffers for `bytes` and `fixed`; this views a Uint8Array as one without copying. */
export function toAvroBytes(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A decoded `bytes` or `fixed` value as a plain Uint8Array, copied out so it does not pin its whole block. */
export function fromAvroBytes(bytes: Buffer): Uint8Array {
  return new Uint8Array(bytes);
}
