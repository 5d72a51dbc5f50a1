/**
 * The registered KV snapshots of every primary-key bucket (Fluss's completed snapshot handles), in
 * the coordinator's MetadataStore: ZooKeeper in a cluster, the local store on the one-process
 * node, through this one class. A bucket's leader writes a snapshot's files completely, then
 * commits its handle (CommitKvSnapshot); a new leader restores the newest registered one. Nothing
 * is kept in memory: a coordinator that takes over reads the same handles.
 *
 * Store layout:
 *   /kv_snapshots/<tableId>/<partitionId|->/<bucket>/<snapshotId>
 *       {version: 1, snapshot_id, log_offset (decimal text), row_count, metadata_path}
 *
 * A commit is fenced: a coordinator epoch other than this coordinator's is INVALID_COORDINATOR_EXCEPTION,
 * a leader epoch below the bucket's FENCED_LEADER_EPOCH_EXCEPTION (checked in the order of
 * leadership changes, so that a deposed leader's commit never lands after its successor's). It
 * keeps the newest `kv.snapshot.num-retained` handles and then deletes, through the storage layer
 * (remote.data.dir may be s3://), the files of those it dropped, of the bucket's snapshots no
 * handle names (leftovers of snapshots never committed) and the shared chunks no retained
 * snapshot holds (kv-snapshot-store.ts). The committing leader takes one snapshot at a time, so
 * none is still being uploaded by a current leader.
 */
import path from 'node:path';
import { TributaryError } from '../../common/errors.js';
import { type KvSnapshotHandle, parseKvSnapshotMetadata, sharedChunksLocation, snapshotBucketLocation } from '../../common/kv-snapshot.js';
import type { Logger } from '../../common/logger.js';
import { baseName, joinLocation } from '../../storage/object-store.js';
import { objectStoreFor } from '../../storage/stores.js';
import type { MetadataOp, MetadataStore } from '../metadata/metadata-store.js';

export interface SnapshotBucket {
  tableId: number;
  partitionId?: number;
  bucket: number;
}

/** What a commit is fenced by: the coordinator's epoch, and each bucket's leader epoch. */
export interface BucketFence {
  readonly coordinatorEpoch: number;
  /**
   * Runs `work` once `leaderEpoch` is checked to be the bucket's current one (else
   * FENCED_LEADER_EPOCH_EXCEPTION), in the order of the bucket's leadership changes.
   */
  whileLeading<T>(bucket: SnapshotBucket, leaderEpoch: number, work: () => Promise<T>): Promise<T>;
}

/** The one-process node: coordinator epoch 0, and every bucket led at leader epoch 0 by the node itself. */
export const ONE_NODE_FENCE: BucketFence = {
  coordinatorEpoch: 0,
  whileLeading: (bucket, leaderEpoch, work) => {
    if (leaderEpoch !== 0) return Promise.reject(fencedLeader(bucket, leaderEpoch, 0));
    return work();
  },
};

export interface KvSnapshotCommit {
  bucket: SnapshotBucket;
  snapshot: KvSnapshotHandle;
  leaderEpoch: number;
  coordinatorEpoch: number;
}

interface StoredHandle {
  version: 1;
  snapshot_id: number;
  log_offset: string;
  row_count: number;
  metadata_path: string;
}

const tableDir = (tableId: number): string => `/kv_snapshots/${tableId}`;
const bucketDir = (b: SnapshotBucket): string => `${tableDir(b.tableId)}/${b.partitionId ?? '-'}/${b.bucket}`;

export function fencedLeader(bucket: SnapshotBucket, leaderEpoch: number, current: number): TributaryError {
  return new TributaryError(
    'FENCED_LEADER_EPOCH_EXCEPTION',
    `bucket ${bucket.bucket} of table ${bucket.tableId}${bucket.partitionId !== undefined ? ` (partition ${bucket.partitionId})` : ''}: leader epoch ${leaderEpoch} is not the current ${current}`,
  );
}

export class KvSnapshotRegistry {
  constructor(
    private readonly store: MetadataStore,
    private readonly numRetained: number,
    private readonly log: Logger,
  ) {}

  /** The bucket's registered handles, oldest first. */
  handles(bucket: SnapshotBucket): KvSnapshotHandle[] {
    const dir = bucketDir(bucket);
    return this.store
      .children(dir)
      .map(Number)
      .sort((a, b) => a - b)
      .map((id) => fromStored(this.store.get<StoredHandle>(`${dir}/${id}`)!));
  }

  latest(bucket: SnapshotBucket): KvSnapshotHandle | undefined {
    return this.handles(bucket).at(-1);
  }

