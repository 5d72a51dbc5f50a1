/**
 * The node's own activity that can hold back appends and fetch wake-ups: its periodic tasks
 * (checkpoints, retention, KV snapshots, tiering and auto-partition timers, the data-disk check,
 * sweepers), the fsyncs on the log's append path, garbage collection and the event loop's delay.
 * Metrics read it per scrape (metrics.ts); at debug level each task, each fsync of at least
 * SLOW_FLUSH_MS and each pause of at least PAUSE_LOG_MS is also logged with its start time, so that
 * a latency spike can be lined up with what ran at the time.
 */
import type { Logger } from './logger.js';
import { type DurationStats, DurationWindow, type RuntimeWindow, RuntimeMonitor, wallClockMs } from './runtime-monitor.js';

const SLOW_FLUSH_MS = 2;
const PAUSE_LOG_MS = 5;

export class ServerActivity {
  private readonly flushes = new DurationWindow();
  private readonly tasks = new Map<string, DurationWindow>();
  /** The last run queued in each lane of tasks, and the tasks waiting or running in one. */
  private readonly lanes = new Map<string, Promise<void>>();
  private readonly due = new Set<string>();
  private readonly runtime: RuntimeMonitor;
  private readonly traced: boolean;

  constructor(private readonly log: Logger) {
    this.traced = log.isLevelEnabled('debug');
    this.runtime = new RuntimeMonitor(
      this.traced ? { pauseThresholdMs: PAUSE_LOG_MS, onPause: (p) => log.debug({ ...p, startMs: Math.round(p.startMs), ms: round(p.ms), ...(p.cpuMs !== undefined ? { cpuMs: round(p.cpuMs) } : {}) }, 'pause') } : {},
    );
  }

  /**
   * Runs `task` every `intervalMs` without keeping the process alive, timing each run; a failure
   * is logged and the next run goes ahead. Tasks given the same `lane` run one at a time, in the
   * order they came due, and a task whose previous run is still waiting or running skips its turn.
   */
  every(task: string, intervalMs: number, work: () => Promise<unknown> | void, lane?: string): NodeJS.Timeout {
    const run = (): Promise<void> => this.timed(task, work).then(
      () => undefined,
      (err: unknown) => this.log.error({ err }, `${task} failed`),
    );
    const timer = setInterval(() => {
      if (lane === undefined) {
        void run();
        return;
      }
      if (this.due.has(task)) return;
      this.due.add(task);
      const next = (this.lanes.get(lane) ?? Promise.resolve()).then(run).finally(() => this.due.delete(task));
      this.lanes.set(lane, next);
    }, intervalMs);
    timer.unref();
    return timer;
  }

  /** Runs one task, recording how long it took and how long its first synchronous stretch held the event loop. */
  async timed<T>(task: string, work: () => Promise<T> | T): Promise<T> {
    const start = performance.now();
    let syncMs = 0;
    try {
      const result = work();
      syncMs = performance.now() - start;
      return await result;
    } finally {
      const ms = performance.now() - start;
      let window = this.tasks.get(task);
      if (!window) this.tasks.set(task, (window = new DurationWindow()));
      window.record(ms);
      if (this.traced) this.log.debug({ task, startMs: Math.round(wallClockMs(start)), ms: round(ms), syncMs: round(syncMs) }, 'background task');
    }
  }

  /** An fdatasync of a log on the append path took `ms`, started at `start` (performance.now()). */
  flushed(start: number, ms: number): void {
    this.flushes.record(ms);
    if (this.traced && ms >= SLOW_FLUSH_MS) this.log.debug({ startMs: Math.round(wallClockMs(start)), ms: round(ms) }, 'slow log flush');
  }

  /** The windows since the last call: runtime pauses, log fsyncs and each task's runs. */
  take(): { runtime: RuntimeWindow; flushes: DurationStats; tasks: Map<string, DurationStats> } {
    const tasks = new Map<string, DurationStats>();
    for (const [task, window] of this.tasks) tasks.set(task, window.take());
    return { runtime: this.runtime.take(), flushes: this.flushes.take(), tasks };
  }

  close(): void {
    this.runtime.close();
  }
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;
