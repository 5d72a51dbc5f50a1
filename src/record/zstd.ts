/**
 * The ZSTD codec of this process, for the Arrow log payloads (`compression.ts`) and the Kafka
 * record batches (`kafka/records/compression.ts`): `@bokuweb/zstd-wasm`, the reference C library
 * compiled to WebAssembly, and node:zlib's own where the running Node has it (22.15, 23.8 and
 * later; found by feature, not by version). Both write standard frames with their content size,
 * byte for byte the same ones (the ARROW fixtures check it). node:zlib's takes 1.15–1.7× less CPU
 * on the append benchmark's column buffers (256–512 KiB), but a call costs it about 10 µs more,
 * so it is slower below a few KiB (docs/benchmarks.md): buffers below NATIVE_MIN_COMPRESS, and
 * frames declaring less than NATIVE_MIN_DECOMPRESS, go to the WebAssembly one, as the small column
 * buffers of low-latency batches do.
 *
 * `initZstd()` must be awaited once per process before either is used.
 *
 * Decompression reads one frame and bounds its output by the caller's limit: a frame whose header
 * declares more is refused before anything is allocated for it; one without a content size (as
 * some Kafka clients write) decodes into an output that grows up to the limit. Corrupt frames and
 * output past the limit are CORRUPT_MESSAGE.
 */
import zlib from 'node:zlib';
import { TributaryError } from '../common/errors.js';

interface Codec {
  compress(raw: Uint8Array, level: number): Uint8Array;
  /** One frame into at most `maxLength` bytes; `contentSize` as its header declares it, if it does. */
  decompress(frame: Uint8Array, maxLength: number, contentSize: number | null): Uint8Array;
}

/** node:zlib's zstd, which the Node 20 typings do not declare. */
interface ZlibZstd {
  zstdCompressSync(raw: Uint8Array, options: { params: Record<number, number> }): Buffer;
  zstdDecompressSync(frame: Uint8Array, options: { maxOutputLength: number; chunkSize?: number }): Buffer;
  constants: { ZSTD_c_compressionLevel: number };
}

const FRAME_MAGIC = 0xfd2fb528;
/** node:zlib's smallest `chunkSize`. */
const MIN_CHUNK = 64;

/** The sizes from which node:zlib's speed outweighs its cost per call (the measured crossovers). */
const NATIVE_MIN_COMPRESS = 1024;
const NATIVE_MIN_DECOMPRESS = 4096;

/** The WebAssembly codec, for small buffers, and the one for the rest: node:zlib's where there is one. */
let codecs: { small: Codec; large: Codec } | undefined;
let loading: Promise<void> | undefined;

/** Loads the codecs; safe to call more than once. */
export function initZstd(): Promise<void> {
  loading ??= (async () => {
    const node = zlib as unknown as Partial<ZlibZstd>;
    const small = await wasmCodec();
    codecs = { small, large: typeof node.zstdCompressSync === 'function' ? zlibCodec(node as ZlibZstd) : small };
  })();
  return loading;
}

export function compressZstd(raw: Uint8Array, level: number): Uint8Array {
  const { small, large } = loaded();
  return (raw.length < NATIVE_MIN_COMPRESS ? small : large).compress(raw, level);
}

/** Decompresses one frame, refusing (CORRUPT_MESSAGE) output longer than `maxLength`. */
export function decompressZstd(frame: Uint8Array, maxLength: number): Uint8Array {
  const { small, large } = loaded();
  const contentSize = contentSizeOf(frame);
  if (contentSize !== null && contentSize > maxLength) throw tooLarge(maxLength);
  // A frame without a content size (as some Kafka clients write their batches) counts as large.
  const c = contentSize !== null && contentSize < NATIVE_MIN_DECOMPRESS ? small : large;
  const out = c.decompress(frame, maxLength, contentSize);
  if (out.length > maxLength) throw tooLarge(maxLength);
  // Node 22's zlib returns what it decoded of a cut frame without an error.
  if (contentSize !== null && out.length !== contentSize) throw corrupt(`decoded to ${out.length} bytes, its header says ${contentSize}`);
  return out;
}

