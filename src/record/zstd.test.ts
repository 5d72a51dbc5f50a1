import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import zlib from 'node:zlib';
import { before, describe, it } from 'node:test';
import * as wasm from '@bokuweb/zstd-wasm';
import { compressZstd, decompressZstd, initZstd } from './zstd.js';

/** node:zlib's zstd where this Node has it (the Node 20 typings do not declare it). */
const nodeZstd = (zlib as unknown as { zstdCompressSync?: unknown }).zstdCompressSync
  ? (zlib as unknown as {
      zstdCompressSync(raw: Uint8Array, options?: { params: Record<number, number> }): Buffer;
      zstdDecompressSync(frame: Uint8Array): Buffer;
      constants: { ZSTD_c_compressionLevel: number };
    })
  : null;

/** Text with repetition, as string and offset buffers have it. */
function text(length: number): Buffer {
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot'];
  let seed = 7;
  const parts: string[] = [];
  for (let n = 0; n < length; ) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const w = `${words[seed % 6]}-${seed % 997} `;
    parts.push(w);
    n += w.length;
  }
  return Buffer.from(parts.join('')).subarray(0, length);
}

/** Little-endian int64s counting up, as a timestamp column has them. */
function counters(length: number): Buffer {
  const b = Buffer.alloc(length);
  for (let at = 0; at + 8 <= length; at += 8) b.writeBigInt64LE(1_700_000_000_000n + BigInt(at), at);
  return b;
}

/**
 * The same frame with a header that declares no content size, as streaming writers leave it
 * (librdkafka, the zstd CLI reading a pipe): no single-segment flag, so a window byte, at least
 * as large as the content, which the frame's blocks may all refer back to.
 */
function withoutContentSize(frame: Uint8Array, contentLength: number): Buffer {
  const descriptor = frame[4];
  assert.equal(descriptor & 0x03, 0, 'no dictionary id');
  const singleSegment = (descriptor & 0x20) !== 0;
  const sizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][descriptor >> 6];
  const windowByte = singleSegment ? (Math.max(10, Math.ceil(Math.log2(Math.max(1, contentLength)))) - 10) << 3 : frame[5];
  const blocks = frame.subarray(5 + (singleSegment ? 0 : 1) + sizeBytes);
  return Buffer.concat([frame.subarray(0, 4), Buffer.of(descriptor & 0x07, windowByte), blocks]);
}

/** 1,000,000 bytes of "tributary streams\n" as `zstd -3 -c` (v1.5.4) wrote them from a pipe: no content size, a checksum. */
const CLI_FRAME = Buffer.from(
  '28b52ffd0458d40000907472696275746172792073747265616d730a0100d6ff2b9f614c000008610100fcff3910024c000008730100fcff3910024c' +
    '000008610100fcff3910024c000008690100fcff3910024c000008730100fcff3910024c000008720100fcff3910024d0000087901003c423910022c83bf5e',
  'hex',
);
const CLI_CONTENT = Buffer.from('tributary streams\n'.repeat(55_556)).subarray(0, 1_000_000);

const corrupt = (message: RegExp) => ({ errorName: 'CORRUPT_MESSAGE', message });

before(() => initZstd());

