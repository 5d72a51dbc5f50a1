/**
 * The worst latencies of a latency run and what happened around them, for bench/latency.ts: each
 * spike is the worst row latency of its stretch of send time, and the events listed with it (GC
 * pauses, event-loop stalls, periodic tasks, slow fsyncs of any of the processes) are those that
 * overlap the row's flight, from its send to its arrival, widened by a margin on both sides.
 */

/** Something that ran in one of the processes, from `startMs` (wall clock, ms since the epoch) for `ms`. */
export interface TimedEvent {
  /** The process: server, producer, consumer. */
  who: string;
  what: string;
  startMs: number;
  ms: number;
}

export interface Spike {
  /** When the row was sent (wall clock, ms since the epoch). */
  sentMs: number;
  latencyMs: number;
}

/**
 * The `n` worst latencies whose send times are at least `separationMs` apart, worst first: one
 * stall delays every row in flight, and it should be listed once, not once per row.
 */
export function worstSpikes(sentMs: ArrayLike<number>, latencyMs: ArrayLike<number>, n: number, separationMs: number): Spike[] {
  // The worst row of each stretch of `separationMs`; candidates from neighbouring stretches are
  // kept apart below.
  const worst = new Map<number, Spike>();
  for (let i = 0; i < latencyMs.length; i++) {
    const bin = Math.floor(sentMs[i] / separationMs);
    const held = worst.get(bin);
    if (!held || latencyMs[i] > held.latencyMs) worst.set(bin, { sentMs: sentMs[i], latencyMs: latencyMs[i] });
  }
  const picked: Spike[] = [];
  for (const candidate of [...worst.values()].sort((a, b) => b.latencyMs - a.latencyMs)) {
    if (picked.length === n) break;
    if (picked.every((p) => Math.abs(p.sentMs - candidate.sentMs) >= separationMs)) picked.push(candidate);
  }
  return picked;
}

/** The events overlapping [sent − margin, arrival + margin] of a spike, in start order. */
export function eventsAround(spike: Spike, events: readonly TimedEvent[], marginMs: number): TimedEvent[] {
  const from = spike.sentMs - marginMs;
  const to = spike.sentMs + spike.latencyMs + marginMs;
  return events.filter((e) => e.startMs <= to && e.startMs + e.ms >= from).sort((a, b) => a.startMs - b.startMs);
}

/**
 * One line per spike: when it was sent (seconds from `originMs`), its latency, and the
 * `maxEvents` longest events around it, in start order, each with its start relative to the send
 * time, e.g.
 * `+12.345 s  145.8 ms: server stall 130.2 ms at +1.0 ms; server task log-checkpoint 120.0 ms at -3.0 ms (+4 shorter)`.
 */
export function describeSpikes(spikes: readonly Spike[], events: readonly TimedEvent[], marginMs: number, originMs: number, maxEvents: number): string[] {
  return spikes.map((spike) => {
    const all = eventsAround(spike, events, marginMs);
    const longest = new Set([...all].sort((a, b) => b.ms - a.ms).slice(0, maxEvents));
    const around = all.filter((e) => longest.has(e)).map((e) => {
      const at = e.startMs - spike.sentMs;
      return `${e.who} ${e.what} ${e.ms.toFixed(1)} ms at ${at >= 0 ? '+' : ''}${at.toFixed(1)} ms`;
    });
    const head = `+${((spike.sentMs - originMs) / 1000).toFixed(3)} s  ${spike.latencyMs.toFixed(1)} ms`;
    const shorter = all.length - around.length;
    return `${head}: ${around.length > 0 ? around.join('; ') : 'nothing recorded'}${shorter > 0 ? ` (+${shorter} shorter)` : ''}`;
  });
}
