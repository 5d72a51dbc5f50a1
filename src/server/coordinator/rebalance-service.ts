/**
 * The cluster administration APIs of the active coordinator (Fluss's ids): AddServerTag (1047),
 * RemoveServerTag (1048), Rebalance (1049), ListRebalanceProgress (1050) and CancelRebalance (1051).
 * Turns their messages into ClusterController calls; enumerations travel as Fluss numbers them
 * (rpc/cluster-admin.ts).
 */
import { type Api, ApiKeys } from '../../rpc/api-keys.js';
import { codeOf, nameOf, REBALANCE_GOALS, REBALANCE_STATUSES, SERVER_TAGS } from '../../rpc/cluster-admin.js';
import { fieldError } from '../../rpc/request-fields.js';
import type { ApiRegistrar } from '../../rpc/server.js';
import type { ClusterController } from './cluster-controller.js';

function serverIds(api: Api, ids: readonly number[]): number[] {
  if (ids.length === 0) throw fieldError(api, 'server_ids', 'must name at least one tablet server');
  return [...new Set(ids)];
}

export function registerRebalanceService(rpc: ApiRegistrar, controller: ClusterController): void {
  rpc.register(ApiKeys.AddServerTag, async (req) => {
    await controller.addServerTag(serverIds(ApiKeys.AddServerTag, req.serverIds), nameOf(SERVER_TAGS, req.serverTag, 'server tag'));
    return {};
  });
  rpc.register(ApiKeys.RemoveServerTag, async (req) => {
    await controller.removeServerTag(serverIds(ApiKeys.RemoveServerTag, req.serverIds), nameOf(SERVER_TAGS, req.serverTag, 'server tag'));
    return {};
  });
  rpc.register(ApiKeys.Rebalance, async (req) => {
    const goals = req.goals.length > 0 ? [...new Set(req.goals.map((g) => nameOf(REBALANCE_GOALS, g, 'rebalance goal')))] : [...REBALANCE_GOALS];
    return { rebalanceId: await controller.rebalance(goals) };
  });
  rpc.register(ApiKeys.ListRebalanceProgress, async (req) => {
    const task = controller.rebalanceProgress(req.rebalanceId);
    return {
      rebalanceId: task.id,
      status: codeOf(REBALANCE_STATUSES, task.status, 'rebalance status'),
      goals: task.goals.map((g) => codeOf(REBALANCE_GOALS, g, 'rebalance goal')),
      createdTime: BigInt(task.created_time),
      ...(task.finished_time !== undefined ? { finishedTime: BigInt(task.finished_time) } : {}),
      buckets: task.buckets.map((b) => ({
        tableId: BigInt(b.table_id),
        ...(b.partition_id !== undefined ? { partitionId: BigInt(b.partition_id) } : {}),
        bucketId: b.bucket,
        originalReplicas: b.original_replicas,
        newReplicas: b.new_replicas,
        originalLeader: b.original_leader,
        newLeader: b.new_leader,
        status: codeOf(REBALANCE_STATUSES, b.status, 'rebalance status'),
        ...(b.error !== undefined ? { errorMessage: b.error } : {}),
      })),
    };
  });
  rpc.register(ApiKeys.CancelRebalance, async (req) => {
    await controller.cancelRebalance(req.rebalanceId);
    return {};
  });
}
