/**
 * Moving a bucket from replicas R to R' (Kafka's reassignment; Fluss's reassignment election), as
 * the states its assignment and leader_isr go through. The coordinator commits each state to
 * ZooKeeper, with the move itself (the rebalance task), before it tells any tablet server, so a
 * coordinator that takes over finds the move and carries it on from the state it is in.
 *
 *   1. started:   assignment R' ++ (R \ R'): the new replicas follow the leader; leader and ISR as they are.
 *   2. in sync:   every replica of R' is in the ISR (the leader adds each once it has caught up).
 *   3. completed: assignment R', ISR = ISR ∩ R' (so R' whole: never fewer than before the move), led
 *                 by the wanted leader if it is in the ISR, else the leader if it stays, else the
 *                 first live ISR member of R' (leader epoch + 1 when it changes); the replicas of
 *                 R \ R' are stopped and deleted.
 *
 * Reverted (cancelled, or a new replica's server gone): assignment R, ISR = ISR ∩ R, the leader kept
 * if it is in R, else the first live ISR member of R. Every change bumps the bucket epoch, so an
 * AdjustIsr based on the state before is refused and the leader learns the new one. With
 * `withStandby` (a primary-key bucket keeping a standby) each state names its standby again.
 */
import { chooseStandby, type LeaderAndIsr, NO_LEADER, sameReplicas } from './leader-election.js';

/** A bucket's move: from `origin` to `target` replicas, led by `leader` once it is there. */
export interface BucketMove {
  origin: readonly number[];
  target: readonly number[];
  leader: number;
}

/** The replicas while a move runs: the target's, then the origin's that go. */
export function movingReplicas(move: BucketMove): number[] {
  return [...move.target, ...move.origin.filter((id) => !move.target.includes(id))];
}

/** The state a move completes with once every target replica is in the ISR; undefined while it waits. */
export function completedState(state: LeaderAndIsr, move: BucketMove, isLive: (id: number) => boolean, coordinatorEpoch: number, withStandby = false): LeaderAndIsr | undefined {
  if (state.leader === NO_LEADER || !move.target.every((id) => state.isr.includes(id))) return undefined;
  return settle(state, move.target, [move.leader, state.leader, ...move.target], isLive, coordinatorEpoch, withStandby);
}

/** The state of a move taken back to its origin; undefined when no replica of the origin may lead. */
export function revertedState(state: LeaderAndIsr, move: BucketMove, isLive: (id: number) => boolean, coordinatorEpoch: number, withStandby = false): LeaderAndIsr | undefined {
  return settle(state, move.origin, [state.leader, ...move.origin], isLive, coordinatorEpoch, withStandby);
}

/**
 * A leadership move without replica changes: the state led by `leader`; the same state when it
 * leads already; undefined when it may not lead (not live or not in the ISR).
 */
export function ledBy(state: LeaderAndIsr, leader: number, isLive: (id: number) => boolean, coordinatorEpoch: number, withStandby = false): LeaderAndIsr | undefined {
  if (state.leader === leader) return state;
  if (!state.isr.includes(leader) || !isLive(leader)) return undefined;
  const standbyReplicas = withStandby ? chooseStandby(state.isr, state.isr, leader, state.standbyReplicas, isLive) : [];
  return { leader, leaderEpoch: state.leaderEpoch + 1, isr: state.isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1, standbyReplicas };
}

/** The ISR cut to `replicas`, led by the first of `candidates` that is one of them, in that ISR and live. */
function settle(
  state: LeaderAndIsr,
  replicas: readonly number[],
  candidates: readonly number[],
  isLive: (id: number) => boolean,
  coordinatorEpoch: number,
  withStandby: boolean,
): LeaderAndIsr | undefined {
  const isr = state.isr.filter((id) => replicas.includes(id));
  const leader = candidates.find((id) => replicas.includes(id) && isr.includes(id) && isLive(id));
  if (leader === undefined) return undefined;
  const standbyReplicas = withStandby ? chooseStandby(replicas, isr, leader, state.standbyReplicas, isLive) : [];
  return { leader, leaderEpoch: leader === state.leader ? state.leaderEpoch : state.leaderEpoch + 1, isr, coordinatorEpoch, bucketEpoch: state.bucketEpoch + 1, standbyReplicas };
}
