/**
 * Server-side column projection of stored log batches (DESIGN.md §3), planned from each batch's
 * first bytes (header, statistics, change types, Arrow metadata), so that a log reader reads of a
 * batch only those and the body buffers of the columns kept, not the whole batch. The projected
 * batch keeps the header's offsets, timestamps and writer fields and the kept buffers' stored
 * bytes (still compressed); statistics are dropped, Length and CRC written anew.
 */
import type * as arrow from 'apache-arrow';
import { arrowPayloadBodyStart } from './arrow-payload.js';
import { cutChangelogPayload } from './changelog.js';
import { HEADER_SIZE, type LogBatchHeader, readLogBatchHeader, reframeLogBatch } from './log-batch.js';
import { type Cut, cutArrowPayload } from './projection.js';

/** A batch's Arrow schema (by its schema id) and which of its columns to keep, in order. */
export interface BatchLayout {
  arrowSchema: arrow.Schema;
  columns: readonly number[];
}

/** A projected batch laid out (header and metadata written) and the copies from the stored batch that complete it. */
export interface BatchCut extends Cut {
  out: Buffer;
}

/**
 * The projection of the stored batch that `head` begins (at most the whole batch), or, when
 * `head` holds fewer bytes than planning needs, how many it needs. Copies count from the first
 * byte of the stored batch and of `out`; once made, `sealLogBatch(out)` completes the batch.
 */
export function cutLogBatch(head: Buffer, layoutOf: (header: LogBatchHeader) => BatchLayout): BatchCut | number {
  if (head.length < HEADER_SIZE) return HEADER_SIZE;
  const header = readLogBatchHeader(head);
  const payloadStart = HEADER_SIZE + header.statisticsLength;
  const payloadLength = header.sizeInBytes - payloadStart;
  if (payloadLength > 0) {
    const messageStart = payloadStart + (header.appendOnly ? 0 : header.recordCount);
    const prefixEnd = Math.min(messageStart + 8, header.sizeInBytes);
    if (head.length < prefixEnd) return prefixEnd;
    const needed = messageStart + arrowPayloadBodyStart(head.subarray(messageStart, prefixEnd), header.sizeInBytes - messageStart);
    if (head.length < needed) return needed;
  }
  const { arrowSchema, columns } = layoutOf(header);
  const payloadHead = head.subarray(payloadStart);
  const cut = header.appendOnly
    ? cutArrowPayload(payloadHead, payloadLength, arrowSchema, columns, HEADER_SIZE)
    : cutChangelogPayload(payloadHead, payloadLength, header.recordCount, arrowSchema, columns, HEADER_SIZE);
  const out = cut ? Buffer.from(cut.out.buffer, cut.out.byteOffset - HEADER_SIZE, HEADER_SIZE + cut.out.length) : Buffer.allocUnsafe(HEADER_SIZE + payloadLength);
  reframeLogBatch(head, out);
  const copies = cut
    ? cut.copies.map((c) => ({ from: c.from + payloadStart, to: c.to + HEADER_SIZE, length: c.length }))
    : payloadLength > 0 ? [{ from: payloadStart, to: HEADER_SIZE, length: payloadLength }] : [];
  return { out, copies };
}
