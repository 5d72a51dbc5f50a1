/**
 * What the lake holds of a table, as the coordinator registers it and clients read it: per bucket,
 * the first log offset not yet in the lake.
 */
export interface LakeBucketOffset {
  partitionId?: number;
  partitionName?: string;
  bucket: number;
  /** First log offset of the bucket that the lake does not hold. */
  endOffset: bigint;
  /** Newest commit timestamp (ms) of the rows the lake holds. */
  maxTimestamp?: number;
}

export interface LakeSnapshot {
  tableId: number;
  /** The Iceberg snapshot id. */
  snapshotId: bigint;
  bucketOffsets: LakeBucketOffset[];
  /** When the coordinator registered the snapshot (ms). */
  commitTimestamp: number;
}

/** The key of a (partition, bucket) in maps of lake offsets. */
export function lakeBucketKey(o: { partitionId?: number; bucket: number }): string {
  return `${o.partitionId ?? '-'}/${o.bucket}`;
}
