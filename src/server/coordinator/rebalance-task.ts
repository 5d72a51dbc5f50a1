/**
 * A rebalance task as the active coordinator stores it (MetadataStore path `/cluster/rebalance`,
 * Fluss's `/cluster/rebalance`): one task at a time, replaced by the next one; its plan holds, per
 * bucket, the replicas and leader before and after, and where that bucket's move stands. The task
 * is the moves' record in ZooKeeper: a bucket is REBALANCING from the commit that starts its move to
 * the commit that completes it (reassignment.ts), so a coordinator that takes over carries on.
 *
 *   {version: 1, id, status, goals, created_time, finished_time?,
 *    buckets: [{table_id, partition_id?, bucket, original_replicas, new_replicas, original_leader,
 *               new_leader, status, error?}]}
 *
 * Server tags live beside it (`/tabletservers/server_tags`): {version: 1, tags: {"<server id>": tag}}.
 */
import type { RebalanceGoal, RebalanceStatus, ServerTag } from '../../rpc/cluster-admin.js';
import type { BucketMove } from './reassignment.js';
import { sameReplicas } from './leader-election.js';

export const REBALANCE_PATH = '/cluster/rebalance';
export const SERVER_TAGS_PATH = '/tabletservers/server_tags';

export interface StoredServerTags {
  version: 1;
  tags: Record<string, ServerTag>;
}

export interface StoredRebalanceBucket {
  table_id: number;
  partition_id?: number;
  bucket: number;
  original_replicas: number[];
  new_replicas: number[];
  original_leader: number;
  new_leader: number;
  status: RebalanceStatus;
  error?: string;
}

export interface StoredRebalance {
  version: 1;
  id: string;
  status: RebalanceStatus;
  goals: RebalanceGoal[];
  created_time: number;
  finished_time?: number;
  buckets: StoredRebalanceBucket[];
}

/** Whether the bucket's replicas change (a reassignment), not only its leader. */
export const movesReplicas = (b: StoredRebalanceBucket): boolean => !sameReplicas(b.original_replicas, b.new_replicas);

export const moveOf = (b: StoredRebalanceBucket): BucketMove => ({ origin: b.original_replicas, target: b.new_replicas, leader: b.new_leader });

export const isFinished = (status: RebalanceStatus): boolean => status === 'COMPLETED' || status === 'FAILED' || status === 'CANCELED';

/** A task's status once none of its buckets is left to do: FAILED when one failed, else CANCELED when one was, else COMPLETED. */
export function finishedStatus(buckets: readonly StoredRebalanceBucket[]): RebalanceStatus | undefined {
  if (!buckets.every((b) => isFinished(b.status))) return undefined;
  if (buckets.some((b) => b.status === 'FAILED')) return 'FAILED';
  return buckets.some((b) => b.status === 'CANCELED') ? 'CANCELED' : 'COMPLETED';
}
