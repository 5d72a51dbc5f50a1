import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { murmur3x86_32, murmur3x86_32Long } from './murmur3.js';

const latin1 = (s: string): Uint8Array => Uint8Array.from(Buffer.from(s, 'latin1'));

/** Long in 8 little-endian bytes, the byte array murmur3x86_32Long stands for. */
function longBytes(v: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, v, true);
  return out;
}

describe('murmur3x86_32', () => {
  it('matches the reference implementation (MurmurHash3_x86_32) on published vectors', () => {
    // [input, seed, unsigned hash]: every tail length, seeds 0, 1, 2^32-1 and 0x9747b28c.
    const vectors: [string, number, number][] = [
      ['', 0, 0],
      ['', 1, 0x514e28b7],
      ['', 0xffffffff, 0x81f16f39],
      ['\0', 0, 0x514e28b7],
      ['\0\0', 0, 0x30f4c306],
      ['\0\0\0', 0, 0x85f0b427],
      ['\0\0\0\0', 0, 0x2362f9de],
      ['\x21', 0, 0x72661cf4],
      ['\x21\x43', 0, 0xa0f7b07a],
      ['\x21\x43\x65', 0, 0x7e4a8634],
      ['\x21\x43\x65\x87', 0, 0xf55b516b],
      ['\xff\xff\xff\xff', 0, 0x76293b50],
      ['a', 0x9747b28c, 0x7fa09ea6],
      ['ab', 0x9747b28c, 0x74875592],
      ['abc', 0x9747b28c, 0xc84a62dd],
      ['abcd', 0x9747b28c, 0xf0478627],
      ['aaaa', 0x9747b28c, 0x5a97808a],
      ['Hello, world!', 0x9747b28c, 0x24884cba],
      ['The quick brown fox jumps over the lazy dog', 0x9747b28c, 0x2fa826cd],
    ];
    for (const [input, seed, hash] of vectors) {
      const h = murmur3x86_32(latin1(input), seed);
      assert.equal(h, hash | 0, JSON.stringify(input));
      assert.ok(h >= -0x80000000 && h <= 0x7fffffff, 'a signed int32');
    }
  });

  it('reads tail bytes >= 0x80 zero-extended (Iceberg\'s decimal 14.20 = 05 8C hashes to -500754589)', () => {
    assert.equal(murmur3x86_32(Uint8Array.of(0x05, 0x8c), 0), -500754589);
  });

  it('hashes a view like a copy of its bytes', () => {
    const bytes = latin1('xxThe quick brown fox');
    assert.equal(murmur3x86_32(bytes.subarray(2), 5), murmur3x86_32(bytes.slice(2), 5));
  });
});

describe('murmur3x86_32Long', () => {
  it('hashes a long as its 8 little-endian bytes, from a bigint or a safe-integer number', () => {
    for (const v of [0n, 34n, -1n, 2n ** 40n + 5n, -(2n ** 40n) - 5n, 2n ** 53n - 1n, -(2n ** 53n) + 1n, 2n ** 63n - 1n, -(2n ** 63n)]) {
      const expected = murmur3x86_32(longBytes(v), 7);
      assert.equal(murmur3x86_32Long(v, 7), expected, `${v}n`);
      if (Number.isSafeInteger(Number(v)) && BigInt(Number(v)) === v) assert.equal(murmur3x86_32Long(Number(v), 7), expected, `${v}`);
    }
    assert.equal(murmur3x86_32Long(34, 0), 2017239379); // Iceberg's hash of 34
  });

  it('takes a bigint modulo 2^64', () => {
    assert.equal(murmur3x86_32Long(2n ** 64n - 1n, 0), murmur3x86_32Long(-1n, 0));
  });
});
