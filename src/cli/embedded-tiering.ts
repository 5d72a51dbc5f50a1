/**
 * The lake tiering worker that `tributary start` runs beside its node, on a worker thread of its
 * own: tiering reads and decodes whole log batches and builds lake metadata, work of tens to
 * hundreds of milliseconds at a stretch that, on the node's event loop, held back every append
 * acknowledgement and fetch wake-up meanwhile. It is a client of the node like any other worker.
 *
 * Messages: the thread posts `{ ready: true }` once it serves or `{ error }` if it cannot start;
 * the node posts `'stop'` and the thread exits once its worker has stopped.
 */
import os from 'node:os';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { Worker } from 'node:worker_threads';
import { Options } from '../common/config.js';
import { createLogger, type Logger } from '../common/logger.js';
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
  const options = new Options('server', data.settings);
  yieldToTheNode(options.int('datalake.tiering.embedded.nice'), log);
  configureObjectStorage(options, data.cacheDir);
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

/**
 * Lowers the CPU priority of this thread and of the threads it starts later (its Parquet writers
 * inherit it): on a node with few cores, a tiering round's decoding took the core an append's
 * acknowledgement or a fetch's wake-up waited for. Linux keeps a nice value per thread; elsewhere
 * it is the whole process's, which must keep its own.
 */
function yieldToTheNode(nice: number, log: Logger): void {
  if (process.platform !== 'linux' || nice === 0) return;
  try {
    os.setPriority(0, nice);
  } catch (err) {
    log.warn({ err, nice }, 'cannot lower the priority of the tiering thread');
  }
}
