/**
 * Choosing a bucket's leader: the first replica, in assignment order, that is live and in the ISR
 * (so the preferred leader leads whenever it can). A replica outside the ISR may miss committed
 * records, so it never leads: with no live ISR member the bucket is offline (NO_LEADER) and keeps
 * its ISR, whose members are the ones that may lead it again when they come back.
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
}

/** The first of `replicas` that is in the ISR and eligible, or NO_LEADER. */
export function electLeader(replicas: readonly number[], isr: readonly number[], eligible: (id: number) => boolean): number {
  return replicas.find((id) => isr.includes(id) && eligible(id)) ?? NO_LEADER;
}

/**
 * The state a bucket moves to once only `eligible` servers may lead or stay in its ISR (live ones;
 * in a controlled shutdown, not the stopping one), written by `coordinatorEpoch`; undefined when it
 * stays as it is. An eligible leader keeps leading and the ISR drops the others; an ineligible one
 * hands over to the next eligible ISR member; with none, a leader that is still live keeps leading
 * (a stopping server that no other replica has caught up with), and a dead one leaves the bucket
 * offline with its ISR kept.
 */
export function nextLeaderAndIsr(
  state: LeaderAndIsr,
  replicas: readonly number[],
  eligible: (id: number) => boolean,
  isLive: (id: number) => boolean,
  coordinatorEpoch: number,
): LeaderAndIsr | undefined {
  const keeps = state.leader !== NO_LEADER && eligible(state.leader);
  const leader = keeps ? state.leader : electLeader(replicas, state.isr, eligible);
  if (leader === NO_LEADER) {
    if (state.leader === NO_LEADER || isLive(state.leader)) return undefined;
    return { leader: NO_LEADER, leaderEpoch: state.leaderEpoch + 1, isr: state.isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1 };
  }
  const isr = state.isr.filter((id) => id === leader || eligible(id));
  if (leader === state.leader && isr.length === state.isr.length) return undefined;
  return { leader, leaderEpoch: leader === state.leader ? state.leaderEpoch : state.leaderEpoch + 1, isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1 };
}
