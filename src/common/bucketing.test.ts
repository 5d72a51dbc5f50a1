import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BucketAssigner, FlussBucketingFunction, icebergBucket, icebergBucketColumn, icebergHash, minBigEndianBytes } from './bucketing.js';
import { TributaryError } from './errors.js';
import { buildSchema } from './schema.js';

const fluss = new FlussBucketingFunction();
const bytes = (...b: number[]): Uint8Array => Uint8Array.from(b);
const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);
/** With this bucket count the bucket is the whole non-negative hash, which pins every bit of it. */
const WHOLE_HASH = 0x7fffffff;

/**
 * The same hash with tail bytes zero-extended (how standard Murmur3 and some ports read them).
 * It exists only to prove the vectors below tell the two readings apart.
 */
function zeroExtendedBucket(key: Uint8Array, n: number): number {
  const mixK1 = (k: number): number => {
    k = Math.imul(k, 0xcc9e2d51);
    return Math.imul((k << 15) | (k >>> 17), 0x1b873593);
  };
  const mixH1 = (h: number, k: number): number => {
    h ^= k;
    return (Math.imul((h << 13) | (h >>> 19), 5) + 0xe6546b64) | 0;
  };
  const fmix = (h: number): number => {
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    return h ^ (h >>> 16);
  };
  const aligned = key.length & ~3;
  let h = 42;
  for (let i = 0; i < aligned; i += 4) h = mixH1(h, mixK1(key[i] | (key[i + 1] << 8) | (key[i + 2] << 16) | (key[i + 3] << 24)));
  for (let i = aligned; i < key.length; i++) h = mixH1(h, mixK1(key[i]));
  h = fmix(mixH1(0, mixK1(fmix(h ^ key.length))) ^ 4);
  return (h === -0x80000000 ? 0 : Math.abs(h)) % n;
}

