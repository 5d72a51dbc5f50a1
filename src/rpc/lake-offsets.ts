/** Lake bucket offsets to and from their protobuf form (PbLakeBucketOffset), and a registered lake snapshot from its answer. */
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { LakeBucketOffset, LakeSnapshot } from '../common/lake.js';
import type { GetLakeSnapshotResponse, PbLakeBucketOffset, PbLakeBucketOffsetSchema } from './gen/tributary_pb.js';

export function toPbLakeOffset(o: LakeBucketOffset): MessageInitShape<typeof PbLakeBucketOffsetSchema> {
  return {
    ...(o.partitionId !== undefined ? { partitionId: BigInt(o.partitionId) } : {}),
    ...(o.partitionName !== undefined ? { partitionName: o.partitionName } : {}),
    bucketId: o.bucket,
    logEndOffset: o.endOffset,
    ...(o.maxTimestamp !== undefined ? { maxTimestamp: BigInt(o.maxTimestamp) } : {}),
  };
}

export function fromPbLakeOffset(o: PbLakeBucketOffset): LakeBucketOffset {
  return {
    ...(o.partitionId !== undefined ? { partitionId: Number(o.partitionId) } : {}),
    ...(o.partitionName !== undefined ? { partitionName: o.partitionName } : {}),
    bucket: o.bucketId,
    endOffset: o.logEndOffset,
    ...(o.maxTimestamp !== undefined ? { maxTimestamp: Number(o.maxTimestamp) } : {}),
  };
}

export function fromPbLakeSnapshot(resp: GetLakeSnapshotResponse): LakeSnapshot {
  return { tableId: Number(resp.tableId), snapshotId: resp.snapshotId, bucketOffsets: resp.bucketOffsets.map(fromPbLakeOffset), commitTimestamp: Number(resp.commitTimestamp) };
}
