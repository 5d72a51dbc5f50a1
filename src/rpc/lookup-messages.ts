/**
 * Hand encoding of the messages of point lookups (proto/tributary.proto): the Lookup and
 * PrefixLookup requests, written by the client with each key copied once straight into its
 * bucket's part and read by the server in place, and the Lookup response, written by the server
 * with each value copied once straight from the KV store and read by the client in place.
 *
 * Standard protobuf wire format (wire.ts); a nested message as its length and bytes.
 *
 *   LookupRequest, PrefixLookupRequest := 1 table_id (varint), 2 buckets_req (message, repeated)
 *   PbLookupReqForBucket               := 1 partition_id (varint, when partitioned), 2 bucket_id
 *                                         (varint), 3 keys (bytes, repeated)
 *   LookupResponse                     := 1 buckets_resp (message, repeated): one per requested
 *                                         bucket, in order
 *   PbLookupRespForBucket              := 1 partition_id (varint, when partitioned), 2 bucket_id
 *                                         (varint), 3 error_code (varint, on failure), 4 error_message
 *                                         (string, on failure), 5 values (PbValue, repeated): one per
 *                                         requested key, in order
 *   PbValue                            := 1 values (bytes; absent when the key holds no row)
 *
 * The encoders write bucket_id even when it is 0, which proto3 would leave out; it reads the same.
 * The decoder takes fields in any order and skips unknown ones, as protobuf readers do.
 */
import { TributaryError } from '../common/errors.js';
import { tag, varintSize, WIRE_LEN, WIRE_VARINT, WireReader, WireWriter, writeSignedVarint, writeVarint } from './wire.js';

const TAG_TABLE_ID = tag(1, WIRE_VARINT);
const TAG_BUCKETS = tag(2, WIRE_LEN);
const TAG_BUCKETS_RESP = tag(1, WIRE_LEN);
const TAG_PARTITION_ID = tag(1, WIRE_VARINT);
const TAG_BUCKET_ID = tag(2, WIRE_VARINT);
const TAG_KEY = tag(3, WIRE_LEN);
const TAG_ERROR_CODE = tag(3, WIRE_VARINT);
const TAG_ERROR_MESSAGE = tag(4, WIRE_LEN);
const TAG_VALUE = tag(5, WIRE_LEN);
const TAG_VALUE_BYTES = tag(1, WIRE_LEN);
/** Most bytes of a tag and a varint32 length. */
const FIELD_OVERHEAD = 6;
/** Bytes of a value field the response buffer starts with room for, per key; it grows past that. */
const VALUE_BYTES_GUESS = 64;
/** Most bytes of a bucket's head: tag and length, partition id and bucket id with their tags. */
const BUCKET_HEAD_BYTES = 1 + 5 + 1 + 10 + 1 + 10;

const isId = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

/** The head of one bucket's message in a request or response: tag and length, partition and bucket id. */
function writeBucketHead(head: WireWriter, fieldTag: number, partitionId: number | undefined, bucketId: number, contentLength: number): void {
  // The varints are unsigned: a negative id would be written as a number the reader cannot parse.
  if (!isId(bucketId) || (partitionId !== undefined && !isId(partitionId))) {
    throw new TributaryError('INVALID_ARGUMENT', `a lookup names partition ${partitionId ?? 'none'}, bucket ${bucketId}: ids are non-negative integers`);
  }
  head.reserve(BUCKET_HEAD_BYTES);
  const buf = head.buf;
  const partition = partitionId === undefined ? 0 : 1 + varintSize(partitionId);
  buf[head.used++] = fieldTag;
  let pos = writeVarint(buf, head.used, partition + 1 + varintSize(bucketId) + contentLength);
  if (partitionId !== undefined) {
    buf[pos++] = TAG_PARTITION_ID;
    pos = writeVarint(buf, pos, partitionId);
  }
  buf[pos++] = TAG_BUCKET_ID;
  head.used = writeVarint(buf, pos, bucketId);
}

