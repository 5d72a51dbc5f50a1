/**
 * Choosing a bucket's leader: the first replica, in assignment order, that is live and in the ISR
 * (so the preferred leader leads whenever it can). A replica outside the ISR may miss committed
 * records, so it never leads: with no live ISR member the bucket is offline (NO_LEADER) and keeps
 * its ISR, whose members are the ones that may lead it again when they come back.
 *
 * Primary-key buckets with `table.kv.standby-replica.enabled` (Fluss's standby replica) have one
 * standby: an ISR member besides the leader that keeps a warm KV state. A new leader is the standby
 * when it is eligible and in the ISR (it opens its state without restoring a snapshot), else as
 * above; then the standby is chosen again: the current one while it stays an eligible ISR member
 * other than the leader, else the first such replica in assignment order, else none.
 *
 * Every change of the leader bumps the leader epoch; every change at all bumps the bucket epoch (the
 * version AdjustIsr compares).
 */

/** The leader id of a bucket without a leader. */
export const NO_LEADER = -1;

/** A bucket's leader and ISR as the coordinator keeps them. */
export interface LeaderAndIsr {
  leader: number;
  leaderEpoch: number;
  isr: number[];
  /** Epoch of the coordinator that wrote this state. */
  coordinatorEpoch: number;
  bucketEpoch: number;
  /** The follower keeping a warm KV state (primary-key buckets): at most one, empty when none. */
  standbyReplicas: number[];
}

/** The standby, if eligible and in the ISR; else the first of `replicas` that is in the ISR and eligible; else NO_LEADER. */
export function electLeader(replicas: readonly number[], isr: readonly number[], eligible: (id: number) => boolean, standby: readonly number[] = []): number {
  const candidate = (id: number): boolean => isr.includes(id) && eligible(id);
  return standby.find(candidate) ?? replicas.find(candidate) ?? NO_LEADER;
}

/** The standby of a bucket led by `leader`: the current one while it stays an eligible ISR member, else the first such in assignment order. */
export function chooseStandby(replicas: readonly number[], isr: readonly number[], leader: number, current: readonly number[], eligible: (id: number) => boolean): number[] {
  const candidate = (id: number): boolean => id !== leader && isr.includes(id) && eligible(id);
  const standby = current.find(candidate) ?? replicas.find(candidate);
  return leader === NO_LEADER || standby === undefined ? [] : [standby];
}

/**
 * The state a bucket moves to once only `eligible` servers may lead or stay in its ISR (live ones;
 * in a controlled shutdown, not the stopping one), written by `coordinatorEpoch`; undefined when it
 * stays as it is. An eligible leader keeps leading and the ISR drops the others; an ineligible one
 * hands over to the next eligible ISR member; with none, a leader that is still live keeps leading
 * (a stopping server that no other replica has caught up with), and a dead one leaves the bucket
 * offline with its ISR kept. With `withStandby` (a primary-key bucket keeping a standby) the
 * standby is preferred and chosen again.
 */
export function nextLeaderAndIsr(
  state: LeaderAndIsr,
  replicas: readonly number[],
  eligible: (id: number) => boolean,
  isLive: (id: number) => boolean,
  coordinatorEpoch: number,
  withStandby = false,
): LeaderAndIsr | undefined {
  const keeps = state.leader !== NO_LEADER && eligible(state.leader);
  const leader = keeps ? state.leader : electLeader(replicas, state.isr, eligible, withStandby ? state.standbyReplicas : []);
  if (leader === NO_LEADER) {
    if (state.leader === NO_LEADER || isLive(state.leader)) return undefined;
    return { leader: NO_LEADER, leaderEpoch: state.leaderEpoch + 1, isr: state.isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1, standbyReplicas: [] };
  }
  const isr = state.isr.filter((id) => id === leader || eligible(id));
  const standbyReplicas = withStandby ? chooseStandby(replicas, isr, leader, state.standbyReplicas, eligible) : [];
  if (leader === state.leader && isr.length === state.isr.length && sameReplicas(standbyReplicas, state.standbyReplicas)) return undefined;
  return { leader, leaderEpoch: leader === state.leader ? state.leaderEpoch : state.leaderEpoch + 1, isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1, standbyReplicas };
}

export function sameReplicas(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((id, i) => id === b[i]);
}
