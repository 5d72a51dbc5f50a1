/**
 * Changelog payloads: the records of a primary-key table's log batches (DESIGN.md §3), whose
 * header has Attributes bit0 = 0 (not append-only). The server builds them from PutKv writes.
 *
 *   payload     := ChangeType{RecordCount} ArrowRecordBatchMessage   when RecordCount > 0
 *                | (zero bytes)                                       when RecordCount = 0
 *   ChangeType  := u8, the change of record i: +I = 1, -U = 2, +U = 3, -D = 4 (change-type.ts);
 *                  +A = 0 belongs to append-only batches and is refused here
 *   ArrowRecordBatchMessage := exactly as for log tables (arrow-payload.ts), RecordCount rows, row i
 *                  being the row of change i (the old row for -U and -D, the new one for +I and +U)
 *
 * A batch of RecordCount 0 is legal: a write that changed nothing still appends one to move the
 * writer's batch sequence on. Its payload is empty, not an Arrow message of no rows, whose
 * metadata would cost some 60 bytes a column in every such batch: readers skip these batches by
 * their record count and have nothing to decode.
 *
 * The Arrow message starts right after the change types, at any alignment; decodeArrowPayload
 * copies what it must align.
 */
import type * as arrow from 'apache-arrow';
import { CHANGE_TYPE_BYTE } from '../common/change-type.js';
import { TributaryError } from '../common/errors.js';
import { arrowPayloadRecordCount, encodeArrowPayload } from './arrow-payload.js';
import { checkProjection } from './arrow-schema.js';
import { type ArrowCompression, DEFAULT_ZSTD_LEVEL } from './compression.js';
import { type Cut, cutArrowPayload } from './projection.js';

const FIRST_CHANGE = CHANGE_TYPE_BYTE['+I'];
const LAST_CHANGE = CHANGE_TYPE_BYTE['-D'];

/** Index of the first byte that is not a changelog change type, or -1. */
function firstUnknownChange(changeTypes: Uint8Array): number {
  for (let i = 0; i < changeTypes.length; i++) {
    const c = changeTypes[i];
    if (c < FIRST_CHANGE || c > LAST_CHANGE) return i;
  }
  return -1;
}

/** The payload of rows `batch` whose changes are `changeTypes` (one per row); `zstdLevel` applies to ZSTD only. */
export function encodeChangelogPayload(changeTypes: Uint8Array, batch: arrow.RecordBatch, compression: ArrowCompression = 'ZSTD', zstdLevel = DEFAULT_ZSTD_LEVEL): Uint8Array {
  if (changeTypes.length !== batch.numRows) throw new TributaryError('INVALID_ARGUMENT', `${changeTypes.length} change types for ${batch.numRows} rows`);
  if (batch.numRows === 0) return new Uint8Array(0);
  const unknown = firstUnknownChange(changeTypes);
  if (unknown >= 0) throw new TributaryError('INVALID_ARGUMENT', `change type byte ${changeTypes[unknown]} of row ${unknown} is not +I, -U, +U or -D`);
  const message = encodeArrowPayload(batch, compression, zstdLevel);
  const payload = new Uint8Array(changeTypes.length + message.length);
  payload.set(changeTypes);
  payload.set(message, changeTypes.length);
  return payload;
}

function corrupt(why: string): TributaryError {
  return new TributaryError('CORRUPT_MESSAGE', `invalid changelog payload: ${why}`);
}

/** The change types of a payload of `recordCount` records, checked; a view of `payload`. */
function changeTypesOf(payload: Uint8Array, recordCount: number): Uint8Array {
  if (recordCount === 0) {
    if (payload.length !== 0) throw corrupt(`${payload.length} bytes in a batch of no records`);
    return payload;
  }
  if (!Number.isInteger(recordCount) || recordCount < 0 || recordCount >= payload.length) throw corrupt(`${payload.length} bytes cannot hold ${recordCount} change types and an Arrow message`);
  const changeTypes = payload.subarray(0, recordCount);
  const unknown = firstUnknownChange(changeTypes);
  if (unknown >= 0) throw corrupt(`byte ${changeTypes[unknown]} of record ${unknown} is not a change type (+I, -U, +U, -D)`);
  return changeTypes;
}

/**
 * Splits a payload of `recordCount` records (from its batch header) into its change types and
 * its Arrow message, both views of `payload`. Checks the change types and that the Arrow message
 * holds `recordCount` rows (from its metadata only); throws CORRUPT_MESSAGE. With `recordCount`
 * 0 both are empty: there is no Arrow message to decode.
 */
export function splitChangelogPayload(payload: Uint8Array, recordCount: number): { changeTypes: Uint8Array; arrow: Uint8Array } {
  const changeTypes = changeTypesOf(payload, recordCount);
  const message = payload.subarray(recordCount);
  if (recordCount > 0) {
    const rows = arrowPayloadRecordCount(message);
    if (rows !== recordCount) throw corrupt(`${recordCount} change types but ${rows} rows`);
  }
  return { changeTypes, arrow: message };
}

/**
 * Server-side column projection of a payload of `payloadLength` bytes written with `arrowSchema`,
 * planned from `head`, its first bytes up to the Arrow body at least: the same change types, then
 * the Arrow message of `columns` only (projection.ts). Undefined when the payload is its own
 * projection (all columns in order, or no records).
 */
export function cutChangelogPayload(head: Uint8Array, payloadLength: number, recordCount: number, arrowSchema: arrow.Schema, columns: readonly number[], headroom = 0): Cut | undefined {
  if (recordCount === 0) {
    if (payloadLength !== 0) throw corrupt(`${payloadLength} bytes in a batch of no records`);
    checkProjection(columns, arrowSchema.fields.length);
    return undefined;
  }
  if (!Number.isInteger(recordCount) || recordCount < 0 || recordCount >= payloadLength) throw corrupt(`${payloadLength} bytes cannot hold ${recordCount} change types and an Arrow message`);
  const unknown = firstUnknownChange(head.subarray(0, recordCount));
  if (unknown >= 0) throw corrupt(`byte ${head[unknown]} of record ${unknown} is not a change type (+I, -U, +U, -D)`);
  const message = cutArrowPayload(head.subarray(recordCount), payloadLength - recordCount, arrowSchema, columns, headroom + recordCount);
  if (!message) return undefined;
  // The change types go into the headroom right before the projected message.
  const out = new Uint8Array(message.out.buffer, message.out.byteOffset - recordCount, recordCount + message.out.length);
  const copies = [{ from: 0, to: 0, length: recordCount }, ...message.copies.map((c) => ({ from: c.from + recordCount, to: c.to + recordCount, length: c.length }))];
  return { out, copies };
}
