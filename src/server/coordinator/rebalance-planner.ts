/**
 * The plan of a rebalance: which buckets get which replicas and which leader, for the goals asked,
 * in order (Fluss's GoalOptimizer, greedy and deterministic). Bucket counts never change; a plan only
 * moves replicas between servers and leaderships between replicas.
 *
 * - REPLICA_DISTRIBUTION. Every replica on a PERMANENT_OFFLINE server moves (a drain), then replicas
 *   move from the most loaded to the least loaded of the servers that may take new ones (live, no
 *   tag) until their counts differ by at most one. A replica keeps its position in the bucket's
 *   list, so a moved first replica makes its new server the preferred leader; a bucket's racks never
 *   get fewer (a destination on a rack the bucket lacks goes first) and no server holds a bucket
 *   twice. Servers tagged TEMPORARY_OFFLINE keep their replicas and take none. Of the buckets a
 *   server could give away, one it is the preferred leader of goes when it has more preferred
 *   leaderships than the destination by two, else one it follows, so leaderships spread too.
 * - LEADER_DISTRIBUTION. Each bucket is to be led by its first replica that is live, untagged and in
 *   the ISR (or being added): the preferred leader, back from a restart, or the next one while the
 *   preferred one is tagged. A bucket without a leader now is left alone.
 *
 * A moved bucket whose leader stays among its replicas keeps it (unless LEADER_DISTRIBUTION says
 * otherwise); one whose leader leaves is led by the first of its new replicas (Fluss's reassignment
 * election).
 */
import { TributaryError } from '../../common/errors.js';
import type { RebalanceGoal, ServerTag } from '../../rpc/cluster-admin.js';

export interface PlanServer {
  id: number;
  rack?: string;
  live: boolean;
  tag?: ServerTag;
}

export interface PlanBucket {
  replicas: readonly number[];
  leader: number;
  isr: readonly number[];
}

/** A bucket the plan changes: its replicas and leader after. */
export interface PlannedMove<B extends PlanBucket> {
  bucket: B;
  replicas: number[];
  leader: number;
}

const NO_LEADER = -1;

export function planRebalance<B extends PlanBucket>(buckets: readonly B[], servers: readonly PlanServer[], goals: readonly RebalanceGoal[]): PlannedMove<B>[] {
  const byId = new Map(servers.map((s) => [s.id, s]));
  const replicas = buckets.map((b) => [...b.replicas]);
  if (goals.includes('REPLICA_DISTRIBUTION')) distributeReplicas(replicas, byId);
  const leaders = buckets.map((b, i) => {
    const stays = b.leader !== NO_LEADER && replicas[i].includes(b.leader);
    return stays || b.leader === NO_LEADER ? b.leader : (replicas[i].find((id) => mayLead(byId.get(id))) ?? replicas[i][0]);
  });
  if (goals.includes('LEADER_DISTRIBUTION')) {
    buckets.forEach((b, i) => {
      if (b.leader === NO_LEADER) return;
      const inSync = (id: number): boolean => b.isr.includes(id) || !b.replicas.includes(id);
      const preferred = replicas[i].find((id) => mayLead(byId.get(id)) && inSync(id));
      if (preferred !== undefined) leaders[i] = preferred;
    });
  }
  return buckets.flatMap((b, i) => (sameList(b.replicas, replicas[i]) && b.leader === leaders[i] ? [] : [{ bucket: b, replicas: replicas[i], leader: leaders[i] }]));
}

const mayLead = (s: PlanServer | undefined): boolean => s !== undefined && s.live && s.tag === undefined;
const sameList = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((id, i) => id === b[i]);

/** Moves replicas in place in `replicas` (one list per bucket), as REPLICA_DISTRIBUTION says. */
function distributeReplicas(replicas: number[][], servers: Map<number, PlanServer>): void {
  const hosts = [...servers.values()].filter(mayLead).map((s) => s.id).sort((a, b) => a - b);
  const rackOf = (id: number): string => servers.get(id)?.rack ?? '';
  const load = new Map(hosts.map((id) => [id, 0]));
  const preferred = new Map(hosts.map((id) => [id, 0]));
  for (const r of replicas) {
    r.forEach((id, i) => {
      if (load.has(id)) load.set(id, load.get(id)! + 1);
      if (i === 0 && preferred.has(id)) preferred.set(id, preferred.get(id)! + 1);
    });
  }
  const move = (r: number[], at: number, to: number): void => {
    const from = r[at];
    if (load.has(from)) load.set(from, load.get(from)! - 1);
    load.set(to, load.get(to)! + 1);
    if (at === 0) {
      if (preferred.has(from)) preferred.set(from, preferred.get(from)! - 1);
      preferred.set(to, preferred.get(to)! + 1);
    }
    r[at] = to;
  };
  const racksWith = (r: readonly number[], at: number, to: number): number => new Set(r.map((id, i) => rackOf(i === at ? to : id))).size;

  // The drain: a destination on a rack the bucket lacks, then the least loaded, then the lowest id.
  for (const r of replicas) {
    for (let at = 0; at < r.length; at++) {
      if (servers.get(r[at])?.tag !== 'PERMANENT_OFFLINE') continue;
      const candidates = hosts.filter((id) => !r.includes(id));
      if (candidates.length === 0) {
        throw new TributaryError('REBALANCE_FAILURE_EXCEPTION', `no tablet server can take the replica on server ${r[at]} of a bucket with replicas [${r}]: live servers without a tag are [${hosts}]`);
      }
      const best = candidates.reduce((a, b) => {
        const byRacks = racksWith(r, at, b) - racksWith(r, at, a);
        if (byRacks !== 0) return byRacks > 0 ? b : a;
        return load.get(b)! < load.get(a)! ? b : a;
      });
      move(r, at, best);
    }
  }

  // Evening out: each move narrows the spread, so this ends.
  for (;;) {
    const byLoad = [...hosts].sort((a, b) => load.get(a)! - load.get(b)! || a - b);
    let moved = false;
    for (const src of [...byLoad].reverse()) {
      for (const dst of byLoad) {
        if (load.get(src)! - load.get(dst)! <= 1) break;
        const leaderFirst = preferred.get(src)! - preferred.get(dst)! > 1;
        let pick: { r: number[]; at: number } | undefined;
        for (const r of replicas) {
          const at = r.indexOf(src);
          if (at < 0 || r.includes(dst) || racksWith(r, at, dst) < racksWith(r, at, src)) continue;
          if (!pick || (at === 0) === leaderFirst) pick = { r, at };
          if ((at === 0) === leaderFirst) break;
        }
        if (pick) {
          move(pick.r, pick.at, dst);
          moved = true;
          break;
        }
      }
      if (moved) break;
    }
    if (!moved) return;
  }
}
