/**
 * What keeps a Node process from running its callbacks on time, measured in windows that
 * `take()` closes and starts anew (a metrics scrape, a benchmark run):
 * - the event loop's delay (perf_hooks.monitorEventLoopDelay at 1 ms resolution): how late timers
 *   and I/O callbacks ran, as percentiles and maximum;
 * - garbage-collection pauses by kind (PerformanceObserver 'gc' entries): count, total, longest.
 *
 * With `onPause`, single pauses of at least `pauseThresholdMs` are also reported as they happen,
 * with their wall-clock start, so that they can be lined up with other events: each GC pause that
 * long, and each event-loop stall that long as seen by a ticker every STALL_TICK_MS, with the CPU
 * time the process used meanwhile: about the stall's length when synchronous work (or a GC) kept
 * the loop from turning, near 0 when the process was not running at all (other processes had the
 * cores, or it waited in a system call).
 *
 * DurationWindow is the same kind of window over durations a caller records (fsyncs, tasks).
 */
import { constants, createHistogram, type IntervalHistogram, monitorEventLoopDelay, PerformanceObserver, type RecordableHistogram } from 'node:perf_hooks';

export const GC_KINDS = ['minor', 'major', 'incremental', 'weakcb'] as const;
export type GcKind = (typeof GC_KINDS)[number];

/** Durations of one window, in milliseconds; all 0 when nothing was recorded. */
export interface DurationStats {
  count: number;
  totalMs: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
  maxMs: number;
}

export interface RuntimeWindow {
  loopDelay: DurationStats;
  gc: Record<GcKind, DurationStats>;
}

/** One pause: a GC of a kind, or an event-loop stall; `startMs` is wall-clock ms since the epoch. */
export interface Pause {
  kind: GcKind | 'stall';
  startMs: number;
  ms: number;
  /** Stalls: CPU time (all threads) the process used during the stall. */
  cpuMs?: number;
}

export interface RuntimeMonitorOptions {
  onPause?: (pause: Pause) => void;
  pauseThresholdMs?: number;
}

const STALL_TICK_MS = 10;
const NS_PER_MS = 1e6;

const GC_KIND_OF: Record<number, GcKind> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** Wall-clock ms since the epoch of a `performance.now()` reading. */
export const wallClockMs = (performanceMs: number): number => performance.timeOrigin + performanceMs;

/** Durations recorded (ms, kept at microsecond precision) since the last `take()`. */
export class DurationWindow {
  private histogram: RecordableHistogram = createHistogram();
  private totalMs = 0;

  record(ms: number): void {
    this.histogram.record(Math.max(1, Math.round(ms * 1000)));
    this.totalMs += ms;
  }

  /** The window's statistics; starts a new window. */
  take(): DurationStats {
    const stats = statsOf(this.histogram, 1000, this.totalMs);
    this.histogram.reset();
    this.totalMs = 0;
    return stats;
  }
}

export class RuntimeMonitor {
  private readonly loop: IntervalHistogram = monitorEventLoopDelay({ resolution: 1 });
  private readonly gc = new Map<GcKind, DurationWindow>(GC_KINDS.map((k) => [k, new DurationWindow()]));
  private readonly observer: PerformanceObserver;
  private readonly ticker?: NodeJS.Timeout;

  constructor(options: RuntimeMonitorOptions = {}) {
    const threshold = options.pauseThresholdMs ?? 10;
    const onPause = options.onPause;
    this.loop.enable();
    this.observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = GC_KIND_OF[(entry as { detail?: unknown } as { detail?: { kind?: number } }).detail?.kind ?? -1];
        if (!kind) continue;
        this.gc.get(kind)!.record(entry.duration);
        if (onPause && entry.duration >= threshold) onPause({ kind, startMs: wallClockMs(entry.startTime), ms: entry.duration });
      }
    });
    this.observer.observe({ entryTypes: ['gc'] });
    if (onPause) {
      let last = performance.now();
      // One reading per tick: getrusage sums every thread of the process and is not free.
      let cpu = process.cpuUsage();
      this.ticker = setInterval(() => {
        const at = performance.now();
        const now = process.cpuUsage();
        const late = at - last - STALL_TICK_MS;
        if (late >= threshold) onPause({ kind: 'stall', startMs: wallClockMs(last + STALL_TICK_MS), ms: late, cpuMs: (now.user - cpu.user + now.system - cpu.system) / 1000 });
        last = at;
        cpu = now;
      }, STALL_TICK_MS);
      this.ticker.unref();
    }
  }

  /** The window since the last `take()` (or the start); starts a new one. */
  take(): RuntimeWindow {
    const loopDelay = statsOf(this.loop, NS_PER_MS);
    this.loop.reset();
    const gc = {} as Record<GcKind, DurationStats>;
    for (const [kind, window] of this.gc) gc[kind] = window.take();
    return { loopDelay, gc };
  }

  close(): void {
    this.loop.disable();
    this.observer.disconnect();
    clearInterval(this.ticker);
  }
}

/** Statistics of a histogram of integers, `perMs` of them to a millisecond. */
function statsOf(h: RecordableHistogram | IntervalHistogram, perMs: number, totalMs?: number): DurationStats {
  const count = h.count;
  if (count === 0) return { count: 0, totalMs: 0, p50Ms: 0, p99Ms: 0, p999Ms: 0, maxMs: 0 };
  return {
    count,
    totalMs: totalMs ?? (h.mean * count) / perMs,
    p50Ms: h.percentile(50) / perMs,
    p99Ms: h.percentile(99) / perMs,
    p999Ms: h.percentile(99.9) / perMs,
    maxMs: h.max / perMs,
  };
}
