/**
 * RPC framing (DESIGN.md §4, Fluss's wire frame). All integers big-endian.
 *
 *   request  = length:int32  apiKey:int16  apiVersion:int16  requestId:int32  body
 *   response = length:int32  type:int8  requestId:int32  body
 *
 *   length     bytes after the length field (header + body); a request's length must be at
 *              least 8 (its header), a response's at least 5, and at most the receiver's limit
 *              (rpc.max-frame-size on the server)
 *   type       0 = ok             body is the API's response message
 *              1 = error          body is ErrorResponse{error_code, error_message}
 *              2 = server failure body is ErrorResponse (an unexpected failure of the server)
 *   requestId  chosen by the client, echoed by the server; responses may come in any order.
 *              Fluss omits it for type 2; Tributary always sends it so the client can fail the
 *              request that caused the failure instead of the whole connection.
 *   body       one protobuf message of proto/tributary.proto, chosen by apiKey
 *
 * Frames are encoded as a small header Buffer plus the body written after it (one writev), so
 * bodies are never copied to be framed. The decoder hands out frames that are views of the
 * socket chunks when a frame sits inside one chunk, and one joined Buffer (the only copy) when
 * it spans chunks; the server joins into reusable memory (frame-pool.ts). Bodies decoded with `fromBinary` keep `bytes` fields as subarrays of the
 * frame, so record batches reach the handler without a copy. (Encoding is not copy-free:
 * protobuf-es `toBinary` copies `bytes` fields into the body it builds, which is why the hot
 * messages are encoded by hand.)
 */
import type { Socket } from 'node:net';

export const LENGTH_FIELD_SIZE = 4;
/** apiKey + apiVersion + requestId. */
export const REQUEST_HEADER_SIZE = 8;
/** type + requestId. */
export const RESPONSE_HEADER_SIZE = 5;
/** The largest length the int32 field can state. */
export const MAX_INT32 = 0x7fffffff;

const EMPTY_WRITE = Buffer.alloc(0);

export const ResponseType = { OK: 0, ERROR: 1, SERVER_FAILURE: 2 } as const;
export type ResponseType = (typeof ResponseType)[keyof typeof ResponseType];

export function requestHeader(apiKey: number, apiVersion: number, requestId: number, bodyLength: number): Buffer {
  const b = Buffer.allocUnsafe(LENGTH_FIELD_SIZE + REQUEST_HEADER_SIZE);
  b.writeInt32BE(REQUEST_HEADER_SIZE + bodyLength, 0);
  b.writeInt16BE(apiKey, 4);
  b.writeInt16BE(apiVersion, 6);
  b.writeInt32BE(requestId, 8);
  return b;
}

export function responseHeader(type: ResponseType, requestId: number, bodyLength: number): Buffer {
  const b = Buffer.allocUnsafe(LENGTH_FIELD_SIZE + RESPONSE_HEADER_SIZE);
  b.writeInt32BE(RESPONSE_HEADER_SIZE + bodyLength, 0);
  b.writeInt8(type, 4);
  b.writeInt32BE(requestId, 5);
  return b;
}

/**
 * Writes header and body as one writev; returns false when the socket asks the writer to wait for
 * 'drain'. `onWritten` is called once the socket no longer refers to the bytes: they were written,
 * or the write failed or was dropped with the socket.
 */
export function writeFrame(socket: Socket, header: Buffer, body: Uint8Array | readonly Uint8Array[], onWritten?: () => void): boolean {
  socket.cork();
  socket.write(header);
  for (const part of body instanceof Uint8Array ? [body] : body) if (part.length > 0) socket.write(part);
  // Corked writes go out together, and their callbacks run when that one write is done.
  if (onWritten) socket.write(EMPTY_WRITE, () => onWritten());
  socket.uncork();
  return !socket.writableNeedDrain;
}

export interface RequestFrame {
  apiKey: number;
  apiVersion: number;
  requestId: number;
  body: Buffer;
}

/** Reads a request frame as handed out by FrameDecoder (the bytes after the length field). */
export function parseRequestFrame(frame: Buffer): RequestFrame {
  return {
    apiKey: frame.readInt16BE(0),
    apiVersion: frame.readInt16BE(2),
    requestId: frame.readInt32BE(4),
    body: frame.subarray(REQUEST_HEADER_SIZE),
  };
}

export interface ResponseFrame {
  type: number;
  requestId: number;
  body: Buffer;
}