// ---------------------------------------------------------------- requests

/** The `keys` fields of one PbLookupReqForBucket, each key copied in as it is added. */
export class KeyFields {
  private readonly out = new WireWriter(1024);

  add(key: Uint8Array): void {
    const out = this.out;
    out.reserve(FIELD_OVERHEAD + key.length);
    out.buf[out.used] = TAG_KEY;
    const at = writeVarint(out.buf, out.used + 1, key.length);
    out.buf.set(key, at);
    out.used = at + key.length;
  }

  get bytes(): Uint8Array {
    return this.out.buf.subarray(0, this.out.used);
  }
}

/** A LookupRequest (or PrefixLookupRequest) as parts written one after the other. */
export function encodeLookupRequest(tableId: number, buckets: readonly { partitionId?: number; bucket: number; keys: KeyFields }[]): Uint8Array[] {
  const head = new WireWriter(11 + buckets.length * BUCKET_HEAD_BYTES);
  head.buf[0] = TAG_TABLE_ID;
  head.used = writeVarint(head.buf, 1, tableId);
  // Every head goes into one buffer, and the parts are cut out of it once it is complete.
  const ends: number[] = [head.used];
  for (const b of buckets) {
    writeBucketHead(head, TAG_BUCKETS, b.partitionId, b.bucket, b.keys.bytes.length);
    ends.push(head.used);
  }
  if (buckets.length === 0) return [head.buf.subarray(0, head.used)];
  const parts: Uint8Array[] = [];
  let start = 0;
  buckets.forEach((b, i) => {
    parts.push(head.buf.subarray(start, ends[i + 1]), b.keys.bytes);
    start = ends[i + 1];
  });
  return parts;
}

/** A LookupRequest as the server reads it. */
export interface LookupRequestRead {
  tableId: number;
  buckets: { partitionId: number | undefined; bucketId: number; keys: Uint8Array[] }[];
}

/** Reads a LookupRequest (any field order, unknown fields skipped); keys are plain views of `body` (WireReader.view). */
export function decodeLookupRequest(body: Uint8Array): LookupRequestRead {
  const r = new WireReader(body, 'LookupRequest');
  const request: LookupRequestRead = { tableId: 0, buckets: [] };
  while (r.pos < r.end) {
    const field = r.varint();
    if (field === TAG_TABLE_ID) request.tableId = r.varint();
    else if (field === TAG_BUCKETS) {
      const end = r.delimitedEnd();
      const outer = r.end;
      r.end = end;
      const bucket: LookupRequestRead['buckets'][number] = { partitionId: undefined, bucketId: 0, keys: [] };
      while (r.pos < end) {
        const inner = r.varint();
        if (inner === TAG_KEY) bucket.keys.push(r.view());
        else if (inner === TAG_BUCKET_ID) bucket.bucketId = r.int32();
        else if (inner === TAG_PARTITION_ID) bucket.partitionId = r.varint();
        else r.skip(inner);
      }
      r.end = outer;
      request.buckets.push(bucket);
    } else r.skip(field);
  }
  return request;
}

// ---------------------------------------------------------------- Lookup response

/**
 * Writes a LookupResponse: per requested bucket, in order, `bucket` and then one `value` per
 * requested key, or `error` instead of (or after some of) its values.
 */
export class LookupResponseWriter {
  /** The contents of every bucket after its head, one after the other. */
  private readonly content: WireWriter;
  private readonly buckets: { partitionId: number | undefined; bucketId: number; start: number; end: number }[] = [];

  /** `keys`: how many keys the request asks for, to size the buffer (small ones come from Node's shared pool). */
  constructor(keys: number) {
    this.content = new WireWriter(Math.max(64, keys * VALUE_BYTES_GUESS));
  }

  /** Starts the answer of the next requested bucket. */
  bucket(partitionId: number | undefined, bucketId: number): void {
    this.buckets.push({ partitionId, bucketId, start: this.content.used, end: this.content.used });
  }

