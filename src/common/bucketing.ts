/**
 * Bucketing: which bucket of a table (or of one of its partitions) a row with a bucket key goes to.
 * Rows of tables without a bucket key are spread by the client writer (sticky assignment), not here.
 * BucketAssigner is the one place that chooses, from the table, how keys are hashed:
 *
 * - Iceberg's `bucket[N]` transform, when the table is aligned with an Iceberg lake
 *   (`table.datalake.format` = iceberg) and its bucket key is one column of a type Iceberg can
 *   bucket: Tributary bucket b is then exactly the lake partition `bucket(key, N)` = b.
 * - Fluss's function otherwise, over the compacted encoding of the bucket key columns
 *   (key-encoder.ts).
 *
 * The choice rests on `table.datalake.format`, set when the table is created and never altered,
 * and not on `table.datalake.enabled`, which ALTER TABLE may switch on later: changing the function
 * of a table holding data would move existing keys to other buckets.
 *
 * Fluss's function, bit for bit (mixK1, mixH1, fmix of murmur3.ts; 32-bit ints, wrapping):
 *
 *   h = 42
 *   for each whole 4-byte little-endian word w of the key:  h = mixH1(h, mixK1(w))
 *   for each remaining byte b, one at a time:               h = mixH1(h, mixK1(signExtend(b)))
 *   h = fmix(h ^ keyLength)
 *   h = fmix(mixH1(0, mixK1(h)) ^ 4)          (the second, integer mix)
 *   h = h < 0 ? (h == -2^31 ? 0 : -h) : h
 *   bucket = h % numBuckets
 *
 * The tail bytes are mixed as whole words after Java's sign extension (byte 0x80 becomes the int
 * 0xffffff80), unlike standard MurmurHash3 and unlike zero-extending ports: keys whose length is
 * not a multiple of 4 and whose tail holds a byte >= 0x80 would otherwise land in other buckets.
 *
 * Iceberg's bucket transform (spec: "Bucket Transform Details", "Appendix B"):
 *
 *   bucket = (murmur3_x86_32(hash input, seed 0) & Integer.MAX_VALUE) % numBuckets
 *
 *   hash input of the key value, by Tributary type (Iceberg type):
 *     TINYINT, SMALLINT, INT (int), BIGINT (long), DATE (date, days), TIME (time, µs of day),
 *     TIMESTAMP (timestamp, µs), TIMESTAMP_LTZ (timestamptz, µs)
 *                                 = the value as a long, 8 bytes little-endian
 *     DECIMAL(p, s) (decimal)     = the unscaled value as two's-complement big-endian in the fewest
 *                                   bytes (Java's BigInteger.toByteArray); the scale plays no part
 *     CHAR, STRING (string)       = UTF-8 bytes
 *     BINARY (fixed), BYTES (binary) = the bytes
 *
 * BOOLEAN, FLOAT and DOUBLE cannot be bucketed by Iceberg, so such keys keep Fluss's function.
 */
import { TributaryError } from './errors.js';
import { CompactedKeyEncoder } from './key-encoder.js';
import { fmix, mixH1, mixK1, murmur3x86_32, murmur3x86_32Long } from './murmur3.js';
import type { Column, Schema } from './schema.js';
import { type TypeKind, formatDataType } from './types.js';

const FLUSS_SEED = 42;
const INTEGER_MAX_VALUE = 0x7fffffff;

function checkBucketCount(numBuckets: number): void {
  if (!Number.isInteger(numBuckets) || numBuckets < 1) {
    throw new TributaryError('INVALID_ARGUMENT', `bucket count must be a positive integer, got ${numBuckets}`);
  }
}

/** Fluss's default bucketing function (the Murmur3 variant described above). */
export class FlussBucketingFunction {
  /** The bucket, in [0, numBuckets), of a row whose compacted bucket key is `keyBytes`. */
  bucket(keyBytes: Uint8Array, numBuckets: number): number {
    checkBucketCount(numBuckets);
    const len = keyBytes.length;
    const aligned = len - (len & 3);
    let h = FLUSS_SEED;
    for (let i = 0; i < aligned; i += 4) {
      const word = keyBytes[i] | (keyBytes[i + 1] << 8) | (keyBytes[i + 2] << 16) | (keyBytes[i + 3] << 24);
      h = mixH1(h, mixK1(word));
    }
    for (let i = aligned; i < len; i++) {
      h = mixH1(h, mixK1((keyBytes[i] << 24) >> 24));
    }
    h = fmix(h ^ len);
    h = fmix(mixH1(0, mixK1(h)) ^ 4);
    // -(-2^31) overflows back to itself in Java; Fluss maps it to 0.
    const nonNegative = h >= 0 ? h : h === -0x80000000 ? 0 : -h;
    return nonNegative % numBuckets;
  }
}

const FLUSS_BUCKETING = new FlussBucketingFunction();

/** Hash input of strings and decimals, grown on demand. */
let scratch = Buffer.alloc(64);

function ensureScratch(n: number): Buffer {
  if (scratch.length < n) scratch = Buffer.alloc(Math.max(n, scratch.length * 2));
  return scratch;
}

/** Bytes in the minimal two's-complement big-endian form of `value`. */
function minBigEndianLength(value: bigint): number {
  if (value >= -0x80000000n && value <= 0x7fffffffn) {
    const n = Number(value);
    return n >= -0x80 && n < 0x80 ? 1 : n >= -0x8000 && n < 0x8000 ? 2 : n >= -0x800000 && n < 0x800000 ? 3 : 4;
  }
  const magnitude = value < 0n ? ~value : value; // the bits beside the sign bit
  return (magnitude.toString(2).length >> 3) + 1;
}

