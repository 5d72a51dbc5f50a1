/**
 * A KV snapshot handle: what the coordinator registers of a bucket's completed KV snapshot, and
 * what a new leader restores from. The snapshot's files (an lmdb copy and its `_METADATA`) are the
 * directory holding `metadataPath`, under `remote.data.dir`, which every server shares.
 */
export interface KvSnapshotHandle {
  /** Counts up per bucket. */
  snapshotId: number;
  /** First changelog offset the snapshot does not contain: recovery replays from it. */
  logOffset: bigint;
  rowCount: number;
  metadataPath: string;
}
