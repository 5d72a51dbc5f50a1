/**
 * `tributary tiering`: a stateless lake tiering worker. Asks the coordinator at `--bootstrap` for
 * lake-enabled tables and tiers them into the lake until SIGTERM or SIGINT. Start as many as the
 * load needs; kill any of them at any moment. `--set` and `--config` give it the object storage
 * options of an s3:// warehouse (settings.ts).
 */
import { TieringWorker } from '../tiering/tiering-worker.js';
import { createLogger } from '../common/logger.js';
import { stopOnShutdown } from './shutdown.js';
import { commandSettings, type SettingFlags } from './settings.js';

export interface TieringFlags extends SettingFlags {
  bootstrap: string;
  threads?: string;
  pollInterval?: string;
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
