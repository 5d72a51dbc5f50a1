/**
 * Choosing a bucket's leader: the first replica, in assignment order, that is live and in the ISR
 * (so the preferred leader leads whenever it can). A replica outside the ISR may miss committed
 * records, so it never leads: with no live ISR member the bucket is offline (NO_LEADER) until one
 * comes back. A controlled shutdown elects with the stopping server excluded.
 */

/** The leader id of a bucket without a leader. */
export const NO_LEADER = -1;

export function electLeader(replicas: readonly number[], isr: readonly number[], isLive: (id: number) => boolean, exclude?: number): number {
  return replicas.find((id) => id !== exclude && isr.includes(id) && isLive(id)) ?? NO_LEADER;
}
