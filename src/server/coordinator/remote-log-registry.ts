/**
 * The committed remote log of every bucket (Fluss's `remote_logs` znodes), in the coordinator's
 * MetadataStore: ZooKeeper in a cluster, the local store on the one-process node, through this one
 * class, as KvSnapshotRegistry keeps KV snapshot handles. A bucket's leader uploads segments, then
 * a manifest naming them, then commits the manifest's handle (CommitRemoteLogManifest); only then
 * may local segments below the remote end go. A new leader continues from the committed handle.
 *
 * Store layout:
 *   /remote_logs/<tableId>/<partitionId|->/<bucket>
 *       {version: 1, manifest_path, remote_log_start_offset, remote_log_end_offset (decimal text)}
 *
 * A commit is fenced as a KV snapshot's is (coordinator epoch, then the bucket's leader epoch in
 * the order of leadership changes), and the remote end never moves back: a manifest ending below
 * the committed one is INVALID_ARGUMENT (it would forget segments a replica may have deleted).
 */
import { TributaryError } from '../../common/errors.js';
import type { RemoteLogHandle } from '../../common/remote-log.js';
import type { MetadataOp, MetadataStore } from '../metadata/metadata-store.js';
import type { BucketFence, SnapshotBucket } from './kv-snapshot-registry.js';

export interface RemoteLogCommit {
  bucket: SnapshotBucket;
  manifest: RemoteLogHandle;
  leaderEpoch: number;
  coordinatorEpoch: number;
}

interface StoredHandle {
  version: 1;
  manifest_path: string;
  remote_log_start_offset: string;
  remote_log_end_offset: string;
}

const tableDir = (tableId: number): string => `/remote_logs/${tableId}`;
const bucketPath = (b: SnapshotBucket): string => `${tableDir(b.tableId)}/${b.partitionId ?? '-'}/${b.bucket}`;

export class RemoteLogRegistry {
  constructor(private readonly store: MetadataStore) {}

  /** The bucket's committed remote log, if it has one. */
  latest(bucket: SnapshotBucket): RemoteLogHandle | undefined {
    const s = this.store.get<StoredHandle>(bucketPath(bucket));
    return s && { manifestPath: s.manifest_path, remoteLogStartOffset: BigInt(s.remote_log_start_offset), remoteLogEndOffset: BigInt(s.remote_log_end_offset) };
  }

  /** Registers a manifest whose segments and own object are uploaded, under `fence`. */
  async commit(request: RemoteLogCommit, fence: BucketFence): Promise<void> {
    const { bucket, manifest, leaderEpoch, coordinatorEpoch } = request;
    if (coordinatorEpoch !== fence.coordinatorEpoch) {
      throw new TributaryError('INVALID_COORDINATOR_EXCEPTION', `coordinator epoch ${coordinatorEpoch} is not this coordinator's ${fence.coordinatorEpoch}`);
    }
    if (manifest.remoteLogStartOffset > manifest.remoteLogEndOffset) {
      throw new TributaryError('INVALID_ARGUMENT', `remote log manifest of bucket ${bucket.bucket} starts at ${manifest.remoteLogStartOffset}, past its end ${manifest.remoteLogEndOffset}`);
    }
    await fence.whileLeading(bucket, leaderEpoch, async () => {
      const current = this.latest(bucket);
      if (current && manifest.remoteLogEndOffset < current.remoteLogEndOffset) {
        throw new TributaryError('INVALID_ARGUMENT', `remote log manifest of bucket ${bucket.bucket} ends at ${manifest.remoteLogEndOffset}, below the committed ${current.remoteLogEndOffset}`);
      }
      const value: StoredHandle = {
        version: 1,
        manifest_path: manifest.manifestPath,
        remote_log_start_offset: manifest.remoteLogStartOffset.toString(),
        remote_log_end_offset: manifest.remoteLogEndOffset.toString(),
      };
      await this.store.commit([{ op: 'put', path: bucketPath(bucket), value }]);
    });
  }

  /** Store operations that forget the remote logs of a dropped table, or of one of its partitions. */
  dropOps(tableId: number, partitionId?: number): MetadataOp[] {
    return [{ op: 'delete', path: partitionId === undefined ? tableDir(tableId) : `${tableDir(tableId)}/${partitionId}`, recursive: true }];
  }
}
