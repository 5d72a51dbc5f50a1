/**
 * A pool of worker threads that encode lake record batches (lake-batch.ts) as Parquet data files,
 * so that WASM encoding stays off the event loop's thread. A file is written by one worker from
 * chunks of batches appended in turn: the caller reads the next rows while the worker encodes the
 * last ones, and the worker holds a row group, not the file. Column metrics are computed on the
 * caller's thread, from the batches it holds anyway, which keeps the two threads' work even.
 *
 * Messages to a worker (data-file-worker.ts); each request gets one response with its id, and the
 * requests of one file are handled in order:
 *   request  := { id, op: 'open', file, path, maxRowGroupRows? }
 *             | { id, op: 'append', file, ipc: Arrow IPC stream of the chunk's batches }
 *             | { id, op: 'finish', file } | { id, op: 'sync', file } | { id, op: 'abort', file }
 *   response := { id, ok: true, memory?: the appended stream's ArrayBuffer, handed back,
 *                 written?: { bytes, rows, columnSizes: [field id, bytes][] } (finish) }
 *             | { id, ok: false, errorName, message }
 * `file` numbers the files of one worker. The IPC stream's memory moves to the worker and back
 * (no copies), for the next chunk's stream. A file is complete (its footer written, its size
 * known) once `finish` resolves, and durable at its path once `sync` resolves; until then it is
 * `<path>.tmp`, which a failure or `abort` removes. On object storage the worker writes a staging
 * file of the remote file cache, and `durable` resolves once it is uploaded (storage/stores.ts). A failed request fails the file: every later
 * one on it but `abort` gets the same error.
 * Workers start on demand, up to the pool size, and do not keep the process alive while idle.
 *
 * A file's metrics are those of its chunks, merged (MergedMetrics, metrics.ts).
 */
import type { Worker } from 'node:worker_threads';
import type * as arrow from 'apache-arrow';
import { type ErrorName, TributaryError } from '../../common/errors.js';
import { startModuleWorker } from '../../common/module-worker.js';
import { publishStaged, writePathFor } from '../../storage/stores.js';
import type { DataFile } from './data-file.js';
import { computeMetrics, MergedMetrics } from './metrics.js';
import { ipcStreamOf } from './parquet.js';
import type { IcebergSchema } from './types.js';

export type WrittenDataFile = Omit<DataFile, 'partition' | 'content'>;

export type DataFileRequest =
  | { id: number; op: 'open'; file: number; path: string; maxRowGroupRows?: number }
  | { id: number; op: 'append'; file: number; ipc: Uint8Array }
  | { id: number; op: 'finish' | 'sync' | 'abort'; file: number };

export type DataFileResponse =
  | { id: number; ok: true; memory?: ArrayBuffer; written?: { bytes: number; rows: number; columnSizes: [number, number][] } }
  | { id: number; ok: false; errorName: ErrorName; message: string };

type Success = DataFileResponse & { ok: true };

export interface CompletedDataFile {
  file: WrittenDataFile;
  durable: Promise<void>;
}

export interface DataFileJob {
  /** Lake batches of one schema. */
  batches: readonly arrow.RecordBatch[];
  /** Where the Parquet file goes; parent directories are created. */
  path: string;
  /** The lake schema the batches follow, for the column metrics. */
  schema: IcebergSchema;
  /** Rows per row group; parquet.ts's default when absent. */
  maxRowGroupRows?: number;
}

/** A data file being written by a worker of the pool. */
export interface OpenDataFile {
  /** Appends lake batches of the file's schema; resolves once the worker has encoded them. */
  append(batches: readonly arrow.RecordBatch[]): Promise<void>;
  /**
   * Completes the file: resolves once its footer is written, with what it holds and `durable`,
   * which resolves once the file is durable at its path. A commit can write its manifests
   * meanwhile, as long as the table's new version waits for `durable`.
   */
  complete(): Promise<CompletedDataFile>;
  /** Completes the file and waits until it is durable at its path. */
  finish(): Promise<WrittenDataFile>;
  /** Gives the file up; what was written of it is removed. */
  abort(): Promise<void>;
}

/** Handed-back stream memory kept for the next chunks: how many, and up to what size each. */
const SPARE_MEMORY = 4;
const SPARE_MEMORY_BYTES = 16 << 20;

function startWorker(): Worker {
  return startModuleWorker(new URL('./data-file-worker', import.meta.url));
}

function closedError(): TributaryError {
  return new TributaryError('STORAGE_EXCEPTION', 'the data file writer pool is closed');
}

/** One worker thread, its open files and its requests awaiting a response. */
class WriterThread {
  readonly pending = new Map<number, { resolve: (response: Success) => void; reject: (err: Error) => void }>();
  openFiles = 0;
  private nextFile = 0;
  /** Set once the thread is gone: requests fail with it. */
  gone?: Error;

  constructor(readonly worker: Worker) {}

  newFileNumber(): number {
    return this.nextFile++;
  }

  /** Keeps the process alive only while the thread has work. */
  updateRef(): void {
    if (this.openFiles > 0 || this.pending.size > 0) this.worker.ref();
    else this.worker.unref();
  }
}

export class DataFileWriterPool {
  private readonly threads = new Set<WriterThread>();
  private readonly spareMemory: ArrayBuffer[] = [];
  private nextRequest = 0;
  private closed = false;

