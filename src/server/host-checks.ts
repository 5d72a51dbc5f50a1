/**
 * What on the host lengthens latency tails, checked when a server starts and logged once, as a
 * warning an operator can act on: the kernel's DAMON memory monitors. A monitor (a `kdamond`
 * kernel thread) wakes at each sample interval and checks the accessed bits of sampled pages
 * while holding a core; on a two-core VM sampling every 500 ms it took 8–16 ms of a core a
 * sample, in stretches of several ms, and a request whose thread waited for that core was as much
 * later (docs/operations.md).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from '../common/logger.js';

/** A running DAMON monitor: its kernel thread and how often it samples. */
export interface MemoryMonitor {
  pid: number;
  sampleMs: number;
}

/** Where Linux lists its DAMON monitors (the sysfs admin interface). */
export const DAMON_ADMIN_DIR = '/sys/kernel/mm/damon/admin/kdamonds';

/** The DAMON monitors running now, from `dir`; none where the kernel has no DAMON or it is off. */
export function memoryMonitors(dir = DAMON_ADMIN_DIR): MemoryMonitor[] {
  const read = (file: string): string => fs.readFileSync(path.join(dir, file), 'utf8').trim();
  const numbered = (sub: string): string[] => fs.readdirSync(path.join(dir, sub)).filter((e) => /^\d+$/.test(e));
  let monitors: string[];
  try {
    monitors = numbered('.');
  } catch {
    return [];
  }
  const running: MemoryMonitor[] = [];
  for (const k of monitors) {
    try {
      if (read(`${k}/state`) !== 'on') continue;
      const sampleUs = Math.min(...numbered(`${k}/contexts`).map((c) => Number(read(`${k}/contexts/${c}/monitoring_attrs/intervals/sample_us`))));
      if (!Number.isFinite(sampleUs)) continue;
      running.push({ pid: Number(read(`${k}/pid`)), sampleMs: sampleUs / 1000 });
    } catch {
      // Stopped while being read, or not readable by this user: nothing to say about it.
    }
  }
  return running;
}

/** Logs a warning for each DAMON monitor running on the host. */
export function warnOfMemoryMonitors(log: Logger, dir = DAMON_ADMIN_DIR): void {
  for (const m of memoryMonitors(dir)) {
    log.warn(
      { kdamondPid: m.pid, sampleMs: m.sampleMs },
      'a kernel DAMON memory monitor runs on this host: each of its samples holds a core for a few milliseconds, which shows in latency tails on small machines (docs/operations.md, Kernel memory monitors)',
    );
  }
}
