/**
 * The worker thread of DataFileWriterPool (data-file-writer.ts, which states the messages). Per
 * open file it streams the appended Arrow IPC streams into a Parquet encoder (parquet.ts) whose
 * output goes straight to `<path>.tmp`. Finishing writes the footer; syncing then syncs the file,
 * checks that its footer holds every row, renames it to its path and syncs the directory (and the
 * parents of any directory it had to create).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import * as arrow from 'apache-arrow';
import { asTributaryError, TributaryError } from '../../common/errors.js';
import { PacedFileWriter } from '../../common/files.js';
import { columnSizesOf } from '../parquet/projection.js';
import type { DataFileRequest, DataFileResponse } from './data-file-writer.js';
import { ParquetStreamWriter, parquetRowCount } from './parquet.js';

async function syncDir(dir: string): Promise<void> {
  const handle = await fs.promises.open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Creates `dir` and its missing parents so that they survive a crash. */
async function makeDirs(dir: string): Promise<void> {
  try {
    const first = await fs.promises.mkdir(dir, { recursive: true });
    if (first === undefined) return;
    // A new directory's entry is durable once the directory holding it is synced.
    const top = path.dirname(first);
    for (let d = path.dirname(dir); ; d = path.dirname(d)) {
      await syncDir(d);
      if (d === top || d === path.dirname(d)) break;
    }
  } catch (err) {
    throw new TributaryError('STORAGE_EXCEPTION', `cannot create ${dir}: ${(err as Error).message}`, { cause: err });
  }
}

function storageError(what: string, err: unknown): TributaryError {
  return err instanceof TributaryError ? err : new TributaryError('STORAGE_EXCEPTION', `${what}: ${(err as Error).message}`, { cause: err });
}

/** The schema message of an Arrow IPC stream; the batches are left for the Parquet encoder. */
function schemaOf(ipc: Uint8Array): arrow.Schema {
  let schema: arrow.Schema | undefined;
  try {
    schema = arrow.RecordBatchReader.from(ipc).open().schema;
  } catch (err) {
    throw new TributaryError('INVALID_ARGUMENT', `not an Arrow IPC stream: ${(err as Error).message}`, { cause: err });
  }
  if (!schema) throw new TributaryError('INVALID_ARGUMENT', 'not an Arrow IPC stream: no schema message');
  return schema;
}

/** One open data file. */
class DataFileState {
  private readonly tmp: string;
  private handle?: fs.promises.FileHandle;
  private output?: PacedFileWriter;
  private readonly writer: ParquetStreamWriter;
  private bytes = 0;
  /** Rows in the file, once finished. */
  private rows?: number;

  constructor(
    private readonly path: string,
    maxRowGroupRows?: number,
  ) {
    this.tmp = `${path}.tmp`;
    this.writer = new ParquetStreamWriter(async (bytes) => {
      await this.output!.write(bytes);
      this.bytes += bytes.length;
    }, maxRowGroupRows);
  }

  async open(): Promise<void> {
    await makeDirs(path.dirname(path.resolve(this.path)));
    try {
      this.handle = await fs.promises.open(this.tmp, 'w');
      this.output = new PacedFileWriter(this.handle);
    } catch (err) {
      throw storageError(`cannot write ${this.path}`, err);
    }
  }

  async append(ipc: Uint8Array): Promise<void> {
    await this.writer.write(ipc, schemaOf(ipc));
  }

  async finish(): Promise<{ bytes: number; rows: number; columnSizes: [number, number][] }> {
    this.rows = await this.writer.close();
    // Read back from the footer just written: the encoder alone knows the chunks' sizes.
    return { bytes: this.bytes, rows: this.rows, columnSizes: [...(await columnSizesOf(this.tmp))] };
  }

  async sync(): Promise<void> {
    const rows = this.rows!;
    const handle = this.handle!;
    this.handle = undefined;
    try {
      await handle.datasync();
    } finally {
      await handle.close();
    }
    const inFooter = await parquetRowCount(this.tmp);
    if (inFooter !== rows) throw new TributaryError('STORAGE_EXCEPTION', `Parquet file ${this.path} holds ${inFooter} rows, ${rows} went in`);
    try {
      await fs.promises.rename(this.tmp, this.path);
      await syncDir(path.dirname(path.resolve(this.path)));
    } catch (err) {
      throw storageError(`cannot write ${this.path}`, err);
    }
  }

  /** Stops writing and removes what was written. */
  async discard(): Promise<void> {
    this.writer.abort();
    await this.handle?.close().catch(() => {});
    this.handle = undefined;
    await fs.promises.rm(this.tmp, { force: true }).catch(() => {});
  }
}

interface FileEntry {
  state: DataFileState;
  /** The file's requests run one after another. */
  queue: Promise<unknown>;
  failure?: TributaryError;
}

const files = new Map<number, FileEntry>();

/** Runs one request of an open file. */
async function serve(req: DataFileRequest, entry: FileEntry): Promise<DataFileResponse & { ok: true }> {
  if (req.op === 'abort') {
    files.delete(req.file);
    await entry.state.discard();
    return { id: req.id, ok: true };
  }
  // Nothing follows a sync.
  if (req.op === 'sync') files.delete(req.file);
  if (entry.failure) throw entry.failure;
  try {
    switch (req.op) {
      case 'open':
        await entry.state.open();
        return { id: req.id, ok: true };
      case 'append':
        await entry.state.append(req.ipc);
        // The stream's memory goes back to the reader for its next stream.
        return { id: req.id, ok: true, ...(req.ipc.buffer instanceof ArrayBuffer ? { memory: req.ipc.buffer } : {}) };
      case 'finish':
        return { id: req.id, ok: true, written: await entry.state.finish() };
      case 'sync':
        await entry.state.sync();
        return { id: req.id, ok: true };
    }
  } catch (err) {
    entry.failure = asTributaryError(err);
    await entry.state.discard();
    throw entry.failure;
  }
}

const port = parentPort;
if (!port) throw new Error('data-file-worker runs as a worker thread of DataFileWriterPool');
port.on('message', (req: DataFileRequest) => {
  let entry = files.get(req.file);
  if (!entry && req.op === 'open') {
    entry = { state: new DataFileState(req.path, req.maxRowGroupRows), queue: Promise.resolve() };
    files.set(req.file, entry);
  }
  if (!entry) {
    const response: DataFileResponse = req.op === 'abort' ? { id: req.id, ok: true } : { id: req.id, ok: false, errorName: 'STORAGE_EXCEPTION', message: `no open data file ${req.file}` };
    port.postMessage(response);
    return;
  }
  const current = entry;
  current.queue = current.queue
    .then(() => serve(req, current))
    .then(
      (response) => port.postMessage(response, response.memory ? [response.memory] : []),
      (err: unknown) => {
        const e = asTributaryError(err);
        port.postMessage({ id: req.id, ok: false, errorName: e.errorName, message: e.message } satisfies DataFileResponse);
      },
    );
});
