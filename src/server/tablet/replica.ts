/**
 * A bucket hosted by this tablet server: its identity, its table, its log and its place in the
 * bucket's replica set. On one node (`tributary start`) every replica is the leader with leader epoch
 * 0 and the server is its only replica. In a cluster the coordinator makes each replica leader or
 * follower (NotifyLeaderAndIsr): the leader serves clients and tracks its followers (LeaderState),
 * a follower copies the leader's log (ReplicaFetcher). Primary-key tables hold their KvTablet while
 * leader, or in standby mode while the follower the coordinator names the bucket's standby.
 */
import type { RemoteLogHandle } from '../../common/remote-log.js';
import type { PartitionInfo, TableInfo } from '../../common/schema.js';
import type { KvSnapshotStore } from './kv/kv-snapshot-store.js';
import type { KvTablet } from './kv/kv-tablet.js';
import type { LeaderState } from './leader-state.js';
import type { LogTablet } from './log/log-tablet.js';

export interface TableBucket {
  tableId: number;
  partitionId?: number;
  bucket: number;
}

export function bucketKey(b: TableBucket): string {
  return `${b.tableId}/${b.partitionId ?? '-'}/${b.bucket}`;
}

export interface Replica {
  bucket: TableBucket;
  table: TableInfo;
  partition?: PartitionInfo;
  log: LogTablet;
  /** The bucket's current state, for primary-key tables while this replica leads (or, warm and serving nothing, while it stands by). */
  kv?: KvTablet;
  /** Where the bucket's KV snapshots are (remote.data.dir, shared by every server) and the newest registered one, for primary-key tables. */
  snapshots?: KvSnapshotStore;
  role: 'leader' | 'follower';
  /** The server that leads the bucket. */
  leaderId: number;
  leaderEpoch: number;
  /** Every replica of the bucket, in assignment order. */
  replicas: number[];
  /** The in-sync replicas: the leader and the followers that keep up with it. */
  isr: number[];
  /** Version of the bucket's leader and ISR at the coordinator, which an ISR change names. */
  bucketEpoch: number;
  /** Set while this replica leads the bucket in a cluster. */
  leader?: LeaderState;
  /** First log offset the lake does not hold (lake-enabled tables); retention keeps everything from it. */
  lakeEndOffset?: bigint;
  /** The bucket's committed remote log as this replica last learned it (remote.data.dir set): local segments below its end may go. */
  remoteLog?: RemoteLogHandle;
}
