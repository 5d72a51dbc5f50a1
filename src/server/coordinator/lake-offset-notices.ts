/**
 * What the lake holds of each lake-enabled table's buckets, as the active coordinator last
 * registered it, turned into the NotifyLakeTableOffset requests its replicas get (Fluss's
 * NOTIFY_LAKE_TABLE_OFFSET): after each registered lake snapshot, and with every NotifyLeaderAndIsr
 * (a server that joins, returns or becomes a replica learns the offsets of its buckets). A tablet
 * server deletes log segments of a lake-enabled table only below these offsets, so retention on a
 * cluster frees what the lake holds and nothing else, as on the one-process node.
 *
 * A coordinator that takes over learns every table's offsets from ZooKeeper when its tiering
 * manager starts, and sends them with its own epoch: the deposed one's requests are refused.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { type LakeBucketOffset, lakeBucketKey } from '../../common/lake.js';
import type { PbNotifyLakeTableOffsetForTableSchema } from '../../rpc/gen/tributary_pb.js';
import { toPbLakeOffset } from '../../rpc/lake-offsets.js';

type TableOffsets = MessageInitShape<typeof PbNotifyLakeTableOffsetForTableSchema>;

/** A bucket of a table or of one of its partitions. */
export interface LakeBucketRef {
  tableId: number;
  partitionId?: number;
  bucket: number;
}

export class LakeOffsetNotices {
  private readonly byTable = new Map<number, Map<string, LakeBucketOffset>>();

  /** The table's registered offsets (every tiered bucket): they replace what was known. */
  set(tableId: number, offsets: readonly LakeBucketOffset[]): void {
    this.byTable.set(tableId, new Map(offsets.map((o) => [lakeBucketKey(o), o])));
  }

  /** The table was dropped. */
  drop(tableId: number): void {
    this.byTable.delete(tableId);
  }

  /** The `tables` of a NotifyLakeTableOffset for these buckets; empty when the lake holds none of them. */
  tablesOf(buckets: readonly LakeBucketRef[]): TableOffsets[] {
    const out = new Map<number, ReturnType<typeof toPbLakeOffset>[]>();
    for (const b of buckets) {
      const offset = this.byTable.get(b.tableId)?.get(lakeBucketKey(b));
      if (!offset) continue;
      const offsets = out.get(b.tableId) ?? [];
      offsets.push(toPbLakeOffset(offset));
      out.set(b.tableId, offsets);
    }
    return [...out].map(([tableId, bucketOffsets]) => ({ tableId: BigInt(tableId), bucketOffsets }));
  }
}
