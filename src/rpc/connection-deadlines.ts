/**
 * The deadlines of a listener's connections, checked by one sweep timer per listener (no timer per
 * frame or connection), the same for the RPC and the Kafka listener:
 *
 *   a frame not complete frameTimeoutMs after its first bytes     'frame-timeout'
 *   no bytes and nothing held for idleTimeoutMs                   'idle'
 *
 * A peer that sends part of a frame and stops holds request memory that every connection of the
 * node shares (request-memory.ts), so it is cut off after the frame timeout, not the idle one.
 */

export type ConnectionDeadline = 'frame-timeout' | 'idle';

export interface DeadlineLimits {
  frameTimeoutMs: number;
  idleTimeoutMs: number;
}

/** What a sweep sees of a connection. */
export interface ConnectionProgress {
  /** Frames completed so far: tells a frame still under way from a later one. */
  framesRead: number;
  /** Bytes of the frame under way, 0 between frames. */
  partialBytes: number;
  /** Request bytes still held: a connection waiting for its answers is not idle. */
  heldBytes: number;
}

/** The sweep runs a few times per shortest deadline, and at least once a second. */
const MAX_SWEEP_INTERVAL_MS = 1000;

export function sweepIntervalMs({ frameTimeoutMs, idleTimeoutMs }: DeadlineLimits): number {
  return Math.max(1, Math.min(MAX_SWEEP_INTERVAL_MS, Math.floor(Math.min(frameTimeoutMs, idleTimeoutMs) / 4)));
}

/** One connection's activity as the sweeps saw it. */
export class DeadlineWatch {
  /** Bytes arrived or a response was written since the last sweep. */
  private heard = false;
  /** When a sweep last saw the connection active (ms since epoch). */
  private activeAt = Date.now();
  /** When a sweep first saw the frame under way (0: none was), and the frame count then. */
  private frameSeenAt = 0;
  private frameSeenCount = 0;

  /** Bytes arrived, or a response was written. */
  touch(): void {
    this.heard = true;
  }

  /** The deadline the connection is past at `now` and why, or undefined. */
  check(now: number, progress: ConnectionProgress, limits: DeadlineLimits): { deadline: ConnectionDeadline; reason: string } | undefined {
    if (this.heard) this.activeAt = now;
    this.heard = false;
    if (progress.partialBytes === 0) {
      this.frameSeenAt = 0;
      if (progress.heldBytes === 0 && now - this.activeAt >= limits.idleTimeoutMs) return { deadline: 'idle', reason: `no request for ${now - this.activeAt} ms` };
    } else if (this.frameSeenAt === 0 || this.frameSeenCount !== progress.framesRead) {
      this.frameSeenAt = now;
      this.frameSeenCount = progress.framesRead;
    } else if (now - this.frameSeenAt >= limits.frameTimeoutMs) {
      return { deadline: 'frame-timeout', reason: `request frame incomplete after ${now - this.frameSeenAt} ms, ${progress.partialBytes} bytes received` };
    }
    return undefined;
  }
}
