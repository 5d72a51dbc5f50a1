/**
 * LeaderState: what the leader of a bucket knows of its followers, for one leader epoch (Kafka's
 * replica state on the leader).
 *
 * - A follower's log end offset is the fetch offset of its latest FetchLog: it asks for what it
 *   does not have, and it fetches from its own durable log end. Unknown (-1) until its first fetch
 *   in this epoch, which holds the high watermark back, since the leader cannot know what it has.
 * - The high watermark is the lowest log end of the ISR, the leader's being its durable end.
 * - A follower is caught up when a fetch of it reaches the leader's durable end as of that fetch,
 *   or the durable end as of its previous fetch (a follower that keeps up with a steady stream of
 *   writes is never exactly at the end). One not caught up for log.replica.max-lag-time leaves the
 *   ISR; a follower outside the ISR rejoins once its log end reaches both the high watermark and
 *   the start of this leader epoch (so it holds everything this leader accepted).
 */
export interface FollowerProgress {
  logEndOffset: bigint;
  lastCaughtUpMs: number;
  lastFetchMs: number;
  /** The leader's durable end when the previous fetch came. */
  lastFetchLeaderEnd: bigint;
}

export class LeaderState {
  private readonly followers = new Map<number, FollowerProgress>();
  /** Aborted when this leadership ends, so that writes waiting for the high watermark answer at once. */
  private readonly ended = new AbortController();
  /** An ISR change sent to the coordinator and not answered yet: one at a time per bucket. */
  isrChangeInFlight = false;

  constructor(
    readonly serverId: number,
    /** The log end when this leadership began: where its epoch starts. */
    readonly epochStartOffset: bigint,
    replicas: readonly number[],
    nowMs: number,
  ) {
    this.setReplicas(replicas, nowMs);
  }

  get deposed(): AbortSignal {
    return this.ended.signal;
  }

  end(): void {
    this.ended.abort();
  }

  /** Follows a changed replica set (same epoch): new followers start unknown and caught up now. */
  setReplicas(replicas: readonly number[], nowMs: number): void {
    for (const id of [...this.followers.keys()]) if (!replicas.includes(id)) this.followers.delete(id);
    for (const id of replicas) {
      if (id === this.serverId || this.followers.has(id)) continue;
      this.followers.set(id, { logEndOffset: -1n, lastCaughtUpMs: nowMs, lastFetchMs: nowMs, lastFetchLeaderEnd: -1n });
    }
  }

  isFollower(id: number): boolean {
    return this.followers.has(id);
  }

  /** Records a fetch of follower `id` from `fetchOffset`, the leader's durable end being `leaderEnd`. */
  followerFetched(id: number, fetchOffset: bigint, leaderEnd: bigint, nowMs: number): void {
    const f = this.followers.get(id);
    if (!f) return;
    if (fetchOffset >= leaderEnd) f.lastCaughtUpMs = Math.max(f.lastCaughtUpMs, nowMs);
    else if (fetchOffset >= f.lastFetchLeaderEnd) f.lastCaughtUpMs = Math.max(f.lastCaughtUpMs, f.lastFetchMs);
    f.logEndOffset = fetchOffset;
    f.lastFetchMs = nowMs;
    f.lastFetchLeaderEnd = leaderEnd;
  }

  followerLogEnd(id: number): bigint {
    return this.followers.get(id)?.logEndOffset ?? -1n;
  }

  /** The lowest log end over the ISR: the leader's durable end and every other member's fetch offset. */
  highWatermark(isr: readonly number[], durableEnd: bigint): bigint {
    let hw = durableEnd;
    for (const id of isr) {
      if (id === this.serverId) continue;
      const end = this.followerLogEnd(id);
      if (end < hw) hw = end;
    }
    return hw;
  }

  /**
   * Each follower as the leader's metrics show it: how many records it is behind `leaderEnd` (none
   * known before its first fetch of this epoch) and how long since it was last caught up.
   */
  followerLags(leaderEnd: bigint, nowMs: number): { follower: number; lagRecords?: bigint; sinceCaughtUpMs: number }[] {
    return [...this.followers].map(([follower, f]) => ({
      follower,
      ...(f.logEndOffset >= 0n ? { lagRecords: leaderEnd > f.logEndOffset ? leaderEnd - f.logEndOffset : 0n } : {}),
      sinceCaughtUpMs: Math.max(0, nowMs - f.lastCaughtUpMs),
    }));
  }

  /** The ISR members (the leader aside) that have not been caught up for more than `maxLagMs`. */
  laggingFollowers(isr: readonly number[], nowMs: number, maxLagMs: number): number[] {
    return isr.filter((id) => {
      const f = this.followers.get(id);
      return f !== undefined && nowMs - f.lastCaughtUpMs > maxLagMs;
    });
  }

  /** Whether follower `id`, outside the ISR, may rejoin it. */
  canJoin(id: number, isr: readonly number[], highWatermark: bigint): boolean {
    const end = this.followerLogEnd(id);
    return this.followers.has(id) && !isr.includes(id) && end >= highWatermark && end >= this.epochStartOffset;
  }
}
