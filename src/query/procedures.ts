/**
 * The procedures of `CALL sys.<procedure>(...)`: cluster administration, named and shaped as
 * Fluss's Flink procedures, each an Admin call. Arguments are strings (or numbers), by position or
 * as `name => value`; lists are comma-separated.
 *
 *   add_server_tag(tabletServers, serverTag)       tags servers ('0,1', 'PERMANENT_OFFLINE')
 *   remove_server_tag(tabletServers, serverTag)    takes the tag off
 *   rebalance(priorityGoals)                       starts a rebalance ('REPLICA_DISTRIBUTION,LEADER_DISTRIBUTION'); its id
 *   list_rebalance([rebalanceId])                  the task and its buckets, one row each
 *   cancel_rebalance([rebalanceId])                cancels the running task
 */
import { TributaryError } from '../common/errors.js';
import type { Admin, RebalanceGoal, ServerTag } from '../client/admin.js';
import type { QueryResult } from './duckdb/result.js';

interface Procedure {
  params: { name: string; required: boolean }[];
  run(admin: Admin, args: Map<string, string>): Promise<{ message?: string; result?: QueryResult }>;
}

const list = (value: string): string[] =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v.length > 0);

function serverIds(value: string): number[] {
  const ids = list(value).map(Number);
  if (ids.length === 0 || ids.some((id) => !Number.isInteger(id) || id < 0)) throw new TributaryError('INVALID_ARGUMENT', `tabletServers '${value}' is not a comma-separated list of tablet server ids`);
  return ids;
}

const tag = (value: string): ServerTag => value.trim().toUpperCase() as ServerTag;

const PROCEDURES: Record<string, Procedure> = {
  add_server_tag: {
    params: [
      { name: 'tabletServers', required: true },
      { name: 'serverTag', required: true },
    ],
    run: async (admin, args) => {
      const ids = serverIds(args.get('tabletServers')!);
      await admin.addServerTag(ids, tag(args.get('serverTag')!));
      return { message: `Tablet server(s) ${ids.join(', ')} tagged ${tag(args.get('serverTag')!)}.` };
    },
  },
  remove_server_tag: {
    params: [
      { name: 'tabletServers', required: true },
      { name: 'serverTag', required: true },
    ],
    run: async (admin, args) => {
      const ids = serverIds(args.get('tabletServers')!);
      await admin.removeServerTag(ids, tag(args.get('serverTag')!));
      return { message: `Tag ${tag(args.get('serverTag')!)} removed from tablet server(s) ${ids.join(', ')}.` };
    },
  },
  rebalance: {
    params: [{ name: 'priorityGoals', required: true }],
    run: async (admin, args) => {
      const id = await admin.rebalance(list(args.get('priorityGoals')!).map((g) => g.toUpperCase() as RebalanceGoal));
      return { result: { columns: [{ name: 'rebalance_id', type: 'VARCHAR' }], rows: [[id]] } };
    },
  },
  list_rebalance: {
    params: [{ name: 'rebalanceId', required: false }],
    run: async (admin, args) => {
      const p = await admin.listRebalanceProgress(args.get('rebalanceId'));
      const task = [p.rebalanceId, p.status];
      const buckets = p.buckets.map((b) => [...task, b.tableId, b.partitionId ?? null, b.bucket, b.originalReplicas, b.newReplicas, b.originalLeader, b.newLeader, b.status, b.error ?? null]);
      return {
        result: {
          columns: [
            { name: 'rebalance_id', type: 'VARCHAR' },
            { name: 'rebalance_status', type: 'VARCHAR' },
            { name: 'table_id', type: 'BIGINT' },
            { name: 'partition_id', type: 'BIGINT' },
            { name: 'bucket', type: 'INTEGER' },
            { name: 'original_replicas', type: 'INTEGER[]' },
            { name: 'new_replicas', type: 'INTEGER[]' },
            { name: 'original_leader', type: 'INTEGER' },
            { name: 'new_leader', type: 'INTEGER' },
            { name: 'status', type: 'VARCHAR' },
            { name: 'error', type: 'VARCHAR' },
          ],
          // A task with nothing to move still shows itself.
          rows: buckets.length > 0 ? buckets : [[...task, null, null, null, null, null, null, null, null, null]],
        },
      };
    },
  },
  cancel_rebalance: {
    params: [{ name: 'rebalanceId', required: false }],
    run: async (admin, args) => {
      await admin.cancelRebalance(args.get('rebalanceId'));
      return { message: 'Rebalance cancelled.' };
    },
  },
};

/** Runs `CALL sys.<procedure>(args)`; INVALID_ARGUMENT for an unknown procedure or arguments it does not take. */
export async function callProcedure(admin: Admin, procedure: string, args: readonly { name?: string; value: string }[]): Promise<{ message?: string; result?: QueryResult }> {
  const p = PROCEDURES[procedure];
  if (!p) throw new TributaryError('INVALID_ARGUMENT', `no procedure sys.${procedure}: there are ${Object.keys(PROCEDURES).map((n) => `sys.${n}`).join(', ')}`);
  const signature = `sys.${procedure}(${p.params.map((q) => (q.required ? q.name : `[${q.name}]`)).join(', ')})`;
  if (args.length > p.params.length) throw new TributaryError('INVALID_ARGUMENT', `${signature} takes at most ${p.params.length} argument(s), not ${args.length}`);
  const values = new Map<string, string>();
  args.forEach((a, i) => {
    const param = a.name === undefined ? p.params[i] : p.params.find((q) => q.name.toLowerCase() === a.name!.toLowerCase());
    if (!param) throw new TributaryError('INVALID_ARGUMENT', `${signature} has no argument '${a.name}'`);
    if (values.has(param.name)) throw new TributaryError('INVALID_ARGUMENT', `${signature}: '${param.name}' is given twice`);
    values.set(param.name, a.value);
  });
  const missing = p.params.filter((q) => q.required && !values.has(q.name));
  if (missing.length > 0) throw new TributaryError('INVALID_ARGUMENT', `${signature} needs ${missing.map((q) => q.name).join(', ')}`);
  return p.run(admin, values);
}