export function parseResponseFrame(frame: Buffer): ResponseFrame {
  return { type: frame.readInt8(0), requestId: frame.readInt32BE(1), body: frame.subarray(RESPONSE_HEADER_SIZE) };
}

/** Why a byte stream cannot be framed any further. */
export type FrameError =
  | { kind: 'corrupt'; length: number }
  /** `header` holds the frame's header bytes when they arrived with the length, else it is undefined. */
  | { kind: 'oversized'; length: number; header: Buffer | undefined };

/**
 * Splits a byte stream into frames. Each frame is handed out as the bytes after its length field.
 * A bad length stops the decoder for good: the stream has no frame boundaries after it.
 */
export class FrameDecoder {
  private readonly prefix = Buffer.alloc(LENGTH_FIELD_SIZE);
  private prefixBytes = 0;
  /** Length of the frame being assembled, -1 while its length field is incomplete. */
  private frameLength = -1;
  private parts: Buffer[] = [];
  private partBytes = 0;
  private error: FrameError | undefined;

  /**
   * @param headerSize smallest valid length (the header that follows the length field)
   * @param maxFrameBytes largest valid length
   * @param allocate memory for a frame that spans chunks (a FramePool's `take` on the server)
   */
  constructor(
    private readonly headerSize: number,
    private readonly maxFrameBytes: number,
    private readonly allocate: (length: number) => Buffer = Buffer.allocUnsafe,
  ) {}

  /** Bytes held for the frame not yet complete. */
  get bufferedBytes(): number {
    return this.prefixBytes + (this.frameLength >= 0 ? LENGTH_FIELD_SIZE : 0) + this.partBytes;
  }

  /**
   * Feeds one chunk: calls `onFrame` for each completed frame in order and returns the error
   * that stopped the stream, if any (frames before the bad one are still delivered).
   */
  push(chunk: Buffer, onFrame: (frame: Buffer) => void): FrameError | undefined {
    if (this.error) return this.error;
    let pos = 0;
    const end = chunk.length;
    if (this.prefixBytes > 0) {
      const n = Math.min(LENGTH_FIELD_SIZE - this.prefixBytes, end);
      chunk.copy(this.prefix, this.prefixBytes, 0, n);
      this.prefixBytes += n;
      pos = n;
      if (this.prefixBytes < LENGTH_FIELD_SIZE) return undefined;
      this.prefixBytes = 0;
      if (!this.begin(this.prefix.readInt32BE(0), chunk, pos)) return this.error;
    }
    if (this.frameLength >= 0) {
      const missing = this.frameLength - this.partBytes;
      if (end - pos < missing) {
        this.addPart(chunk.subarray(pos));
        return undefined;
      }
      this.addPart(chunk.subarray(pos, pos + missing));
      pos += missing;
      const frame = this.parts.length === 1 ? this.parts[0] : this.join();
      this.parts = [];
      this.partBytes = 0;
      this.frameLength = -1;
      onFrame(frame);
    }
    while (pos < end) {
      if (end - pos < LENGTH_FIELD_SIZE) {
        chunk.copy(this.prefix, 0, pos, end);
        this.prefixBytes = end - pos;
        return undefined;
      }
      const length = chunk.readInt32BE(pos);
      pos += LENGTH_FIELD_SIZE;
      if (!this.begin(length, chunk, pos)) return this.error;
      if (end - pos < length) {
        this.addPart(chunk.subarray(pos));
        return undefined;
      }
      this.frameLength = -1;
      onFrame(chunk.subarray(pos, pos + length));
      pos += length;
    }
    return undefined;
  }

  /** Validates a length just read; `chunk[pos..]` holds whatever of the frame has arrived with it. */
  private begin(length: number, chunk: Buffer, pos: number): boolean {
    if (length < this.headerSize) {
      this.error = { kind: 'corrupt', length };
    } else if (length > this.maxFrameBytes) {
      const header = chunk.length - pos >= this.headerSize ? chunk.subarray(pos, pos + this.headerSize) : undefined;
      this.error = { kind: 'oversized', length, header };
    } else {
      this.frameLength = length;
      return true;
    }
    this.parts = [];
    this.partBytes = 0;
    return false;
  }

  /** Copies the parts of the frame being completed into one buffer. */
  private join(): Buffer {
    const frame = this.allocate(this.frameLength);
    let at = 0;
    for (const part of this.parts) at += part.copy(frame, at);
    return frame;
  }

  private addPart(part: Buffer): void {
    if (part.length === 0) return;
    this.parts.push(part);
    this.partBytes += part.length;
  }
}