describe('ZSTD codec', () => {
  const inputs: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['1 byte', Buffer.of(42)],
    ['100 B of text', text(100)],
    ['70 KiB of counters', counters(70 * 1024)],
    ['1 MiB of text', text(1 << 20)],
    ['256 KiB random (incompressible)', randomBytes(256 * 1024)],
  ];
  for (const level of [1, 3, 9, 19, 22]) {
    for (const [name, raw] of inputs) {
      if (level >= 19 && raw.length > 100 * 1024) continue;
      it(`level ${level}, ${name}: decompresses to what was compressed`, () => {
        const frame = compressZstd(raw, level);
        assert.deepEqual(Buffer.from(decompressZstd(frame, raw.length)), raw);
        assert.deepEqual(Buffer.from(decompressZstd(frame, raw.length + 1000)), raw);
      });
    }
  }

  it('compresses more at higher levels', () => {
    const raw = text(200_000);
    const sizes = [1, 3, 19].map((level) => compressZstd(raw, level).length);
    assert.ok(sizes[0] > sizes[1] && sizes[1] > sizes[2], `sizes at levels 1, 3, 19: ${sizes}`);
  });

  it('reads frames without a content size, up to and at the limit', () => {
    assert.deepEqual(Buffer.from(decompressZstd(CLI_FRAME, 1 << 20)), CLI_CONTENT);
    assert.deepEqual(Buffer.from(decompressZstd(CLI_FRAME, CLI_CONTENT.length)), CLI_CONTENT);
    for (const [, raw] of inputs) {
      const frame = withoutContentSize(compressZstd(raw, 3), raw.length);
      assert.deepEqual(Buffer.from(decompressZstd(frame, raw.length)), raw, `${raw.length} bytes`);
      assert.deepEqual(Buffer.from(decompressZstd(frame, 64 << 20)), raw, `${raw.length} bytes, limit far away`);
    }
  });

  it('refuses output past the limit by name, declared or not', () => {
    const raw = text(100_000);
    const frame = compressZstd(raw, 3);
    assert.throws(() => decompressZstd(frame, raw.length - 1), corrupt(/more than 99999 bytes/));
    assert.throws(() => decompressZstd(withoutContentSize(frame, raw.length), raw.length - 1), corrupt(/more than 99999 bytes/));
    assert.throws(() => decompressZstd(CLI_FRAME, CLI_CONTENT.length - 1), corrupt(/more than 999999 bytes/));
    assert.throws(() => decompressZstd(compressZstd(Buffer.of(1), 3), 0), corrupt(/more than 0 bytes/));
    // A bomb: 16 MiB of zeros in a few hundred bytes.
    const bomb = withoutContentSize(compressZstd(Buffer.alloc(16 << 20), 1), 16 << 20);
    assert.ok(bomb.length < 4096, `${bomb.length} bytes`);
    assert.throws(() => decompressZstd(bomb, 1 << 20), corrupt(/more than 1048576 bytes/));
  });

  it('refuses a header declaring more than the limit before allocating for it', () => {
    // One frame declaring 1 TiB (8-byte content size, single segment), then a raw last block of 1 byte.
    const header = Buffer.from('28b52ffde0', 'hex');
    const size = Buffer.alloc(8);
    size.writeBigUInt64LE(1n << 40n);
    const frame = Buffer.concat([header, size, Buffer.from('090000', 'hex'), Buffer.of(7)]);
    assert.throws(() => decompressZstd(frame, 1 << 30), corrupt(/more than 1073741824 bytes/));
  });

  it('refuses corrupt frames by name', () => {
    const raw = text(300_000);
    const frame = Buffer.from(compressZstd(raw, 3));
    assert.throws(() => decompressZstd(Buffer.alloc(0), 100), corrupt(/not a ZSTD frame/));
    assert.throws(() => decompressZstd(randomBytes(100), 100), corrupt(/not a ZSTD frame/));
    assert.throws(() => decompressZstd(frame.subarray(0, 6), raw.length), corrupt(/header cut off/));
    for (const cut of [1, 100, frame.length - 20]) {
      assert.throws(() => decompressZstd(frame.subarray(0, frame.length - cut), raw.length), corrupt(/corrupt ZSTD frame/), `cut by ${cut}`);
    }
    const garbled = Buffer.from(frame);
    garbled.fill(0xff, 9, 40);
    assert.throws(() => decompressZstd(garbled, raw.length), corrupt(/corrupt ZSTD frame/));
    // A content size one short of what the blocks hold.
    const lying = Buffer.from(frame);
    assert.equal(lying[4] >> 6, 2, '4-byte content size');
    lying.writeUInt32LE(raw.length - 1, 5);
    assert.throws(() => decompressZstd(lying, raw.length), corrupt(/corrupt ZSTD frame/));
    assert.throws(() => decompressZstd(withoutContentSize(garbled, raw.length), raw.length), corrupt(/corrupt ZSTD frame/));
  });

  it('asks for initZstd() first, and loads the WebAssembly codec on every Node (it takes the small buffers)', () => {
    // In a process of its own, since this one has loaded its codecs.
    const script = `
      import { createRequire } from 'node:module';
      import { compressZstd, initZstd } from ${JSON.stringify(new URL('./zstd.ts', import.meta.url).href)};
      try { compressZstd(new Uint8Array(10), 3); } catch (err) { console.log(err.errorName, err.message); }
      await initZstd();
      const loaded = Object.keys(createRequire(import.meta.url).cache).some((file) => file.includes('zstd-wasm'));
      console.log(loaded ? 'WebAssembly' : 'none', compressZstd(new Uint8Array(10), 3).length);`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' }).split('\n');
    assert.match(out[0], /^UNKNOWN_SERVER_ERROR .*await initZstd\(\)/);
    assert.match(out[1], /^WebAssembly \d+$/);
  });
});

describe('ZSTD codec, native and WebAssembly', { skip: !nodeZstd && 'node:zlib has no zstd on this Node' }, () => {
  before(() => wasm.init());

  for (const level of [1, 3, 19]) {
    it(`level ${level}: each reads the other's frames`, () => {
      for (const raw of [Buffer.alloc(0), text(100), counters(70 * 1024), text(level < 19 ? 1 << 20 : 100_000), randomBytes(64 * 1024)]) {
        const fromWasm = wasm.compress(raw, level);
        const fromNode = nodeZstd!.zstdCompressSync(raw, { params: { [nodeZstd!.constants.ZSTD_c_compressionLevel]: level } });
        assert.deepEqual(Buffer.from(decompressZstd(fromWasm, raw.length)), raw, `${raw.length} bytes from WebAssembly`);
        assert.deepEqual(Buffer.from(wasm.decompress(compressZstd(raw, level))), raw, `${raw.length} bytes read by WebAssembly`);
        assert.deepEqual(nodeZstd!.zstdDecompressSync(compressZstd(raw, level)), raw, `${raw.length} bytes read by node:zlib`);
        assert.deepEqual(Buffer.from(decompressZstd(fromNode, raw.length)), raw, `${raw.length} bytes from node:zlib`);
      }
    });
  }
});
