/** What every per-bucket API of the tablet server does alike when reading requests and answering. */
import { asTributaryError } from '../../common/errors.js';

/** A failure as the error fields of one bucket's response entry. */
export function bucketError(err: unknown): { errorCode: number; errorMessage: string } {
  const e = asTributaryError(err);
  return { errorCode: e.code, errorMessage: e.message };
}

/** A `bytes` field as a Buffer over the same memory (no copy). */
export function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}
