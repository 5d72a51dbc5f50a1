/**
 * A batch of rows bound for one bucket: open while rows are appended into its column builder,
 * then closed into log batch bytes with its bucket sequence, and kept until acknowledged.
 */
import type { ColumnBatchBuilder } from '../record/column-batch-builder.js';

export interface BucketTarget {
  partitionId?: number;
  bucket: number;
  /** `<partitionId>/<bucket>`: the accumulator's and sender's map key. */
  key: string;
}

export function bucketTarget(partitionId: number | undefined, bucket: number): BucketTarget {
  return { ...(partitionId !== undefined ? { partitionId } : {}), bucket, key: `${partitionId ?? '-'}/${bucket}` };
}

export class WriteBatch {
  /** Buffer memory this batch holds, released when it is acknowledged. */
  reservedBytes = 0;
  sequence = -1;
  attempts = 0;
  bytes: Buffer = Buffer.alloc(0);
  lingerTimer?: NodeJS.Timeout;

  constructor(
    readonly target: BucketTarget,
    readonly builder: ColumnBatchBuilder,
  ) {}
}
