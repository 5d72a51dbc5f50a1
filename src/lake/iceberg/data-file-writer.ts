/**
 * A pool of worker threads that turn lake record batches into finished Parquet data files, so that
 * encoding (WASM) and column metrics stay off the event loop's thread.
 *
 * Each worker (data-file-worker.ts) takes one job at a time:
 *   request  := { ipc: Arrow IPC stream of lake batches, path, schema: IcebergSchema }
 *   response := { ok: true, file: WrittenDataFile } | { ok: false, errorName, message }
 * The IPC bytes are transferred, not copied, when they fill their own ArrayBuffer. A file is
 * complete and durable at `path` once its job resolves, and absent or left as `<path>.tmp` otherwise.
 * Workers start on demand, up to the pool size, and do not keep the process alive while idle.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { type ErrorName, TributaryError } from '../../common/errors.js';
import type { DataFile } from './data-file.js';
import type { IcebergSchema } from './types.js';

export interface DataFileJob {
  /** An Arrow IPC stream of lake batches (lake-batch.ts); handed over to the worker. */
  ipc: Uint8Array;
  /** Where the Parquet file goes; parent directories are created. */
  path: string;
  /** The lake schema the batches follow, for the column metrics. */
  schema: IcebergSchema;
}

export type WrittenDataFile = Omit<DataFile, 'partition' | 'content'>;

export type DataFileResponse = { ok: true; file: WrittenDataFile } | { ok: false; errorName: ErrorName; message: string };

interface Pending {
  job: DataFileJob;
  resolve: (file: WrittenDataFile) => void;
  reject: (err: Error) => void;
}

/** Compiled, this module and the worker's are .js files; under tsx (the tests) both are .ts. */
const EXTENSION = path.extname(fileURLToPath(import.meta.url));
const WORKER_URL = new URL(`./data-file-worker${EXTENSION}`, import.meta.url);

function startWorker(): Worker {
  if (EXTENSION !== '.ts') return new Worker(WORKER_URL);
  // tsx's loader hooks do not reach worker threads on Node 20: load the entry through its API.
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  return new Worker(`import(${tsx}).then((api) => api.tsImport(${JSON.stringify(WORKER_URL.href)}, ${JSON.stringify(import.meta.url)}))`, { eval: true });
}

function closedError(): TributaryError {
  return new TributaryError('STORAGE_EXCEPTION', 'the data file writer pool is closed');
}

export class DataFileWriterPool {
  private readonly workers = new Set<Worker>();
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Pending>();
  private readonly queue: Pending[] = [];
  private closed = false;

  constructor(readonly size = 1) {
    if (!Number.isInteger(size) || size < 1) throw new TributaryError('INVALID_ARGUMENT', `a data file writer pool needs at least one worker, got ${size}`);
  }

  write(job: DataFileJob): Promise<WrittenDataFile> {
    if (this.closed) return Promise.reject(closedError());
    return new Promise((resolve, reject) => {
      this.queue.push({ job, resolve, reject });
      this.dispatch();
    });
  }

  /** Terminates the workers; writes not finished yet fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const pending of this.queue.splice(0)) pending.reject(closedError());
    await Promise.all([...this.workers].map((w) => w.terminate()));
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      let worker = this.idle.pop();
      if (!worker) {
        if (this.workers.size >= this.size) return;
        worker = this.spawn();
      }
      const pending = this.queue.shift()!;
      this.running.set(worker, pending);
      worker.ref();
      const { ipc } = pending.job;
      const ownsBuffer = ipc.buffer instanceof ArrayBuffer && ipc.byteOffset === 0 && ipc.byteLength === ipc.buffer.byteLength;
      worker.postMessage(pending.job, ownsBuffer ? [ipc.buffer as ArrayBuffer] : []);
    }
  }

  private spawn(): Worker {
    const worker = startWorker();
    this.workers.add(worker);
    worker.on('message', (response: DataFileResponse) => {
      const pending = this.finish(worker);
      this.idle.push(worker);
      worker.unref();
      if (response.ok) pending?.resolve(response.file);
      else pending?.reject(new TributaryError(response.errorName, response.message));
      this.dispatch();
    });
    // An uncaught failure ends the worker: its job fails and a later job starts a new worker.
    worker.on('error', (err) => this.finish(worker)?.reject(new TributaryError('STORAGE_EXCEPTION', `data file worker failed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => {
      this.workers.delete(worker);
      const at = this.idle.indexOf(worker);
      if (at >= 0) this.idle.splice(at, 1);
      this.finish(worker)?.reject(this.closed ? closedError() : new TributaryError('STORAGE_EXCEPTION', `data file worker exited with code ${code}`));
      if (!this.closed) this.dispatch();
    });
    return worker;
  }

  private finish(worker: Worker): Pending | undefined {
    const pending = this.running.get(worker);
    this.running.delete(worker);
    return pending;
  }
}
