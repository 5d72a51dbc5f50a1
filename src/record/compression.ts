/**
 * Compression of the body buffers of ARROW log payloads, as the Arrow IPC spec defines it
 * (`RecordBatch.compression` = BodyCompression { codec: LZ4_FRAME | ZSTD, method: BUFFER }).
 * Each body buffer is stored on its own:
 *
 *   stored buffer := (nothing)                          a buffer of zero bytes stays empty
 *                  | Length i64 LE, Frame               Length = uncompressed size; one ZSTD frame
 *                                                       or one LZ4 frame holding the buffer
 *                  | -1 i64 LE, Raw                     left as is where compressing would not shrink it
 *
 * apache-arrow 21.2.0's writer puts the *compressed* size into that prefix, which other Arrow
 * libraries reject, so payloads are compressed here and its writer never gets an encoder. Its
 * registry gets decoders only, so that its own readers read our compressed streams too.
 *
 * `initArrowCompression()` must be awaited once per process before compressed payloads are encoded
 * or decoded: it loads the process's ZSTD codec (`zstd.ts`), WebAssembly where node:zlib has no zstd.
 * NONE needs no set-up.
 */
import * as arrow from 'apache-arrow';
import { compressFrameSync, decompressFrameSync } from 'lz4-napi';
import { TributaryError } from '../common/errors.js';
import { compressZstd, decompressZstd, initZstd } from './zstd.js';

/** `table.log.arrow.compression.type`. */
export type ArrowCompression = 'ZSTD' | 'LZ4_FRAME' | 'NONE';
/** `table.log.arrow.compression.zstd.level` default, as in Fluss. */
export const DEFAULT_ZSTD_LEVEL = 3;
export const MIN_ZSTD_LEVEL = 1;
export const MAX_ZSTD_LEVEL = 22;

/** Size of the uncompressed-length prefix of each stored buffer. */
export const LENGTH_PREFIX_SIZE = 8;
const NOT_COMPRESSED = -1;
/**
 * Body buffers shorter than this are stored raw without a try: a frame brings at least 9 (ZSTD) or
 * 15 (LZ4) bytes of its own, so they would shrink by a few dozen bytes at best, for a codec call
 * that costs more than the rest of encoding a batch of a row or two (a primary-key write's changelog).
 */
export const MIN_COMPRESSED_LENGTH = 64;
/** The longest body buffer: what a prefix may declare, and the bound of apache-arrow's decoders, which do not see the prefix. */
const MAX_BUFFER_LENGTH = 0x7fffffff;

let ready: Promise<void> | undefined;

/** Loads the ZSTD codec and registers decoders with apache-arrow; safe to call more than once. */
export function initArrowCompression(): Promise<void> {
  ready ??= (async () => {
    await initZstd();
    arrow.compressionRegistry.set(arrow.CompressionType.ZSTD, { decode: (frame) => decompressZstd(frame, MAX_BUFFER_LENGTH) });
    arrow.compressionRegistry.set(arrow.CompressionType.LZ4_FRAME, { decode: (frame) => decompressFrameSync(asBuffer(frame)) });
  })();
  return ready;
}

/** The IPC codec of a compression, or null for NONE. */
export function arrowCodecOf(compression: ArrowCompression): arrow.CompressionType | null {
  switch (compression) {
    case 'ZSTD':
      return arrow.CompressionType.ZSTD;
    case 'LZ4_FRAME':
      return arrow.CompressionType.LZ4_FRAME;
    case 'NONE':
      return null;
    default:
      throw new TributaryError('INVALID_ARGUMENT', `unknown Arrow compression '${compression as string}': use ZSTD, LZ4_FRAME or NONE`);
  }
}

export function checkZstdLevel(level: number): void {
  if (!Number.isInteger(level) || level < MIN_ZSTD_LEVEL || level > MAX_ZSTD_LEVEL) {
    throw new TributaryError('INVALID_ARGUMENT', `ZSTD level ${level} is outside [${MIN_ZSTD_LEVEL}, ${MAX_ZSTD_LEVEL}]`);
  }
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Compresses one non-empty body buffer. Returns the frame, or null when `raw` is shorter than
 * MIN_COMPRESSED_LENGTH or the frame would not be smaller (the buffer is then stored raw behind a -1 prefix).
 */
export function compressBodyBuffer(codec: arrow.CompressionType, raw: Uint8Array, zstdLevel: number): Uint8Array | null {
  if (raw.length < MIN_COMPRESSED_LENGTH) return null;
  let frame: Uint8Array;
  if (codec === arrow.CompressionType.ZSTD) {
    frame = compressZstd(raw, zstdLevel);
  } else {
    frame = compressFrameSync(asBuffer(raw));
  }
  return frame.length < raw.length ? frame : null;
}

/** Reads one stored body buffer (prefix included) back into its uncompressed bytes. */
export function decompressBodyBuffer(codec: arrow.CompressionType, stored: Uint8Array): Uint8Array {
  if (stored.length === 0) return stored;
  if (stored.length < LENGTH_PREFIX_SIZE) throw new TributaryError('CORRUPT_MESSAGE', `compressed Arrow buffer of ${stored.length} bytes has no length prefix`);
  const length = Number(new DataView(stored.buffer, stored.byteOffset, LENGTH_PREFIX_SIZE).getBigInt64(0, true));
  const frame = stored.subarray(LENGTH_PREFIX_SIZE);
  if (length === NOT_COMPRESSED) return frame;
  if (length < 0 || length > MAX_BUFFER_LENGTH) throw new TributaryError('CORRUPT_MESSAGE', `compressed Arrow buffer declares ${length} uncompressed bytes`);
  let out: Uint8Array;
  try {
    if (codec === arrow.CompressionType.ZSTD) {
      out = decompressZstd(frame, length);
    } else {
      out = decompressFrameSync(asBuffer(frame));
    }
  } catch (err) {
    if (err instanceof TributaryError) throw err;
    throw new TributaryError('CORRUPT_MESSAGE', `cannot decompress Arrow buffer (${arrow.CompressionType[codec]}): ${(err as Error).message}`, { cause: err });
  }
  if (out.length !== length) throw new TributaryError('CORRUPT_MESSAGE', `Arrow buffer decompressed to ${out.length} bytes, its prefix says ${length}`);
  return out;
}

/** Writes the prefix of a stored buffer at `pos`: the uncompressed size, or -1 for a raw buffer. */
export function writeLengthPrefix(view: DataView, pos: number, uncompressedLength: number | null): void {
  view.setBigInt64(pos, BigInt(uncompressedLength ?? NOT_COMPRESSED), true);
}
