/**
 * Hand encoding of the two requests that carry record bytes, ProduceLogRequest and PutKvRequest
 * (proto/tributary.proto), as a list of parts in which every batch is its own part: the batches go
 * to the socket as they are instead of being copied into one protobuf buffer.
 *
 * Standard protobuf wire format (wire.ts); packed repeated int32 as one length-delimited field; a
 * nested message as its length and bytes.
 *
 *   ProduceLogRequest { 1 acks, 2 table_id, 3 timeout_ms, 4 buckets_req[] }
 *   PutKvRequest      { 1 acks, 2 table_id, 3 timeout_ms, 4 target_columns (packed), 5 buckets_req[] }
 *   buckets_req       { 1 partition_id (optional), 2 bucket_id, 3 records (bytes) }
 */

import { tag, WIRE_LEN, WIRE_VARINT, WireWriter } from './wire.js';

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

/** The encoded request as parts, in wire order. */
export function encodeBucketRecordsRequest(req: BucketRecordsRequest): Uint8Array[] {
  const head = new WireWriter();
  if (req.acks !== 0) head.uint(tag(1, WIRE_VARINT)).varint(req.acks);
  if (req.tableId !== 0n) head.uint(tag(2, WIRE_VARINT)).varint(req.tableId);
  if (req.timeoutMs !== 0) head.uint(tag(3, WIRE_VARINT)).varint(req.timeoutMs);
  let bucketsField = 4;
  if (req.targetColumns) {
    bucketsField = 5;
    if (req.targetColumns.length > 0) {
      const packed = new WireWriter();
      for (const c of req.targetColumns) packed.varint(c);
      head.uint(tag(4, WIRE_LEN)).uint(packed.used).raw(packed.take());
    }
  }
  const parts: Uint8Array[] = [];
  parts.push(head.take());
  for (const b of req.buckets) {
    const recordsLength = b.batches.reduce((n, x) => n + x.length, 0);
    const inner = new WireWriter();
    if (b.partitionId !== undefined) inner.uint(tag(1, WIRE_VARINT)).varint(b.partitionId);
    if (b.bucketId !== 0) inner.uint(tag(2, WIRE_VARINT)).varint(b.bucketId);
    if (recordsLength > 0) inner.uint(tag(3, WIRE_LEN)).uint(recordsLength);
    const innerHead = inner.take();
    const outer = new WireWriter();
    outer.uint(tag(bucketsField, WIRE_LEN)).uint(innerHead.length + recordsLength);
    parts.push(outer.take(), innerHead);
    if (recordsLength > 0) parts.push(...b.batches);
  }
  return parts;
}
