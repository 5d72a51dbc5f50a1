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
  /** What kind of event it is, for counting (`gc minor`, `stall`, `fsync`, `task log-checkpoint`); `what` when absent. */
  kind?: string;
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

/** How many of the rows over a latency threshold had an event of one kind in flight with them. */
export interface TailCause {
  /** The process and the event's kind, e.g. `server fsync`. */
  cause: string;
  rows: number;
}

/**
 * Which events the rows slower than `thresholdMs` (the run's p99, say) flew through: for each
 * process and kind of event, the rows whose flight, from send to arrival, overlapped at least one
 * such event, most rows first, and the rows that overlapped none. A row may count under several
 * causes. The worst spikes say what made the worst rows; this says what the whole tail is made of.
 */
export function tailCauses(sentMs: ArrayLike<number>, latencyMs: ArrayLike<number>, thresholdMs: number, events: readonly TimedEvent[]): { rows: number; causes: TailCause[]; unexplained: number } {
  const byStart = [...events].sort((a, b) => a.startMs - b.startMs);
  let longest = 0;
  for (const e of byStart) longest = Math.max(longest, e.ms);
  const counts = new Map<string, number>();
  let rows = 0;
  let unexplained = 0;
  for (let i = 0; i < latencyMs.length; i++) {
    if (!(latencyMs[i] > thresholdMs)) continue;
    rows++;
    const from = sentMs[i];
    const to = from + latencyMs[i];
    // The first event that could still be running at the send: none starts earlier than `longest` before it.
    let lo = 0;
    let hi = byStart.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (byStart[mid].startMs < from - longest) lo = mid + 1;
      else hi = mid;
    }
    const seen = new Set<string>();
    for (let j = lo; j < byStart.length && byStart[j].startMs <= to; j++) {
      const e = byStart[j];
      if (e.startMs + e.ms >= from) seen.add(`${e.who} ${e.kind ?? e.what}`);
    }
    if (seen.size === 0) unexplained++;
    for (const cause of seen) counts.set(cause, (counts.get(cause) ?? 0) + 1);
  }
  const causes = [...counts].map(([cause, n]) => ({ cause, rows: n })).sort((a, b) => b.rows - a.rows || a.cause.localeCompare(b.cause));
  return { rows, causes, unexplained };
}
