/**
 * Graceful shutdown of a long-running command (a server or a tiering worker) on SIGTERM or SIGINT.
 */
import type { Logger } from '../common/logger.js';

/**
 * Handles SIGTERM and SIGINT from before `starting` settles, and resolves with what it started: the
 * first signal stops that (with `stop`, once it has started), then the process exits, 0 when the
 * stop went well. A signal while the process starts is so a graceful stop too, not the default
 * death by signal that closes nothing (a ZooKeeper registration left to time out, say).
 */
export function stopOnShutdown<T>(log: Logger, starting: Promise<T>, stop: (started: T) => Promise<void>): Promise<T> {
  let stopping = false;
  const handle = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutdown requested');
    starting.then(stop).then(
      () => log.flush(() => process.exit(0)),
      (err) => {
        log.error({ err }, 'shutdown failed');
        log.flush(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', () => handle('SIGTERM'));
  process.on('SIGINT', () => handle('SIGINT'));
  return starting;
}
