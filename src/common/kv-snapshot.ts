/**
 * A KV snapshot handle: what the coordinator registers of a bucket's completed KV snapshot, and
 * what a new leader restores from; and the snapshot's `_METADATA`, which the leader writes and the
 * coordinator reads to know which shared chunks retained snapshots hold. The layout of a bucket's
 * snapshots under `remote.data.dir`, which every server shares, is described in
 * server/tablet/kv/kv-snapshot-store.ts: `<bucket>/snap-<id>/_METADATA` (`metadataPath`) and the
 * chunks of the lmdb copies in `<bucket>/shared/`.
 */
import { TributaryError } from './errors.js';
export interface KvSnapshotHandle {
  /** Counts up per bucket. */
  snapshotId: number;
  /** First changelog offset the snapshot does not contain: recovery replays from it. */
  logOffset: bigint;
  rowCount: number;
  metadataPath: string;
}

/** What a snapshot's `_METADATA` holds. */
export interface KvSnapshotMetadata {
  snapshot_id: number;
  log_offset: string;
  row_count: number;
  created_time: number;
  /** Bytes of the lmdb copy. */
  size: number;
  /** Bytes of each chunk but the last. */
  chunk_size: number;
  /** The copy's chunks in file order, by the hex SHA-256 of their content (absent in snapshots from before chunks, which keep a whole `data.mdb`). */
  chunks: string[];
}

/** The bucket's snapshot location of a snapshot's `_METADATA` location. */
export function snapshotBucketLocation(metadataPath: string): string {
  return metadataPath.replace(/\/+[^/]+\/+[^/]+$/, '');
}

/** Where the chunks shared by a bucket's snapshots are. */
export function sharedChunksLocation(bucketLocation: string): string {
  return `${bucketLocation.replace(/\/+$/, '')}/shared`;
}

export function parseKvSnapshotMetadata(bytes: Uint8Array, location: string): KvSnapshotMetadata {
  try {
    return JSON.parse(Buffer.from(bytes).toString('utf8')) as KvSnapshotMetadata;
  } catch (err) {
    throw new TributaryError('KV_STORAGE_EXCEPTION', `KV snapshot metadata ${location} is not JSON: ${(err as Error).message}`);
  }
}
