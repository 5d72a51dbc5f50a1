import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { before, describe, it } from 'node:test';
import * as arrow from 'apache-arrow';
import { decompressFrameSync } from 'lz4-napi';
import { buildSchema } from '../common/schema.js';
import { arrowIpcStream, encodeArrowPayload, readPayloadMessage } from './arrow-payload.js';
import { toArrowSchema } from './arrow-schema.js';
import { ColumnBatchBuilder } from './column-batch-builder.js';
import { type ArrowCompression, decompressBodyBuffer, initArrowCompression, MIN_COMPRESSED_LENGTH } from './compression.js';
import { decompressZstd } from './zstd.js';

const schema = buildSchema([
  { name: 'id', type: 'BIGINT', nullable: false },
  { name: 'word', type: 'STRING' },
  { name: 'tiny', type: 'INT' },
]);

/**
 * Deterministic rows: random ids, which no codec shrinks, and words with repetition at long range,
 * where higher ZSTD levels find more.
 */
function batchOf(rows: number): arrow.RecordBatch {
  const b = new ColumnBatchBuilder(schema);
  const words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliet'];
  let seed = 12345;
  const next = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  for (let i = 0; i < rows; i++) {
    const id = createHash('sha256').update(String(i)).digest().readBigInt64LE(0);
    const w = next();
    b.appendRow({ id, word: i % 5 === 0 ? null : `${words[w % 10]}-${words[(w >> 8) % 10]}-${w % 1000}`, tiny: i % 3 === 0 ? i : null });
  }
  return b.build();
}

/** The stored bytes of each body buffer of a payload. */
function storedBuffers(payload: Uint8Array): Uint8Array[] {
  const { header, body } = readPayloadMessage(payload, toArrowSchema(schema));
  return header.buffers.map((r) => body.subarray(r.offset, r.offset + r.length));
}

const prefixOf = (stored: Uint8Array): bigint => Buffer.from(stored.buffer, stored.byteOffset, 8).readBigInt64LE(0);

