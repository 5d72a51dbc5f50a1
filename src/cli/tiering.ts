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

/** Stops `stop` once on the first SIGTERM or SIGINT, then exits. */
export function onShutdown(log: Logger, stop: () => Promise<void>): void {
  let stopping = false;
  const handle = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutdown requested');
    stop().then(
      () => log.flush(() => process.exit(0)),
      (err) => {
        log.error({ err }, 'shutdown failed');
        log.flush(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', () => handle('SIGTERM'));
  process.on('SIGINT', () => handle('SIGINT'));
}

export async function tiering(flags: TieringFlags): Promise<void> {
  const log = createLogger().child({ role: 'tiering' });
  commandSettings(flags, 'tributary tiering');
  const worker = await TieringWorker.start(flags.bootstrap, {
    log,
    ...(flags.threads ? { writerThreads: Number(flags.threads) } : {}),
    ...(flags.pollInterval ? { pollIntervalMs: Number(flags.pollInterval) } : {}),
  });
  process.stdout.write(`ready tiering bootstrap=${flags.bootstrap}\n`);
  onShutdown(log, () => worker.stop());
}