  /** The value found for the bucket's next key, copied in at once; undefined when the key holds no row. */
  value(value: Uint8Array | undefined): void {
    const out = this.content;
    const current = this.buckets[this.buckets.length - 1];
    if (value === undefined) {
      out.reserve(2);
      out.buf[out.used++] = TAG_VALUE;
      out.buf[out.used++] = 0;
    } else {
      out.reserve(2 * FIELD_OVERHEAD + value.length);
      const buf = out.buf;
      buf[out.used] = TAG_VALUE;
      let pos = writeVarint(buf, out.used + 1, 1 + varintSize(value.length) + value.length);
      buf[pos++] = TAG_VALUE_BYTES;
      pos = writeVarint(buf, pos, value.length);
      buf.set(value, pos);
      out.used = pos + value.length;
    }
    current.end = out.used;
  }

  /** The bucket failed: its answer becomes the error alone, whatever values were written for it. */
  error(errorCode: number, errorMessage: string): void {
    const out = this.content;
    const current = this.buckets[this.buckets.length - 1];
    const message = Buffer.from(errorMessage, 'utf8');
    out.used = current.start;
    out.reserve(1 + 10 + FIELD_OVERHEAD + message.length);
    const buf = out.buf;
    buf[out.used] = TAG_ERROR_CODE;
    let pos = writeSignedVarint(buf, out.used + 1, errorCode);
    buf[pos++] = TAG_ERROR_MESSAGE;
    pos = writeVarint(buf, pos, message.length);
    buf.set(message, pos);
    out.used = current.end = pos + message.length;
  }

  /** The response as parts written one after the other. */
  finish(): Uint8Array[] {
    const head = new WireWriter(this.buckets.length * BUCKET_HEAD_BYTES);
    const parts: Uint8Array[] = [];
    let start = 0;
    for (const b of this.buckets) {
      writeBucketHead(head, TAG_BUCKETS_RESP, b.partitionId, b.bucketId, b.end - b.start);
      parts.push(head.buf.subarray(start, head.used), this.content.buf.subarray(b.start, b.end));
      start = head.used;
    }
    return parts;
  }
}

/** One bucket of a LookupResponse as the client reads it. */
export interface LookupBucketAnswer {
  errorCode?: number;
  errorMessage?: string;
  /** One per requested key: the KV value (a view of the response), or undefined when the key holds no row. */
  values: (Uint8Array | undefined)[];
}

/** Reads a LookupResponse (any field order, unknown fields skipped); values are views of `body`. */
export function decodeLookupResponse(body: Uint8Array): LookupBucketAnswer[] {
  const r = new WireReader(body, 'LookupResponse');
  const buckets: LookupBucketAnswer[] = [];
  while (r.pos < r.end) {
    const field = r.varint();
    if (field === TAG_BUCKETS_RESP) buckets.push(readBucket(r, r.delimitedEnd()));
    else r.skip(field);
  }
  return buckets;
}

function readBucket(r: WireReader, end: number): LookupBucketAnswer {
  const outer = r.end;
  r.end = end;
  const answer: LookupBucketAnswer = { values: [] };
  while (r.pos < end) {
    const field = r.varint();
    if (field === TAG_VALUE) answer.values.push(readValue(r, r.delimitedEnd()));
    else if (field === TAG_ERROR_CODE) answer.errorCode = r.int32();
    else if (field === TAG_ERROR_MESSAGE) answer.errorMessage = Buffer.from(r.view()).toString('utf8');
    else r.skip(field); // partition and bucket id: the client knows them by position
  }
  r.end = outer;
  return answer;
}

function readValue(r: WireReader, end: number): Uint8Array | undefined {
  const outer = r.end;
  r.end = end;
  let value: Uint8Array | undefined;
  while (r.pos < end) {
    const field = r.varint();
    if (field === TAG_VALUE_BYTES) value = r.view();
    else r.skip(field);
  }
  r.end = outer;
  return value;
}