function loaded(): { small: Codec; large: Codec } {
  if (!codecs) throw new TributaryError('UNKNOWN_SERVER_ERROR', 'ZSTD is not loaded: await initZstd() once per process first (initArrowCompression() and initKafkaCompression() do)');
  return codecs;
}

function zlibCodec(node: ZlibZstd): Codec {
  const levelParam = node.constants.ZSTD_c_compressionLevel;
  return {
    compress: (raw, level) => node.zstdCompressSync(raw, { params: { [levelParam]: level } }),
    decompress(frame, maxLength, contentSize) {
      // A declared size (within the limit) is one output chunk, one byte over so that filling it
      // does not start another: not 16 KiB chunks copied together. Without one, the output grows
      // by chunks only as far as the frame really decodes.
      const chunkSize = contentSize === null ? undefined : Math.max(MIN_CHUNK, contentSize + 1);
      try {
        return node.zstdDecompressSync(frame, { maxOutputLength: Math.max(1, maxLength), chunkSize });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(maxLength);
        throw corrupt((err as Error).message, err);
      }
    },
  };
}

/** ZSTD_error_dstSize_tooSmall: the WebAssembly build's errors end in `code -<zstd error>`. */
const DST_SIZE_TOO_SMALL = 70;

async function wasmCodec(): Promise<Codec> {
  const wasm = await import('@bokuweb/zstd-wasm');
  await wasm.init();
  return {
    compress: (raw, level) => wasm.compress(raw, level),
    decompress(frame, maxLength, contentSize) {
      // It allocates a declared content size itself; without one, `defaultHeapSize` is the output.
      let capacity = Math.min(maxLength, Math.max(64 * 1024, frame.length * 8));
      for (;;) {
        try {
          return wasm.decompress(frame, { defaultHeapSize: capacity });
        } catch (err) {
          const error = -Number(/code (-\d+)$/.exec((err as Error).message)?.[1]);
          if (contentSize !== null || error !== DST_SIZE_TOO_SMALL) throw corrupt(Number.isNaN(error) ? (err as Error).message : `zstd error ${error}`, err);
          if (capacity >= maxLength) throw tooLarge(maxLength);
          capacity = Math.min(maxLength, capacity * 4);
        }
      }
    },
  };
}

/**
 * The content size a frame header declares (RFC 8878, 3.1.1.1), or null where it declares none:
 *
 *   frame header := Magic u32 LE, Descriptor u8, [Window u8], [DictionaryId 1|2|4 bytes], [ContentSize 1|2|4|8 bytes LE]
 *
 * Descriptor bits 7-6 size the content size field (0: none, or 1 byte in a single-segment frame;
 * 1: 2 bytes, less 256; 2: 4; 3: 8), bit 5 marks a single segment (no window byte), bits 1-0 size
 * the dictionary id (0, 1, 2, 4 bytes).
 */
function contentSizeOf(frame: Uint8Array): number | null {
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  if (frame.length < 5 || view.getUint32(0, true) !== FRAME_MAGIC) throw corrupt('not a ZSTD frame');
  const descriptor = frame[4];
  const singleSegment = (descriptor & 0x20) !== 0;
  const sizeBytes = [singleSegment ? 1 : 0, 2, 4, 8][descriptor >> 6];
  if (sizeBytes === 0) return null;
  const at = 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][descriptor & 3];
  if (frame.length < at + sizeBytes) throw corrupt('frame header cut off');
  switch (sizeBytes) {
    case 1:
      return frame[at];
    case 2:
      return view.getUint16(at, true) + 256;
    case 4:
      return view.getUint32(at, true);
    default:
      return Number(view.getBigUint64(at, true));
  }
}

function corrupt(reason: string, cause?: unknown): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `corrupt ZSTD frame: ${reason}`, { cause });
}

function tooLarge(maxLength: number): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `ZSTD frame decompresses to more than ${maxLength} bytes`);
}