  /** Registers a snapshot whose files are complete, under `fence`; then removes what retention dropped. */
  async commit(request: KvSnapshotCommit, fence: BucketFence): Promise<void> {
    const { bucket, snapshot, leaderEpoch, coordinatorEpoch } = request;
    if (coordinatorEpoch !== fence.coordinatorEpoch) {
      throw new TributaryError('INVALID_COORDINATOR_EXCEPTION', `coordinator epoch ${coordinatorEpoch} is not this coordinator's ${fence.coordinatorEpoch}`);
    }
    // The files go in the same turn: no later leader can have begun a snapshot of the bucket meanwhile.
    await fence.whileLeading(bucket, leaderEpoch, async () => {
      const handles = this.handles(bucket);
      const newest = handles.at(-1);
      if (newest && newest.snapshotId === snapshot.snapshotId && newest.metadataPath === snapshot.metadataPath) return; // a retried commit
      if (newest && newest.snapshotId >= snapshot.snapshotId) {
        throw new TributaryError('INVALID_ARGUMENT', `KV snapshot ${snapshot.snapshotId} of bucket ${bucket.bucket} is not newer than the registered ${newest.snapshotId}`);
      }
      const all = [...handles, snapshot];
      const drop = all.slice(0, Math.max(0, all.length - this.numRetained));
      const ops: MetadataOp[] = [
        { op: 'put', path: `${bucketDir(bucket)}/${snapshot.snapshotId}`, value: toStored(snapshot) },
        ...drop.map((h): MetadataOp => ({ op: 'delete', path: `${bucketDir(bucket)}/${h.snapshotId}` })),
      ];
      await this.store.commit(ops);
      await this.removeUnregistered(bucket, snapshot, drop);
    });
  }

  /** Store operations that forget the handles of a dropped table, or of one of its partitions. */
  dropOps(tableId: number, partitionId?: number): MetadataOp[] {
    return [{ op: 'delete', path: partitionId === undefined ? tableDir(tableId) : `${tableDir(tableId)}/${partitionId}`, recursive: true }];
  }

  /**
   * Deletes, through the storage layer, the snapshots of the bucket that no retained handle names,
   * and the shared chunks no retained snapshot holds.
   */
  private async removeUnregistered(bucket: SnapshotBucket, committed: KvSnapshotHandle, dropped: KvSnapshotHandle[]): Promise<void> {
    const kept = this.handles(bucket);
    const keptDirs = new Set(kept.map((h) => snapshotDirOf(h)));
    const bucketLocation = snapshotBucketLocation(committed.metadataPath);
    const store = objectStoreFor(bucketLocation);
    const warn = (err: unknown, location: string, what: string): void => this.log.warn({ err, location }, `could not ${what}`);
    try {
      const candidates = new Set(dropped.map((h) => snapshotDirOf(h)));
      for (const name of await store.listDirectories(bucketLocation)) if (name.startsWith('snap-')) candidates.add(joinLocation(bucketLocation, name));
      for (const dir of candidates) if (!keptDirs.has(dir)) await store.deleteDirectory(dir).catch((err: unknown) => warn(err, dir, 'remove an unregistered KV snapshot'));
      const held = new Set<string>();
      for (const h of kept) {
        const bytes = await store.get(h.metadataPath);
        // A retained snapshot whose metadata cannot be read: keep every chunk rather than guess.
        if (!bytes) return;
        for (const hash of parseKvSnapshotMetadata(bytes, h.metadataPath).chunks ?? []) held.add(hash);
      }
      const unheld = (await store.list(sharedChunksLocation(bucketLocation))).map((o) => o.location).filter((l) => !held.has(baseName(l)));
      if (unheld.length > 0) await store.deleteMany(unheld);
    } catch (err) {
      warn(err, bucketLocation, 'remove the KV snapshot files retention dropped');
    }
  }
}

/** The location of the snapshot a handle names: the directory of its `_METADATA`. */
const snapshotDirOf = (h: KvSnapshotHandle): string => path.posix.dirname(h.metadataPath);

function toStored(h: KvSnapshotHandle): StoredHandle {
  return { version: 1, snapshot_id: h.snapshotId, log_offset: h.logOffset.toString(), row_count: h.rowCount, metadata_path: h.metadataPath };
}

function fromStored(s: StoredHandle): KvSnapshotHandle {
  return { snapshotId: s.snapshot_id, logOffset: BigInt(s.log_offset), rowCount: s.row_count, metadataPath: s.metadata_path };
}
