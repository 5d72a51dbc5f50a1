/**
 * Requests about buckets (produce, fetch, lookups, scans, offsets, stats) go to each bucket's
 * leader: the buckets of one request are grouped by the leader the metadata cache names, and each
 * group goes to its tablet server as one request, all groups at once.
 *
 * An answer that says the client's view is stale (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS,
 * a bucket the server does not host while the table still exists, no leader, a closed connection, a
 * timeout) drops the table's cached leaders; the caller backs off and sends the bucket again, to the
 * leader the coordinator names then. Reads do so here until `client.request-timeout`
 * (requestLeaders); writers and scanners keep their own retry loops and use one round at a time
 * (roundToLeaders).
 */
import { asTributaryError, type ErrorName, errorFromCode, TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { RpcConnection } from '../rpc/connection.js';
import type { ConnectionCore } from './connection-core.js';
import { hasError } from './responses.js';

/** A bucket of the table a request is about; `partitionId` for partitioned tables. */
export interface BucketAddress {
  partitionId?: number;
  bucket: number;
}

/** A bucket's part of a response. */
export interface BucketAnswer {
  errorCode?: number;
  errorMessage?: string;
}

/** What one bucket got in a round: its answer (which may carry an error), or the error its request failed with. */
export type Outcome<R> = R | TributaryError;

/** Answers to `buckets`, in their order, from the tablet server leading them (`rpc`, node `leader`). */
export type LeaderSend<B, R> = (rpc: RpcConnection, buckets: B[], leader: number) => Promise<R[]>;

/** Errors after which the cached leader of a bucket may be wrong. */
const STALE = new Set<ErrorName>(['NOT_LEADER_OR_FOLLOWER', 'NOT_ENOUGH_REPLICAS_EXCEPTION', 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', 'CONNECTION_CLOSED', 'NETWORK_EXCEPTION', 'REQUEST_TIME_OUT']);

const BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2000;

/** The pause before retry `attempt` (1, 2, ...): doubling from 100 ms up to 2 s. */
export function retryBackoffMs(attempt: number): number {
  return Math.min(MAX_BACKOFF_MS, BACKOFF_MS * 2 ** Math.min(Math.max(attempt - 1, 0), 5));
}

/** The error a bucket's outcome carries, if any. */
export function outcomeError<R extends BucketAnswer>(outcome: Outcome<R>, what: string): TributaryError | undefined {
  if (outcome instanceof TributaryError) return outcome;
  return hasError(outcome) ? errorFromCode(outcome.errorCode!, outcome.errorMessage ?? `${what} failed`) : undefined;
}

/**
 * Whether a request about `table` that failed with `err` may be sent again (after a back-off);
 * drops the table's cached leaders when `err` says they may be wrong. A bucket the server does
 * not host is retried only while the table still exists under its id: a replica the new leader
 * has not created yet, not a dropped table.
 */
export async function retriableAtLeader(conn: ConnectionCore, table: TableInfo, err: TributaryError): Promise<boolean> {
  if (STALE.has(err.errorName)) conn.metadata.invalidateLeaders(table);
  if (err.errorName !== 'UNKNOWN_TABLE_OR_BUCKET_EXCEPTION') return err.retriable;
  try {
    return (await conn.metadata.table(table.path, true)).tableId === table.tableId;
  } catch (refresh) {
    return refresh instanceof TributaryError && refresh.retriable;
  }
}

/** One round: every bucket's request sent once to the leader the metadata cache names now. */
export async function roundToLeaders<B extends BucketAddress, R>(conn: ConnectionCore, table: TableInfo, buckets: readonly B[], send: LeaderSend<B, R>): Promise<Outcome<R>[]> {
  const outcomes: Outcome<R>[] = new Array(buckets.length);
  const groups = new Map<number, number[]>();
  await Promise.all(
    buckets.map(async (b, i) => {
      try {
        const leader = await conn.metadata.leaderOf(table, b.partitionId, b.bucket);
        const group = groups.get(leader);
        if (group) group.push(i);
        else groups.set(leader, [i]);
      } catch (err) {
        outcomes[i] = asTributaryError(err);
      }
    }),
  );
  await Promise.all(
    [...groups].map(async ([leader, indexes]) => {
      try {
        const answers = await send(await conn.tabletServer(leader), indexes.map((i) => buckets[i]), leader);
        if (answers.length !== indexes.length) throw new TributaryError('CORRUPT_MESSAGE', `tablet server ${leader} answered ${answers.length} buckets, ${indexes.length} were asked`);
        indexes.forEach((i, j) => (outcomes[i] = answers[j]));
      } catch (err) {
        for (const i of indexes) outcomes[i] = asTributaryError(err);
      }
    }),
  );
  return outcomes;
}

/**
 * Requests that may be repeated (reads): rounds until no bucket's outcome is retriable at a leader
 * or `client.request-timeout` has passed. Returns each bucket's answer, which may carry an error
 * that retrying does not help; throws when a bucket's request failed as a whole.
 */
export async function requestLeaders<B extends BucketAddress, R extends BucketAnswer>(conn: ConnectionCore, table: TableInfo, buckets: readonly B[], send: LeaderSend<B, R>): Promise<R[]> {
  const deadline = Date.now() + conn.options.durationMs('client.request-timeout');
  const answers: Outcome<R>[] = new Array(buckets.length);
  let pending = buckets.map((_, i) => i);
  for (let attempt = 1; ; attempt++) {
    const outcomes = await roundToLeaders(conn, table, pending.map((i) => buckets[i]), send);
    const retry: number[] = [];
    await Promise.all(
      outcomes.map(async (outcome, j) => {
        answers[pending[j]] = outcome;
        const err = outcomeError(outcome, 'request');
        if (err && (await retriableAtLeader(conn, table, err))) retry.push(pending[j]);
      }),
    );
    const wait = retryBackoffMs(attempt);
    if (retry.length === 0 || Date.now() + wait >= deadline) break;
    pending = retry.sort((a, b) => a - b);
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
  for (const a of answers) if (a instanceof TributaryError) throw a;
  return answers as R[];
}
