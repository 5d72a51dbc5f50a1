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

/**
 * The system columns every lake table appends after the table's columns (bucket, log offset, commit
 * timestamp); no table column may take these names once the table has a lake, and none added later.
 */
export const LAKE_SYSTEM_COLUMNS = ['__bucket', '__offset', '__timestamp'] as const;

/** Whether `name` is a lake system column's, compared case-insensitively as engines do. */
export function isLakeSystemColumn(name: string): boolean {
  return (LAKE_SYSTEM_COLUMNS as readonly string[]).includes(name.toLowerCase());
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

/**
 * Bucket offsets as JSON, the form the metadata store and the lake's snapshot summaries keep:
 * `[{ partition_id?, partition_name?, bucket, end_offset, max_timestamp? }]`, end offsets as
 * decimal strings (exact beyond 2^53).
 */
export interface LakeOffsetJson {
  partition_id?: number;
  partition_name?: string;
  bucket: number;
  end_offset: string;
  max_timestamp?: number;
}

export function lakeOffsetsToJson(offsets: readonly LakeBucketOffset[]): LakeOffsetJson[] {
  return offsets.map((o) => ({
    ...(o.partitionId !== undefined ? { partition_id: o.partitionId } : {}),
    ...(o.partitionName !== undefined ? { partition_name: o.partitionName } : {}),
    bucket: o.bucket,
    end_offset: o.endOffset.toString(),
    ...(o.maxTimestamp !== undefined ? { max_timestamp: o.maxTimestamp } : {}),
  }));
}

export function lakeOffsetsFromJson(json: readonly LakeOffsetJson[]): LakeBucketOffset[] {
  return json.map((o) => ({
    ...(o.partition_id !== undefined ? { partitionId: o.partition_id } : {}),
    ...(o.partition_name !== undefined ? { partitionName: o.partition_name } : {}),
    bucket: o.bucket,
    endOffset: BigInt(o.end_offset),
    ...(o.max_timestamp !== undefined ? { maxTimestamp: o.max_timestamp } : {}),
  }));
}