describe('Arrow body compression', () => {
  before(() => initArrowCompression());

  it('asks for initArrowCompression() before ZSTD is used, and needs none for NONE', () => {
    // In a process of its own, since this one loads ZSTD.
    const script = `
      import { encodeArrowPayload } from ${JSON.stringify(new URL('./arrow-payload.ts', import.meta.url).href)};
      import { ColumnBatchBuilder } from ${JSON.stringify(new URL('./column-batch-builder.ts', import.meta.url).href)};
      import { buildSchema } from ${JSON.stringify(new URL('../common/schema.ts', import.meta.url).href)};
      const b = new ColumnBatchBuilder(buildSchema([{ name: 'v', type: 'STRING' }]));
      for (let i = 0; i < 100; i++) b.appendRow({ v: 'abcabcabc' });
      const batch = b.build();
      encodeArrowPayload(batch, 'NONE');
      try { encodeArrowPayload(batch, 'ZSTD'); console.log('encoded'); } catch (err) { console.log(err.errorName, err.message); }`;
    const out = execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.match(out, /^UNKNOWN_SERVER_ERROR ZSTD is not loaded: .*initArrowCompression\(\)/);
  });

  it('can be initialised more than once', async () => {
    await initArrowCompression();
    await initArrowCompression();
  });

  const decoders: Record<'ZSTD' | 'LZ4_FRAME', (frame: Uint8Array) => Uint8Array> = {
    ZSTD: (frame) => decompressZstd(frame, 1 << 30),
    LZ4_FRAME: (frame) => decompressFrameSync(Buffer.from(frame)),
  };
  for (const compression of ['ZSTD', 'LZ4_FRAME'] as const) {
    it(`${compression}: prefixes each buffer with its uncompressed length, or -1 when stored raw`, () => {
      const batch = batchOf(2000);
      const raw = storedBuffers(encodeArrowPayload(batch, 'NONE'));
      const stored = storedBuffers(encodeArrowPayload(batch, compression));
      assert.equal(stored.length, raw.length);
      let compressed = 0;
      let leftRaw = 0;
      stored.forEach((s, i) => {
        if (raw[i].length === 0) return assert.equal(s.length, 0, `buffer ${i} stays empty`);
        const prefix = prefixOf(s);
        if (prefix === -1n) {
          leftRaw++;
          assert.deepEqual(s.subarray(8), raw[i], `raw buffer ${i}`);
        } else {
          compressed++;
          assert.equal(prefix, BigInt(raw[i].length), `prefix of buffer ${i}`);
          assert.deepEqual(Buffer.from(decoders[compression](s.subarray(8))), Buffer.from(raw[i]), `frame of buffer ${i}`);
        }
      });
      // Random ids stay raw; validity bitmaps, offsets and words compress.
      assert.ok(compressed >= 4 && leftRaw === 1, `${compressed} compressed, ${leftRaw} raw buffers`);
    });
  }

  for (const compression of ['ZSTD', 'LZ4_FRAME'] as const) {
    it(`${compression}: stores a buffer shorter than ${MIN_COMPRESSED_LENGTH} bytes raw, however well it would compress`, () => {
      const idsOf = (rows: number): Uint8Array => {
        const b = new ColumnBatchBuilder(schema);
        for (let i = 0; i < rows; i++) b.appendRow({ id: 42n, word: 'same', tiny: 1 });
        return storedBuffers(encodeArrowPayload(b.build(), compression))[1];
      };
      const below = idsOf(MIN_COMPRESSED_LENGTH / 8 - 1);
      assert.equal(prefixOf(below), -1n);
      assert.equal(below.length, 8 + MIN_COMPRESSED_LENGTH - 8);
      const at = idsOf(MIN_COMPRESSED_LENGTH / 8);
      assert.equal(prefixOf(at), BigInt(MIN_COMPRESSED_LENGTH));
      assert.ok(at.length < 8 + MIN_COMPRESSED_LENGTH, `${at.length} bytes stored`);
    });
  }

  for (const compression of ['ZSTD', 'LZ4_FRAME'] as const) {
    it(`${compression}: a body mixing compressed and raw buffers is read by apache-arrow's stream reader`, () => {
      const batch = batchOf(301);
      const payload = encodeArrowPayload(batch, compression);
      const prefixes = storedBuffers(payload).filter((s) => s.length > 0).map(prefixOf);
      assert.ok(prefixes.includes(-1n) && prefixes.some((p) => p > 0n), `prefixes ${prefixes}`);
      const table = arrow.tableFromIPC(arrowIpcStream(toArrowSchema(schema), [payload]));
      assert.equal(table.numRows, 301);
      for (const name of ['id', 'word', 'tiny']) {
        assert.deepEqual(table.getChild(name)!.toArray(), batch.getChild(name)!.toArray(), name);
      }
      assert.equal(table.getChild('tiny')!.get(1), null);
      assert.equal(table.getChild('word')!.get(0), null);
    });
  }

  it('honours the ZSTD level', () => {
    const batch = batchOf(20000);
    const sizes = [1, 3, 19].map((level) => encodeArrowPayload(batch, 'ZSTD', level).length);
    assert.equal(encodeArrowPayload(batch, 'ZSTD').length, sizes[1], 'level 3 is the default');
    assert.ok(sizes[0] > sizes[1] && sizes[1] > sizes[2], `sizes at levels 1, 3, 19: ${sizes}`);
  });

  it('rejects ZSTD levels outside 1..22 and unknown compressions', () => {
    const batch = batchOf(1);
    for (const level of [0, 23, 2.5]) assert.throws(() => encodeArrowPayload(batch, 'ZSTD', level), { errorName: 'INVALID_ARGUMENT' });
    assert.throws(() => encodeArrowPayload(batch, 'GZIP' as ArrowCompression), { errorName: 'INVALID_ARGUMENT' });
  });

  it('rejects stored buffers that do not match their prefix', () => {
    const stored = storedBuffers(encodeArrowPayload(batchOf(500), 'ZSTD')).find((s) => s.length > 8 && prefixOf(s) > 0n)!;
    const codec = arrow.CompressionType.ZSTD;
    assert.equal(decompressBodyBuffer(codec, stored).length, Number(prefixOf(stored)));
    const wrongLength = Buffer.from(stored);
    wrongLength.writeBigInt64LE(prefixOf(stored) + 1n, 0);
    assert.throws(() => decompressBodyBuffer(codec, wrongLength), { errorName: 'CORRUPT_MESSAGE' });
    const garbage = Buffer.from(stored);
    garbage.fill(0x5a, 8);
    assert.throws(() => decompressBodyBuffer(codec, garbage), { errorName: 'CORRUPT_MESSAGE' });
    assert.throws(() => decompressBodyBuffer(arrow.CompressionType.LZ4_FRAME, garbage), { errorName: 'CORRUPT_MESSAGE' });
    const negative = Buffer.from(stored);
    negative.writeBigInt64LE(-2n, 0);
    assert.throws(() => decompressBodyBuffer(codec, negative), { errorName: 'CORRUPT_MESSAGE' });
    assert.throws(() => decompressBodyBuffer(codec, stored.subarray(0, 5)), { errorName: 'CORRUPT_MESSAGE' });
  });
});
