/**
 * A batch of rows bound for one bucket: open while rows are added to its content, then closed into
 * wire bytes with its bucket sequence, and kept until acknowledged.
 */

/** What a batch accumulates (Arrow columns for log tables, KV records for primary-key tables). */
export interface BatchContent {
  readonly rowCount: number;
  readonly estimatedSizeInBytes: number;
}

export interface BucketTarget {
  partitionId?: number;
  bucket: number;
  /** `<partitionId>/<bucket>`: the accumulator's and sender's map key. */
  key: string;
}

export function bucketTarget(partitionId: number | undefined, bucket: number): BucketTarget {
  return { ...(partitionId !== undefined ? { partitionId } : {}), bucket, key: `${partitionId ?? '-'}/${bucket}` };
}

export class WriteBatch<C extends BatchContent = BatchContent> {
  /** Buffer memory this batch holds, released when it is acknowledged. */
  reservedBytes = 0;
  sequence = -1;
  attempts = 0;
  /** When its first row came (ms), for client.writer.delivery-timeout. */
  readonly createdMs = Date.now();
  bytes: Buffer = Buffer.alloc(0);
  lingerTimer?: NodeJS.Timeout;

  constructor(
    readonly target: BucketTarget,
    /** What the batch accumulates while open; once it is encoded, its writer may reuse it. */
    readonly content: C,
  ) {}
}
