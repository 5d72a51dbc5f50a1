/**
 * The log offsets a lake snapshot holds, recorded in the summary of every snapshot tiering commits:
 *
 *   tributary.table-id       the Tributary table id (a re-created table has a new one)
 *   tributary.tiering-epoch  the epoch of the round that committed it
 *   tributary.bucket-offsets JSON [{ partition_id?, partition_name?, bucket, end_offset, max_timestamp? }]
 *                            for every bucket tiered so far (cumulative), end_offset as a decimal string
 *
 * Each snapshot is self-contained, so the lake alone says how far it goes: after a crash between
 * the lake commit and the report to the coordinator, the next round reads it here and registers
 * it instead of writing the rows again.
 */
import { type LakeBucketOffset, type LakeOffsetJson, lakeOffsetsFromJson, lakeOffsetsToJson } from '../common/lake.js';

export const SUMMARY_TABLE_ID = 'tributary.table-id';
export const SUMMARY_TIERING_EPOCH = 'tributary.tiering-epoch';
export const SUMMARY_BUCKET_OFFSETS = 'tributary.bucket-offsets';

export function bucketOffsetsSummary(offsets: readonly LakeBucketOffset[]): string {
  return JSON.stringify(lakeOffsetsToJson(offsets));
}

export interface TieredSnapshot {
  snapshotId: bigint;
  bucketOffsets: LakeBucketOffset[];
}

/**
 * The newest snapshot of `history` (a snapshot and its ancestors, newest first) that tiering of
 * table `tableId` committed, with its offsets; undefined when the lake holds nothing of this table
 * yet. Compaction snapshots carry the offsets of the snapshot they rewrote, so they count;
 * snapshots of other writers are skipped over.
 */
export function latestTieredSnapshot(history: Iterable<{ snapshotId: bigint; summary: Readonly<Record<string, string>> }>, tableId: number): TieredSnapshot | undefined {
  for (const s of history) {
    if (s.summary[SUMMARY_TABLE_ID] === String(tableId) && s.summary[SUMMARY_BUCKET_OFFSETS] !== undefined) {
      return { snapshotId: s.snapshotId, bucketOffsets: lakeOffsetsFromJson(JSON.parse(s.summary[SUMMARY_BUCKET_OFFSETS]) as LakeOffsetJson[]) };
    }
  }
  return undefined;
}
