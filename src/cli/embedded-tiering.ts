/**
 * The lake tiering worker that `tributary start` runs beside its node, on a worker thread of its
 * own: tiering reads and decodes whole log batches and builds lake metadata, work of tens to
 * hundreds of milliseconds at a stretch that, on the node's event loop, held back every append
 * acknowledgement and fetch wake-up meanwhile. It is a client of the node like any other worker.
 *
 * Messages: the thread posts `{ ready: true }` once it serves or `{ error }` if it cannot start;
 * the node posts `'stop'` and the thread exits once its worker has stopped.
 */
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Worker } from 'node:worker_threads';
import { Options } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { startModuleWorker } from '../common/module-worker.js';
import { configureObjectStorage } from '../storage/stores.js';
import { TieringWorker } from '../tiering/tiering-worker.js';

interface ThreadMessage {
  ready?: true;
  error?: string;
}

export class EmbeddedTiering {
  private readonly exited: Promise<void>;

  private constructor(private readonly thread: Worker) {
    this.exited = new Promise((resolve) => thread.once('exit', () => resolve()));
  }

  /**
   * Starts the thread on the node at `bootstrap` (host:port), with the node's server `settings`
   * for its object storage (s3.*; its lake file cache in `cacheDir`); resolves once its worker serves.
   */
  static async start(bootstrap: string, settings: Record<string, string>, cacheDir: string): Promise<EmbeddedTiering> {
    const thread = startModuleWorker(new URL('./embedded-tiering', import.meta.url), { workerData: { bootstrap, settings, cacheDir } });
    const tiering = new EmbeddedTiering(thread);
    await new Promise<void>((resolve, reject) => {
      thread.once('message', (m: ThreadMessage) => (m.ready ? resolve() : reject(new Error(`embedded tiering worker did not start: ${m.error}`))));
      thread.once('error', reject);
      thread.once('exit', (code) => reject(new Error(`embedded tiering worker exited with ${code} before it started`)));
    });
    return tiering;
  }

  /** Stops the worker (its current round is abandoned) and waits for the thread to end. */
  async stop(): Promise<void> {
    this.thread.postMessage('stop');
    await this.exited;
  }
}

if (!isMainThread && (workerData as { bootstrap?: string } | null)?.bootstrap !== undefined) {
  const port = parentPort!;
  const log = createLogger().child({ role: 'tiering' });
  const data = workerData as { bootstrap: string; settings: Record<string, string>; cacheDir: string };
  configureObjectStorage(new Options('server', data.settings), data.cacheDir);
  TieringWorker.start(data.bootstrap, { log }).then(
    (worker) => {
      port.on('message', (m) => {
        // process.exit in a worker thread ends the thread only.
        if (m === 'stop') void worker.stop().finally(() => log.flush(() => process.exit(0)));
      });
      port.postMessage({ ready: true } satisfies ThreadMessage);
    },
    (err: unknown) => port.postMessage({ error: err instanceof Error ? err.message : String(err) } satisfies ThreadMessage),
  );
}