/** Writes `value` as its `len` (minBigEndianLength) bytes at the start of `out`. */
function writeMinBigEndian(value: bigint, len: number, out: Uint8Array): void {
  if (len <= 4) {
    // Fits an int32: no BigInt arithmetic.
    let n = Number(value);
    for (let i = len - 1; i >= 0; i--, n >>= 8) out[i] = n & 0xff;
    return;
  }
  let u = BigInt.asUintN(len * 8, value);
  for (let i = len - 1; i >= 0; i--, u >>= 8n) out[i] = Number(u & 0xffn);
}

/**
 * The unscaled value of a decimal as two's-complement big-endian bytes, as few as hold it (the
 * spec's minBigEndian, Java's BigInteger.toByteArray): Iceberg's hash input and bound encoding.
 */
export function minBigEndianBytes(value: bigint): Uint8Array {
  const out = new Uint8Array(minBigEndianLength(value));
  writeMinBigEndian(value, out.length, out);
  return out;
}

/**
 * Iceberg's 32-bit hash (spec Appendix B) of a value in its transform source form: number or
 * bigint for int, long, date, time and timestamps (all hashed as longs); bigint unscaled value for
 * a decimal (`decimal` true); string; Uint8Array for binary, fixed and uuid (16 bytes).
 */
export function icebergHash(value: number | bigint | string | Uint8Array, decimal = false): number {
  if (typeof value === 'string') {
    const buf = ensureScratch(value.length * 3);
    return murmur3x86_32(buf.subarray(0, buf.write(value, 0, 'utf8')), 0);
  }
  if (value instanceof Uint8Array) return murmur3x86_32(value, 0);
  if (decimal) {
    if (typeof value !== 'bigint') throw new TributaryError('INVALID_ARGUMENT', `a decimal is hashed from its unscaled bigint, got ${value}`);
    const len = minBigEndianLength(value);
    const buf = ensureScratch(len);
    writeMinBigEndian(value, len, buf);
    return murmur3x86_32(buf.subarray(0, len), 0);
  }
  return murmur3x86_32Long(value, 0);
}

/** Iceberg's `bucket[N]` of a value (forms as for icebergHash): (hash & Integer.MAX_VALUE) % N. */
export function icebergBucket(value: number | bigint | string | Uint8Array, numBuckets: number, decimal = false): number {
  checkBucketCount(numBuckets);
  return (icebergHash(value, decimal) & INTEGER_MAX_VALUE) % numBuckets;
}

/** Tributary types whose values Iceberg's bucket transform takes (the internal form is its source form). */
const ICEBERG_BUCKETABLE = new Set<TypeKind>(['TINYINT', 'SMALLINT', 'INT', 'BIGINT', 'DECIMAL', 'CHAR', 'STRING', 'BINARY', 'BYTES', 'DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_LTZ']);

/** What BucketAssigner needs of a table; TableInfo fits. */
export interface BucketedTable {
  schema: Schema;
  bucketKeys: readonly string[];
  bucketCount: number;
  properties: Readonly<Record<string, string>>;
}

/**
 * The bucket key column whose Iceberg `bucket[N]` transform buckets the table's rows, or undefined
 * when Fluss's function does. The lake side partitions by `bucket(column, N)` exactly when this
 * gives a column, and by `identity(__bucket)` otherwise.
 */
export function icebergBucketColumn(table: BucketedTable): Column | undefined {
  if (table.properties['table.datalake.format'] !== 'iceberg' || table.bucketKeys.length !== 1) return undefined;
  const column = table.schema.columns.find((c) => c.name === table.bucketKeys[0]);
  return column && ICEBERG_BUCKETABLE.has(column.type.kind) ? column : undefined;
}

/** Computes the bucket of rows of one table with the table's bucketing, chosen once. */
export class BucketAssigner {
  private readonly bucketCount: number;
  /** Fluss's function: the encoder of the bucket key columns. */
  private readonly encoder?: CompactedKeyEncoder;
  /** Iceberg's transform: the key column, where its value sits in a row and whether it is a decimal. */
  private readonly icebergColumn?: Column;
  private readonly icebergPosition: number = -1;
  private readonly icebergDecimal: boolean = false;

  constructor(table: BucketedTable) {
    if (table.bucketKeys.length === 0) {
      throw new TributaryError('INVALID_BUCKET_KEY', 'the table has no bucket key; its rows are assigned to buckets by the writer');
    }
    checkBucketCount(table.bucketCount);
    this.bucketCount = table.bucketCount;
    const column = icebergBucketColumn(table);
    if (column) {
      this.icebergColumn = column;
      this.icebergPosition = table.schema.columns.indexOf(column);
      this.icebergDecimal = column.type.kind === 'DECIMAL';
    } else {
      this.encoder = CompactedKeyEncoder.forColumns(table.schema, table.bucketKeys);
    }
  }

  /** The bucket of a row of internal values in schema column order. */
  bucketOf(row: readonly unknown[]): number {
    if (this.encoder) return FLUSS_BUCKETING.bucket(this.encoder.encodeView(row), this.bucketCount);
    const value = row[this.icebergPosition];
    if (value === null || value === undefined) {
      const c = this.icebergColumn!;
      throw new TributaryError('INVALID_ROW', `key column '${c.name}' (${formatDataType(c.type)}) must not be null`);
    }
    return (icebergHash(value as number | bigint | string | Uint8Array, this.icebergDecimal) & INTEGER_MAX_VALUE) % this.bucketCount;
  }
}
