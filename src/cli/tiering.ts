/**
 * `tributary tiering`: a stateless lake tiering worker. Asks the coordinator at `--bootstrap` for
 * lake-enabled tables and tiers them into the lake until SIGTERM or SIGINT. Start as many as the
 * load needs; kill any of them at any moment. `--set` and `--config` give it the object storage
 * options of an s3:// warehouse (settings.ts).
 */
import { TieringWorker } from '../tiering/tiering-worker.js';
import { createLogger, type Logger } from '../common/logger.js';
import { commandSettings, type SettingFlags } from './settings.js';

export interface TieringFlags extends SettingFlags {
  bootstrap: string;
  threads?: string;
  pollInterval?: string;
}

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

export async function tiering(flags: TieringFlags): Promise<void> {
  const log = createLogger().child({ role: 'tiering' });
  commandSettings(flags, 'tributary tiering');
  const starting = TieringWorker.start(flags.bootstrap, {
    log,
    ...(flags.threads ? { writerThreads: Number(flags.threads) } : {}),
    ...(flags.pollInterval ? { pollIntervalMs: Number(flags.pollInterval) } : {}),
  });
  await stopOnShutdown(log, starting, (worker) => worker.stop());
  process.stdout.write(`ready tiering bootstrap=${flags.bootstrap}\n`);
}
