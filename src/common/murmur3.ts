/**
 * MurmurHash3, x86 32-bit variant: the building blocks and the standard hash. All arithmetic is on
 * 32-bit ints, wrapping; results are signed int32 as Java (Guava's murmur3_32_fixed) returns them.
 *
 *   mixK1(k)    = rotl(k * 0xcc9e2d51, 15) * 0x1b873593
 *   mixH1(h, k) = rotl(h ^ k, 13) * 5 + 0xe6546b64
 *   fmix(h)     = h ^= h >>> 16; h *= 0x85ebca6b; h ^= h >>> 13; h *= 0xc2b2ae35; h ^= h >>> 16
 *
 *   h = seed
 *   for each whole 4-byte little-endian word w:  h = mixH1(h, mixK1(w))
 *   the 1–3 tail bytes, zero-extended, as one little-endian word t:  h ^= mixK1(t)
 *   hash = fmix(h ^ byteLength)
 *
 * A long is hashed as its 8 little-endian bytes (Guava's hashLong).
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;
const TWO_POW_32 = 2 ** 32;

export function mixK1(k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, C2);
}

export function mixH1(h: number, k: number): number {
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

export function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

/** The standard MurmurHash3 x86 32-bit hash of `bytes`. */
export function murmur3x86_32(bytes: Uint8Array, seed: number): number {
  const len = bytes.length;
  const aligned = len - (len & 3);
  let h = seed | 0;
  for (let i = 0; i < aligned; i += 4) {
    h = mixH1(h, mixK1(bytes[i] | (bytes[i + 1] << 8) | (bytes[i + 2] << 16) | (bytes[i + 3] << 24)));
  }
  const rest = len & 3;
  if (rest !== 0) {
    let tail = bytes[aligned];
    if (rest > 1) tail |= bytes[aligned + 1] << 8;
    if (rest > 2) tail |= bytes[aligned + 2] << 16;
    h ^= mixK1(tail);
  }
  return fmix(h ^ len);
}

/** Splits a bigint into 32-bit halves without BigInt arithmetic. */
const longScratch = new DataView(new ArrayBuffer(8));

/**
 * The MurmurHash3 x86 32-bit hash of a long's 8 little-endian bytes, with no byte array: a bigint
 * is taken modulo 2^64, a number must be a safe integer.
 */
export function murmur3x86_32Long(value: number | bigint, seed: number): number {
  let lo: number;
  let hi: number;
  if (typeof value === 'number') {
    lo = value | 0;
    hi = Math.floor(value / TWO_POW_32) | 0;
  } else {
    longScratch.setBigInt64(0, value, true); // wraps modulo 2^64
    lo = longScratch.getInt32(0, true);
    hi = longScratch.getInt32(4, true);
  }
  return fmix(mixH1(mixH1(seed | 0, mixK1(lo)), mixK1(hi)) ^ 8);
}
