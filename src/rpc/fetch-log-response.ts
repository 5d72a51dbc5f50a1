/**
 * Hand encoding of the FetchLog response (proto/tributary.proto), so the records read from a
 * segment go to the socket as they are. protobuf-es builds a nested message in a buffer of its
 * own and copies it into its parent's, then the whole response into one more: each fetched batch
 * was copied three times into fresh memory, which at high rates was most of the server's external
 * allocation and set off its full garbage collections.
 *
 *   FetchLogResponse         := 1 tables_resp (message, repeated)
 *   PbFetchLogRespForTable   := 1 table_id (int64), 2 buckets_resp (message, repeated)
 *   PbFetchLogRespForBucket  := 1 partition_id (int64, optional), 2 bucket_id (int32),
 *                               3 error_code (int32, optional), 4 error_message (string, optional),
 *                               5 high_watermark (int64), 6 log_start_offset (int64), 7 records (bytes)
 *
 * Written as protobuf-es writes it (fields in number order, proto3 defaults left out, optional
 * fields when set), so the bytes are the same and any protobuf reader reads them.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { FetchLogResponseSchema } from './gen/tributary_pb.js';
import { signedVarintSize, tag, varintSize, WIRE_LEN, WIRE_VARINT, WireWriter, writeSignedVarint, writeVarint } from './wire.js';

type FetchLogResponseInit = MessageInitShape<typeof FetchLogResponseSchema>;

const TAG_TABLES_RESP = tag(1, WIRE_LEN);
const TAG_TABLE_ID = tag(1, WIRE_VARINT);
const TAG_BUCKETS_RESP = tag(2, WIRE_LEN);
const TAG_PARTITION_ID = tag(1, WIRE_VARINT);
const TAG_BUCKET_ID = tag(2, WIRE_VARINT);
const TAG_ERROR_CODE = tag(3, WIRE_VARINT);
const TAG_ERROR_MESSAGE = tag(4, WIRE_LEN);
const TAG_HIGH_WATERMARK = tag(5, WIRE_VARINT);
const TAG_LOG_START_OFFSET = tag(6, WIRE_VARINT);
const TAG_RECORDS = tag(7, WIRE_LEN);
const EMPTY = new Uint8Array(0);

type IntValue = number | bigint | undefined;
const isSet = (v: IntValue): v is number | bigint => v !== undefined && BigInt(v) !== 0n;

/** A varint field's bytes: tag and value (always a one-byte tag here). */
const varintField = (v: number | bigint): number => 1 + signedVarintSize(v);
/** A length-delimited field's bytes around `length` bytes of content. */
const delimited = (length: number): number => 1 + varintSize(length) + length;

/**
 * The response as parts written one after the other: the fields around the records in a few
 * buffers, and each bucket's records as a view of the memory they were read into (not copied).
 */
export function encodeFetchLogResponse(response: FetchLogResponseInit): Uint8Array[] {
  const tables = response.tablesResp ?? [];
  // The sizes of the nested messages come first in the bytes, so they are summed up first.
  const tableSizes: number[] = [];
  const bucketSizes: number[] = [];
  let headBytes = 0;
  for (const t of tables) {
    let tableSize = isSet(t.tableId) ? varintField(t.tableId) : 0;
    for (const b of t.bucketsResp ?? []) {
      let size = 0;
      if (b.partitionId !== undefined) size += varintField(b.partitionId);
      if (isSet(b.bucketId)) size += varintField(b.bucketId);
      if (b.errorCode !== undefined) size += varintField(b.errorCode);
      if (b.errorMessage !== undefined) size += delimited(Buffer.byteLength(b.errorMessage));
      if (isSet(b.highWatermark)) size += varintField(b.highWatermark);
      if (isSet(b.logStartOffset)) size += varintField(b.logStartOffset);
      const records = b.records?.length ?? 0;
      if (records > 0) size += delimited(records);
      bucketSizes.push(size);
      tableSize += delimited(size);
      headBytes += 1 + varintSize(size) + size - records;
    }
    tableSizes.push(tableSize);
    headBytes += 1 + varintSize(tableSize) + (isSet(t.tableId) ? varintField(t.tableId) : 0);
  }
  const head = new WireWriter(Math.max(headBytes, 1));
  const buf = head.buf;
  const parts: Uint8Array[] = [];
  let pos = 0;
  let cut = 0;
  let bucket = 0;
  const writeInt = (fieldTag: number, value: number | bigint): void => {
    buf[pos] = fieldTag;
    pos = writeSignedVarint(buf, pos + 1, value);
  };
  tables.forEach((t, i) => {
    buf[pos++] = TAG_TABLES_RESP;
    pos = writeVarint(buf, pos, tableSizes[i]);
    if (isSet(t.tableId)) writeInt(TAG_TABLE_ID, t.tableId);
    for (const b of t.bucketsResp ?? []) {
      buf[pos++] = TAG_BUCKETS_RESP;
      pos = writeVarint(buf, pos, bucketSizes[bucket++]);
      if (b.partitionId !== undefined) writeInt(TAG_PARTITION_ID, b.partitionId);
      if (isSet(b.bucketId)) writeInt(TAG_BUCKET_ID, b.bucketId);
      if (b.errorCode !== undefined) writeInt(TAG_ERROR_CODE, b.errorCode);
      if (b.errorMessage !== undefined) {
        buf[pos++] = TAG_ERROR_MESSAGE;
        pos = writeVarint(buf, pos, Buffer.byteLength(b.errorMessage));
        pos += buf.write(b.errorMessage, pos, 'utf8');
      }
      if (isSet(b.highWatermark)) writeInt(TAG_HIGH_WATERMARK, b.highWatermark);
      if (isSet(b.logStartOffset)) writeInt(TAG_LOG_START_OFFSET, b.logStartOffset);
      const records = b.records ?? EMPTY;
      if (records.length === 0) continue;
      buf[pos++] = TAG_RECORDS;
      pos = writeVarint(buf, pos, records.length);
      parts.push(buf.subarray(cut, pos), records);
      cut = pos;
    }
  });
  if (pos > cut || parts.length === 0) parts.push(buf.subarray(cut, pos));
  return parts;
}
