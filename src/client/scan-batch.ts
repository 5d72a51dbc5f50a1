import type * as arrow from 'apache-arrow';

/**
 * A decoded log batch: the columnar form of what `poll` returns row by row. Its own file because
 * the lake backfill makes them too, and the log scanner (which exports it with its other types)
 * imports the backfill.
 */
export interface ScanBatch {
  bucket: number;
  partition?: string;
  /** Offset of the batch's first row (rows before the subscribed offset are already cut off). */
  baseOffset: bigint;
  timestamp: number;
  batch: arrow.RecordBatch;
  /** One change type byte per row for primary-key tables' changelog; absent for log tables (+A). */
  changeTypes?: Uint8Array;
}
