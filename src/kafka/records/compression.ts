/**
 * The compression codecs of Kafka record batches (attributes bits 0-2), applied to the records
 * section as a whole:
 *
 *   0 none
 *   1 gzip     a gzip stream (node:zlib)
 *   2 snappy   Kafka's Java clients write snappy-java's framing: the magic
 *              82 'SNAPPY' 00, version int32 1, compatible version int32 1, then blocks of
 *              int32 length + raw snappy. librdkafka writes raw snappy without it; both are read,
 *              the framing is written.
 *   3 lz4      one LZ4 frame (the frame format with a correct header checksum, KIP-57)
 *   4 zstd     one zstd frame (record/zstd.ts: node:zlib's where Node has it, else WebAssembly)
 *
 * Decompression is bounded: a batch may not expand past `maxBytes`, so a small batch cannot make
 * the server allocate without limit.
 */
import zlib from 'node:zlib';
import { compressFrameSync, decompressFrameSync } from 'lz4-napi';
import { compressSync as snappyCompress, uncompressSync as snappyUncompress } from 'snappy';
import { compressZstd, decompressZstd, initZstd } from '../../record/zstd.js';

export const Codec = { NONE: 0, GZIP: 1, SNAPPY: 2, LZ4: 3, ZSTD: 4 } as const;
export type CodecId = (typeof Codec)[keyof typeof Codec];
export const CODEC_NAMES = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;

/** A records section that does not decompress, or would decompress past its limit. */
export class CompressionError extends Error {
  override readonly name = 'CompressionError';
}

const XERIAL_MAGIC = Buffer.from([0x82, 0x53, 0x4e, 0x41, 0x50, 0x50, 0x59, 0x00]);
const XERIAL_HEADER = 16;
const XERIAL_BLOCK = 32 * 1024;

/** Loads the process's zstd codec (shared with the Arrow payload codecs). */
export function initKafkaCompression(): Promise<void> {
  return initZstd();
}

export function compressRecords(codec: CodecId, raw: Uint8Array): Buffer {
  switch (codec) {
    case Codec.NONE:
      return asBuffer(raw);
    case Codec.GZIP:
      return zlib.gzipSync(raw, { level: 1 });
    case Codec.SNAPPY:
      return xerialFrame(raw);
    case Codec.LZ4:
      return compressFrameSync(asBuffer(raw));
    case Codec.ZSTD:
      return asBuffer(compressZstd(raw, 3));
  }
}

export function decompressRecords(codec: number, data: Buffer, maxBytes: number): Buffer {
  let out: Buffer;
  try {
    switch (codec) {
      case Codec.NONE:
        return data;
      case Codec.GZIP:
        out = zlib.gunzipSync(data, { maxOutputLength: maxBytes });
        break;
      case Codec.SNAPPY:
        out = snappyRead(data, maxBytes);
        break;
      case Codec.LZ4:
        out = decompressFrameSync(data);
        break;
      case Codec.ZSTD:
        out = asBuffer(decompressZstd(data, maxBytes));
        break;
      default:
        throw new CompressionError(`unknown compression codec ${codec}`);
    }
  } catch (err) {
    if (err instanceof CompressionError) throw err;
    throw new CompressionError(`cannot decompress ${CODEC_NAMES[codec] ?? codec} records: ${(err as Error).message}`);
  }
  if (out.length > maxBytes) throw new CompressionError(`records decompress to more than ${maxBytes} bytes`);
  return out;
}

function xerialFrame(raw: Uint8Array): Buffer {
  const parts: Buffer[] = [Buffer.alloc(XERIAL_HEADER)];
  XERIAL_MAGIC.copy(parts[0]);
  parts[0].writeInt32BE(1, 8);
  parts[0].writeInt32BE(1, 12);
  for (let at = 0; at < raw.length; at += XERIAL_BLOCK) {
    const block = snappyCompress(Buffer.from(raw.buffer, raw.byteOffset + at, Math.min(XERIAL_BLOCK, raw.length - at)));
    const len = Buffer.allocUnsafe(4);
    len.writeInt32BE(block.length);
    parts.push(len, block);
  }
  return Buffer.concat(parts);
}

function snappyRead(data: Buffer, maxBytes: number): Buffer {
  if (data.length < XERIAL_HEADER || !data.subarray(0, 8).equals(XERIAL_MAGIC)) return snappyUncompress(data) as Buffer;
  const blocks: Buffer[] = [];
  let size = 0;
  for (let at = XERIAL_HEADER; at < data.length; ) {
    if (at + 4 > data.length) throw new CompressionError('snappy block length cut off');
    const n = data.readInt32BE(at);
    if (n < 0 || at + 4 + n > data.length) throw new CompressionError(`snappy block of ${n} bytes overruns the records`);
    const block = snappyUncompress(data.subarray(at + 4, at + 4 + n)) as Buffer;
    size += block.length;
    if (size > maxBytes) throw new CompressionError(`records decompress to more than ${maxBytes} bytes`);
    blocks.push(block);
    at += 4 + n;
  }
  return Buffer.concat(blocks);
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