describe('FlussBucketingFunction', () => {
  it('matches the published Fluss reference vectors', () => {
    assert.equal(fluss.bucket(bytes(0x00, 0x0a), 7), 1);
    assert.equal(fluss.bucket(bytes(0x00, 0x0a, 0x0a, 0x0a), 12), 0);
    assert.equal(fluss.bucket(utf8('2bb87d68-baf9-4e64-90f9-f80910419fa6'), 16), 6);
    assert.equal(fluss.bucket(utf8('The quick brown fox jumps over the lazy dog'), 8), 6);
  });

  /*
   * Tail bytes >= 0x80. Java reads each tail byte as a signed byte and widens it to int, so 0x80
   * is mixed as the word 0xffffff80, not 0x00000080. Traced step by step (h starts at the seed 42,
   * there are no whole words in these keys):
   *
   *   00 0A 80:  w=0x00000000 k1=0x00000000 h=0xe66eab64
   *              w=0x0000000a k1=0x65c187a2 h=0x62507dad
   *              w=0xffffff80 k1=0x52eece9c h=0x165329d7
   *              fmix(h ^ 3) = 0x593e3817, second mix = 1829601948
   *              (zero-extended: fmix = 0xaea87fc3, second mix = 1141071598)
   *   FF:        w=0xffffffff k1=0xbbeeb010 h=0x147920d5
   *              fmix(h ^ 1) = 0x535b391c, second mix = 2092240473
   *              (zero-extended: fmix = 0x2fc81fbe, second mix = 147224983)
   *   C3 A9 (the UTF-8 of "é"):
   *              w=0xffffffc3 k1=0x707a7665 h=0x704611af
   *              w=0xffffffa9 k1=0x1575ddcd h=0x4611eaa2
   *              fmix(h ^ 2) = 0x7e4f00f6, second mix = 2136011190
   *              (zero-extended: fmix = 0x7bca128a, second mix = 328522597)
   */
  it('mixes tail bytes >= 0x80 sign-extended, as Java does', () => {
    assert.equal(fluss.bucket(bytes(0x00, 0x0a, 0x80), WHOLE_HASH), 1829601948);
    assert.equal(fluss.bucket(bytes(0xff), WHOLE_HASH), 2092240473);
    assert.equal(fluss.bucket(bytes(0xc3, 0xa9), WHOLE_HASH), 2136011190);

    assert.equal(fluss.bucket(bytes(0x00, 0x0a, 0x80), 7), 6); // 1829601948 % 7
    assert.equal(fluss.bucket(bytes(0xff), 8), 1); // 2092240473 % 8
    assert.equal(fluss.bucket(bytes(0xc3, 0xa9), 10), 0); // 2136011190 % 10
    // The key of STRING 'é': length 2, then C3 A9.
    assert.equal(fluss.bucket(bytes(0x02, 0xc3, 0xa9), 16), 6);
  });

  it('differs from the zero-extended reading on those keys', () => {
    assert.equal(zeroExtendedBucket(bytes(0x00, 0x0a, 0x80), WHOLE_HASH), 1141071598);
    assert.equal(zeroExtendedBucket(bytes(0x00, 0x0a, 0x80), 7), 2);
    assert.equal(zeroExtendedBucket(bytes(0xff), 8), 7);
    assert.equal(zeroExtendedBucket(bytes(0xc3, 0xa9), 10), 7);
    assert.equal(zeroExtendedBucket(bytes(0x02, 0xc3, 0xa9), 16), 10);
    // Both readings agree when no tail byte has its high bit set.
    assert.equal(zeroExtendedBucket(bytes(0x00, 0x0a), 7), fluss.bucket(bytes(0x00, 0x0a), 7));
  });

  it('maps a second-mix result of -2^31 to 0, as Fluss does', () => {
    // Found by inverting both mixes: this word's second mix is exactly Integer.MIN_VALUE, whose
    // Java negation overflows; Fluss returns 0 where a plain abs would give 2^31 % n.
    const key = bytes(0x29, 0xff, 0xf0, 0x2c);
    for (const n of [3, 7, 10, WHOLE_HASH]) assert.equal(fluss.bucket(key, n), 0);
  });

  it('hashes the empty key and keys spanning several words', () => {
    const long = utf8('abcdefghijklmnopqrstuvwxyz0123456789');
    for (const key of [new Uint8Array(0), long, long.subarray(1), long.subarray(2), long.subarray(3)]) {
      const b = fluss.bucket(key, 5);
      assert.ok(Number.isInteger(b) && b >= 0 && b < 5);
    }
    // A view must hash like a copy of the same bytes.
    assert.equal(fluss.bucket(long.subarray(3), WHOLE_HASH), fluss.bucket(long.slice(3), WHOLE_HASH));
  });

  it('rejects a bucket count below 1', () => {
    for (const n of [0, -1, 1.5]) {
      assert.throws(() => fluss.bucket(bytes(1), n), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
    }
  });
});

describe('Iceberg bucket hash', () => {
  it('hashes every value form as the spec\'s Appendix B test values', () => {
    assert.equal(icebergHash(34), 2017239379); // int
    assert.equal(icebergHash(34n), 2017239379); // long
    assert.equal(icebergHash(1420n, true), -500754589); // decimal 14.20
    assert.equal(icebergHash(17486), -653330422); // date 2017-11-16
    assert.equal(icebergHash(81_068_000_000n), -662762989); // time 22:31:08
    assert.equal(icebergHash(1510871468000000n), -2047944441); // timestamp 2017-11-16T22:31:08
    assert.equal(icebergHash(1510871468000001n), -1207196810); // ... .000001
    assert.equal(icebergHash('iceberg'), 1210000089);
    assert.equal(icebergHash(bytes(0xf7, 0x9c, 0x3e, 0x09, 0x67, 0x7c, 0x4b, 0xbd, 0xa4, 0x79, 0x3f, 0x34, 0x9c, 0xb7, 0x85, 0xe7)), 1488055340); // uuid
    assert.equal(icebergHash(bytes(0, 1, 2, 3)), -188683207); // fixed, binary
  });

  it('hashes strings as UTF-8 and decimals by their unscaled value alone', () => {
    assert.equal(icebergHash('é'), icebergHash(bytes(0xc3, 0xa9)));
    assert.equal(icebergHash('😀'.repeat(40)), icebergHash(utf8('😀'.repeat(40))));
    assert.equal(icebergHash(-129n, true), icebergHash(bytes(0xff, 0x7f)));
    assert.equal(icebergHash(10n ** 37n, true), icebergHash(minBigEndianBytes(10n ** 37n)));
    assert.notEqual(icebergHash(1420n, true), icebergHash(1420n));
  });

  it('buckets as (hash & Integer.MAX_VALUE) % N', () => {
    assert.equal(icebergBucket(17486, 16), (-653330422 & WHOLE_HASH) % 16);
    assert.equal(icebergBucket(1420n, WHOLE_HASH, true), -500754589 & WHOLE_HASH);
    assert.throws(() => icebergBucket(1, 0), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });

  it('writes decimals in the fewest two\'s-complement big-endian bytes', () => {
    const cases: [bigint, number[]][] = [
      [0n, [0x00]],
      [127n, [0x7f]],
      [128n, [0x00, 0x80]],
      [-128n, [0x80]],
      [-129n, [0xff, 0x7f]],
      [1420n, [0x05, 0x8c]],
      [2n ** 31n - 1n, [0x7f, 0xff, 0xff, 0xff]],
      [2n ** 31n, [0x00, 0x80, 0x00, 0x00, 0x00]],
      [-(2n ** 31n) - 1n, [0xff, 0x7f, 0xff, 0xff, 0xff]],
      [-(2n ** 63n), [0x80, 0, 0, 0, 0, 0, 0, 0]],
    ];
    for (const [v, b] of cases) assert.deepEqual(minBigEndianBytes(v), Uint8Array.from(b), `${v}`);
  });
});

describe('BucketAssigner', () => {
  const schema = buildSchema([
    { name: 'id', type: 'INT' },
    { name: 'name', type: 'STRING' },
    { name: 'amount', type: 'DOUBLE' },
  ]);

  it('encodes the bucket key columns of a row and hashes them', () => {
    // Key of (id=1, name='a2') = 01 02 61 32; Fluss gives bucket 7 of 10.
    const two = new BucketAssigner({ schema, bucketKeys: ['id', 'name'], bucketCount: 10, properties: {} });
    assert.equal(two.bucketOf([1, 'a2', 3.5]), 7);
    // Key of name='é' = 02 C3 A9 (see the sign-extension vectors above).
    const byName = new BucketAssigner({ schema, bucketKeys: ['name'], bucketCount: 16, properties: {} });
    assert.equal(byName.bucketOf([99, 'é', 0]), 6);
    // Key of id=10 = 0A.
    const byId = new BucketAssigner({ schema, bucketKeys: ['id'], bucketCount: 8, properties: {} });
    assert.equal(byId.bucketOf([10, 'x', 0]), 2);
    assert.equal(byId.bucketOf([10, 'other', 1]), 2);
  });

  it('rejects a null bucket key value', () => {
    const a = new BucketAssigner({ schema, bucketKeys: ['name'], bucketCount: 4, properties: {} });
    assert.throws(() => a.bucketOf([1, null, 0]), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ROW' && /'name'/.test(e.message));
  });

  it('refuses tables without a bucket key and bad bucket counts', () => {
    assert.throws(() => new BucketAssigner({ schema, bucketKeys: [], bucketCount: 4, properties: {} }), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_BUCKET_KEY');
    assert.throws(() => new BucketAssigner({ schema, bucketKeys: ['id'], bucketCount: 0, properties: {} }), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ARGUMENT');
  });

  describe('for tables aligned with an Iceberg lake', () => {
    const lake = { 'table.datalake.enabled': 'true', 'table.datalake.format': 'iceberg' };
    const typed = buildSchema([
      { name: 'i', type: 'INT' },
      { name: 'tiny', type: 'TINYINT' },
      { name: 'small', type: 'SMALLINT' },
      { name: 'big', type: 'BIGINT' },
      { name: 's', type: 'STRING' },
      { name: 'c', type: 'CHAR(10)' },
      { name: 'd', type: 'DATE' },
      { name: 'amount', type: 'DECIMAL(4, 2)' },
      { name: 'wide', type: 'DECIMAL(38, 2)' },
      { name: 't', type: 'TIME(6)' },
      { name: 'ts', type: 'TIMESTAMP(6)' },
      { name: 'ltz', type: 'TIMESTAMP_LTZ(6)' },
      { name: 'raw', type: 'BYTES' },
      { name: 'fixed', type: 'BINARY(4)' },
      { name: 'x', type: 'DOUBLE' },
      { name: 'flag', type: 'BOOLEAN' },
    ]);
    const row = (column: string, value: unknown): unknown[] => typed.columns.map((c) => (c.name === column ? value : null));
    const assigner = (key: string, bucketCount: number, properties: Record<string, string> = lake) => new BucketAssigner({ schema: typed, bucketKeys: [key], bucketCount, properties });

    /** [key column, internal value, Iceberg hash from the spec's Appendix B]. */
    const SPEC: [string, unknown, number][] = [
      ['i', 34, 2017239379],
      ['tiny', 34, 2017239379],
      ['small', 34, 2017239379],
      ['big', 34n, 2017239379],
      ['s', 'iceberg', 1210000089],
      ['c', 'iceberg', 1210000089],
      ['d', 17486, -653330422],
      ['amount', 1420n, -500754589],
      ['wide', 1420n, -500754589],
      ['t', 81_068_000_000, -662762989],
      ['ts', 1510871468000001n, -1207196810],
      ['ltz', 1510871468000000n, -2047944441],
      ['raw', bytes(0, 1, 2, 3), -188683207],
      ['fixed', bytes(0, 1, 2, 3), -188683207],
    ];

    it('puts value v in bucket[N](v), the lake partition of v', () => {
      for (const n of [1, 3, 16, 100, WHOLE_HASH]) {
        for (const [key, value, hash] of SPEC) {
          assert.equal(assigner(key, n).bucketOf(row(key, value)), (hash & WHOLE_HASH) % n, `${key} bucket[${n}]`);
        }
      }
    });

    it('names the Iceberg-bucketed column for the lake side', () => {
      assert.equal(icebergBucketColumn({ schema: typed, bucketKeys: ['s'], bucketCount: 4, properties: lake })?.name, 's');
      assert.equal(icebergBucketColumn({ schema: typed, bucketKeys: ['s'], bucketCount: 4, properties: {} }), undefined);
      assert.equal(icebergBucketColumn({ schema: typed, bucketKeys: ['i', 's'], bucketCount: 4, properties: lake }), undefined);
      assert.equal(icebergBucketColumn({ schema: typed, bucketKeys: ['x'], bucketCount: 4, properties: lake }), undefined);
    });

    it('keeps Fluss\'s function without the lake format, for several key columns and for keys Iceberg cannot bucket', () => {
      // Only the format fixed at creation counts: switching table.datalake.enabled on later moves nothing.
      const enabledOnly = assigner('i', 8, { 'table.datalake.enabled': 'true' });
      assert.equal(enabledOnly.bucketOf(row('i', 10)), 2); // Fluss: key 0A, bucket 2 of 8 (as above)
      const two = new BucketAssigner({ schema, bucketKeys: ['id', 'name'], bucketCount: 10, properties: lake });
      assert.equal(two.bucketOf([1, 'a2', 3.5]), 7); // the Fluss vector above
      for (const key of ['x', 'flag']) {
        const value = key === 'x' ? 1.5 : true;
        const fluss = assigner(key, 7, {}).bucketOf(row(key, value));
        assert.equal(assigner(key, 7).bucketOf(row(key, value)), fluss, key);
      }
      // And the Iceberg path really differs from Fluss's on the same key.
      assert.notEqual(assigner('i', WHOLE_HASH).bucketOf(row('i', 34)), assigner('i', WHOLE_HASH, {}).bucketOf(row('i', 34)));
    });

    it('rejects a null key value', () => {
      assert.throws(() => assigner('s', 4).bucketOf(row('s', null)), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_ROW' && /'s'/.test(e.message));
    });
  });
});
