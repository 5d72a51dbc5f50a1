/**
 * Hand encoding of the two requests that carry record bytes, ProduceLogRequest and PutKvRequest
 * (proto/tributary.proto), as a list of parts in which every batch is its own part: the batches go
 * to the socket as they are instead of being copied into one protobuf buffer.
 *
 * Standard protobuf wire format: tag = field << 3 | wire type (0 varint, 2 length-delimited);
 * int32 and int64 as varints (negative values as 10-byte two's complement); packed repeated int32
 * as one length-delimited field; a nested message as its length and bytes.
 *
 *   ProduceLogRequest { 1 acks, 2 table_id, 3 timeout_ms, 4 buckets_req[] }
 *   PutKvRequest      { 1 acks, 2 table_id, 3 timeout_ms, 4 target_columns (packed), 5 buckets_req[] }
 *   buckets_req       { 1 partition_id (optional), 2 bucket_id, 3 records (bytes) }
 */

export interface BucketRecords {
  partitionId?: bigint;
  bucketId: number;
  /** The bucket's batches, concatenated on the wire as the `records` bytes. */
  batches: readonly Uint8Array[];
}

export interface BucketRecordsRequest {
  acks: number;
  tableId: bigint;
  timeoutMs: number;
  /** PutKv only: present makes a PutKvRequest. */
  targetColumns?: readonly number[];
  buckets: readonly BucketRecords[];
}

class VarintWriter {
  private buf = Buffer.allocUnsafe(64);
  private pos = 0;

  varint(value: bigint | number): this {
    let v = BigInt.asUintN(64, BigInt(value));
    this.ensure(10);
    while (v >= 0x80n) {
      this.buf[this.pos++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.pos++] = Number(v);
    return this;
  }

  /** A small unsigned value (tags, lengths, ids): the common case without BigInt. */
  uint(value: number): this {
    if (value < 0 || value > 0x7fffffff) return this.varint(value);
    this.ensure(5);
    while (value >= 0x80) {
      this.buf[this.pos++] = (value & 0x7f) | 0x80;
      value >>>= 7;
    }
    this.buf[this.pos++] = value;
    return this;
  }

  raw(bytes: Uint8Array): this {
    this.ensure(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
    return this;
  }

  get length(): number {
    return this.pos;
  }

  take(): Uint8Array {
    return this.buf.subarray(0, this.pos);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
}

const VARINT = 0;
const LENGTH_DELIMITED = 2;
const tag = (field: number, wireType: number): number => (field << 3) | wireType;

/** The encoded request as parts, in wire order. */
export function encodeBucketRecordsRequest(req: BucketRecordsRequest): Uint8Array[] {
  const head = new VarintWriter();
  if (req.acks !== 0) head.uint(tag(1, VARINT)).varint(req.acks);
  if (req.tableId !== 0n) head.uint(tag(2, VARINT)).varint(req.tableId);
  if (req.timeoutMs !== 0) head.uint(tag(3, VARINT)).varint(req.timeoutMs);
  let bucketsField = 4;
  if (req.targetColumns) {
    bucketsField = 5;
    if (req.targetColumns.length > 0) {
      const packed = new VarintWriter();
      for (const c of req.targetColumns) packed.varint(c);
      head.uint(tag(4, LENGTH_DELIMITED)).uint(packed.length).raw(packed.take());
    }
  }
  const parts: Uint8Array[] = [];
  parts.push(head.take());
  for (const b of req.buckets) {
    const recordsLength = b.batches.reduce((n, x) => n + x.length, 0);
    const inner = new VarintWriter();
    if (b.partitionId !== undefined) inner.uint(tag(1, VARINT)).varint(b.partitionId);
    if (b.bucketId !== 0) inner.uint(tag(2, VARINT)).varint(b.bucketId);
    if (recordsLength > 0) inner.uint(tag(3, LENGTH_DELIMITED)).uint(recordsLength);
    const innerHead = inner.take();
    const outer = new VarintWriter();
    outer.uint(tag(bucketsField, LENGTH_DELIMITED)).uint(innerHead.length + recordsLength);
    parts.push(outer.take(), innerHead);
    if (recordsLength > 0) parts.push(...b.batches);
  }
  return parts;
}
