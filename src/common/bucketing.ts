/**
 * Bucketing: which bucket of a table (or of one of its partitions) a row with a bucket key goes to.
 * The bucket key columns are encoded by the compacted key encoder (key-encoder.ts) and a bucketing
 * function maps those bytes to a bucket. Rows of tables without a bucket key are spread by the
 * client writer (sticky assignment), not here.
 *
 * Fluss's default function, bit for bit (all arithmetic on 32-bit ints, wrapping):
 *
 *   mixK1(k)    = rotl(k * 0xcc9e2d51, 15) * 0x1b873593
 *   mixH1(h, k) = rotl(h ^ k, 13) * 5 + 0xe6546b64
 *   fmix(h)     = h ^= h >>> 16; h *= 0x85ebca6b; h ^= h >>> 13; h *= 0xc2b2ae35; h ^= h >>> 16
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
 */
import { TributaryError } from './errors.js';
import { CompactedKeyEncoder } from './key-encoder.js';
import type { Schema } from './schema.js';

export interface BucketingFunction {
  /** The bucket, in [0, numBuckets), of a row whose encoded bucket key is `keyBytes`. */
  bucket(keyBytes: Uint8Array, numBuckets: number): number;
}

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;
const SEED = 42;

function mixK1(k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, C2);
}

function mixH1(h: number, k: number): number {
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** Fluss's default bucketing function (the Murmur3 variant described above). */
export class FlussBucketingFunction implements BucketingFunction {
  bucket(keyBytes: Uint8Array, numBuckets: number): number {
    if (!Number.isInteger(numBuckets) || numBuckets < 1) {
      throw new TributaryError('INVALID_ARGUMENT', `bucket count must be a positive integer, got ${numBuckets}`);
    }
    const len = keyBytes.length;
    const aligned = len - (len & 3);
    let h = SEED;
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

/**
 * The bucketing function of a table, from its properties. This is the one place that chooses it:
 * lake-enabled tables (`table.datalake.enabled`) will get the Iceberg `bucket[N]` transform (with
 * the lake's own key encoding) here, so that Tributary bucket b is lake bucket b.
 */
export function bucketingFunctionFor(_properties: Readonly<Record<string, string>>): BucketingFunction {
  return FLUSS_BUCKETING;
}

/** What BucketAssigner needs of a table; TableInfo fits. */
export interface BucketedTable {
  schema: Schema;
  bucketKeys: readonly string[];
  bucketCount: number;
  properties: Readonly<Record<string, string>>;
}

/** Computes the bucket of rows of one table: key encoder and bucketing function, built once. */
export class BucketAssigner {
  private readonly encoder: CompactedKeyEncoder;
  private readonly fn: BucketingFunction;
  private readonly bucketCount: number;

  constructor(table: BucketedTable) {
    if (table.bucketKeys.length === 0) {
      throw new TributaryError('INVALID_BUCKET_KEY', 'the table has no bucket key; its rows are assigned to buckets by the writer');
    }
    if (!Number.isInteger(table.bucketCount) || table.bucketCount < 1) {
      throw new TributaryError('INVALID_ARGUMENT', `bucket count must be a positive integer, got ${table.bucketCount}`);
    }
    this.encoder = CompactedKeyEncoder.forColumns(table.schema, table.bucketKeys);
    this.fn = bucketingFunctionFor(table.properties);
    this.bucketCount = table.bucketCount;
  }

  /** The bucket of a row of internal values in schema column order. */
  bucketOf(row: readonly unknown[]): number {
    return this.fn.bucket(this.encoder.encodeView(row), this.bucketCount);
  }
}
