/**
 * The enumerations of the cluster administration APIs (AddServerTag 1047 … CancelRebalance 1051),
 * as Fluss numbers them on the wire: the int32 fields of those messages are indexes into these
 * lists. Server, client and SQL use the names.
 */
import { TributaryError } from '../common/errors.js';

/** PERMANENT_OFFLINE: every replica moves off the server (a drain); TEMPORARY_OFFLINE: only its leaderships move off. */
export const SERVER_TAGS = ['PERMANENT_OFFLINE', 'TEMPORARY_OFFLINE'] as const;
export type ServerTag = (typeof SERVER_TAGS)[number];

/** REPLICA_DISTRIBUTION: even replica counts, rack-aware, honouring tags; LEADER_DISTRIBUTION: each bucket led by its preferred (first) replica. */
export const REBALANCE_GOALS = ['REPLICA_DISTRIBUTION', 'LEADER_DISTRIBUTION'] as const;
export type RebalanceGoal = (typeof REBALANCE_GOALS)[number];

/** Of a rebalance task and of each of its buckets. */
export const REBALANCE_STATUSES = ['NOT_STARTED', 'REBALANCING', 'COMPLETED', 'FAILED', 'CANCELED'] as const;
export type RebalanceStatus = (typeof REBALANCE_STATUSES)[number];

/** The wire number of a name of `names`, or `invalid` (an error named for its API) for an unknown name. */
export function codeOf<T extends string>(names: readonly T[], name: string, what: string): number {
  const code = names.indexOf(name.toUpperCase() as T);
  if (code < 0) throw new TributaryError('INVALID_ARGUMENT', `'${name}' is not a ${what}: one of ${names.join(', ')}`);
  return code;
}

/** The name of a wire number of `names`; INVALID_ARGUMENT for a number outside them. */
export function nameOf<T extends string>(names: readonly T[], code: number, what: string): T {
  const name = names[code];
  if (name === undefined) throw new TributaryError('INVALID_ARGUMENT', `${code} is not a ${what}: 0..${names.length - 1} (${names.join(', ')})`);
  return name;
}