  constructor(readonly size = 1) {
    if (!Number.isInteger(size) || size < 1) throw new TributaryError('INVALID_ARGUMENT', `a data file writer pool needs at least one worker, got ${size}`);
  }

  /** Starts a data file at `filePath` of lake batches of `schema`, row groups of at most `maxRowGroupRows` (parquet.ts's default when absent), on the least busy worker. */
  open(filePath: string, schema: IcebergSchema, maxRowGroupRows?: number): OpenDataFile {
    const thread = this.closed ? undefined : this.pickThread();
    const file = thread?.newFileNumber() ?? -1;
    const metrics = new MergedMetrics(schema);
    let failure: Error | undefined = thread ? undefined : closedError();
    let ended = false;
    const request = async (op: DataFileRequest['op'], fields: object = {}, transfer: ArrayBuffer[] = []): Promise<Success> => {
      if (failure) throw failure;
      try {
        return await this.request(thread!, { op, file, ...fields }, transfer);
      } catch (err) {
        failure ??= err as Error;
        throw err;
      }
    };
    const end = (): void => {
      if (ended || !thread) return;
      ended = true;
      thread.openFiles--;
      thread.updateRef();
    };
    // A local warehouse's file is written in place; a remote one is staged locally, then uploaded.
    const target = writePathFor(filePath);
    const opened = thread ? target.then((at) => request('open', { path: at, ...(maxRowGroupRows !== undefined ? { maxRowGroupRows } : {}) })) : Promise.resolve();
    // A failure to open surfaces at the next request.
    opened.catch(() => {});
    const complete = async (): Promise<CompletedDataFile> => {
      await opened.catch(() => {});
      const finished = request('finish');
      // Sent at once: the worker syncs the file right after its footer.
      const durable = request('sync')
        .then(async () => publishStaged(filePath, await target))
        .finally(end);
      durable.catch(() => {});
      const { written } = await finished;
      const merged = metrics.result();
      if (written!.rows !== merged.recordCount) {
        throw new TributaryError('STORAGE_EXCEPTION', `data file ${filePath} holds ${written!.rows} rows, ${merged.recordCount} were appended`);
      }
      return { file: { filePath, fileFormat: 'PARQUET', fileSizeInBytes: written!.bytes, columnSizes: new Map(written!.columnSizes), ...merged }, durable };
    };
    if (thread) thread.openFiles++;
    return {
      append: async (batches) => {
        await opened.catch(() => {});
        if (failure) throw failure;
        const ipc = ipcStreamOf(batches, this.spareMemory.pop());
        const appended = request('append', { ipc }, [ipc.buffer as ArrayBuffer]);
        // Computed while the worker encodes.
        metrics.add(computeMetrics(batches, schema));
        const { memory } = await appended;
        if (memory && memory.byteLength <= SPARE_MEMORY_BYTES && this.spareMemory.length < SPARE_MEMORY) this.spareMemory.push(memory);
      },
      complete,
      finish: async () => {
        const { file, durable } = await complete();
        await durable;
        return file;
      },
      abort: async () => {
        if (ended) return;
        await opened.catch(() => {});
        try {
          if (thread && !thread.gone && !this.closed) await this.request(thread, { op: 'abort', file }, []);
        } finally {
          end();
        }
      },
    };
  }

  /** Writes one data file of `job.batches`. */
  async write(job: DataFileJob): Promise<WrittenDataFile> {
    const file = this.open(job.path, job.schema, job.maxRowGroupRows);
    try {
      await file.append(job.batches);
      return await file.finish();
    } catch (err) {
      await file.abort().catch(() => {});
      throw err;
    }
  }

  /** Terminates the workers; files not finished yet fail. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.threads].map((t) => t.worker.terminate()));
  }

  private pickThread(): WriterThread {
    let best: WriterThread | undefined;
    for (const t of this.threads) if (!best || t.openFiles < best.openFiles) best = t;
    if (best && (best.openFiles === 0 || this.threads.size >= this.size)) return best;
    return this.spawn();
  }

  private request(thread: WriterThread, request: object, transfer: ArrayBuffer[]): Promise<Success> {
    if (this.closed) return Promise.reject(closedError());
    if (thread.gone) return Promise.reject(thread.gone);
    const id = this.nextRequest++;
    return new Promise((resolve, reject) => {
      thread.pending.set(id, { resolve, reject });
      thread.updateRef();
      thread.worker.postMessage({ ...request, id }, transfer);
    });
  }

  private spawn(): WriterThread {
    const thread = new WriterThread(startWorker());
    this.threads.add(thread);
    const { worker } = thread;
    worker.on('message', (response: DataFileResponse) => {
      const pending = thread.pending.get(response.id);
      thread.pending.delete(response.id);
      thread.updateRef();
      if (response.ok) pending?.resolve(response);
      else pending?.reject(new TributaryError(response.errorName, response.message));
    });
    // An uncaught failure ends the worker: its files fail; new files go to other (or new) workers.
    const fail = (err: Error): void => {
      thread.gone ??= err;
      this.threads.delete(thread);
      for (const pending of thread.pending.values()) pending.reject(thread.gone);
      thread.pending.clear();
    };
    worker.on('error', (err) => fail(new TributaryError('STORAGE_EXCEPTION', `data file worker failed: ${err.message}`, { cause: err })));
    worker.on('exit', (code) => fail(this.closed ? closedError() : new TributaryError('STORAGE_EXCEPTION', `data file worker exited with code ${code}`)));
    return thread;
  }
}
