/**
 * The worker thread of DataFileWriterPool (data-file-writer.ts, which states the messages): one
 * job at a time, it reads the lake batches of an Arrow IPC stream, computes their column metrics,
 * encodes them as Parquet and writes the file durably (temp file, fsync, rename, fsync of the
 * directory, and of the parents of any directory it had to create).
 */
import fs from 'node:fs';
import path from 'node:path';
import { parentPort } from 'node:worker_threads';
import * as arrow from 'apache-arrow';
import { asTributaryError, TributaryError } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/files.js';
import type { DataFileJob, DataFileResponse, WrittenDataFile } from './data-file-writer.js';
import { computeMetrics } from './metrics.js';
import { parquetOfIpcStream } from './parquet.js';

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

function lakeBatchesOf(ipc: Uint8Array): arrow.RecordBatch[] {
  try {
    return arrow.tableFromIPC(ipc).batches;
  } catch (err) {
    throw new TributaryError('INVALID_ARGUMENT', `not an Arrow IPC stream: ${(err as Error).message}`, { cause: err });
  }
}

async function writeDataFile(job: DataFileJob): Promise<WrittenDataFile> {
  const metrics = computeMetrics(lakeBatchesOf(job.ipc), job.schema);
  const parquet = parquetOfIpcStream(job.ipc);
  const dir = path.dirname(path.resolve(job.path));
  await makeDirs(dir);
  await writeFileAtomic(dir, path.basename(job.path), parquet);
  return { filePath: job.path, fileFormat: 'PARQUET', fileSizeInBytes: parquet.length, ...metrics };
}

const port = parentPort;
if (!port) throw new Error('data-file-worker runs as a worker thread of DataFileWriterPool');
port.on('message', (job: DataFileJob) => {
  writeDataFile(job).then(
    (file) => port.postMessage({ ok: true, file } satisfies DataFileResponse),
    (err: unknown) => {
      const e = asTributaryError(err);
      port.postMessage({ ok: false, errorName: e.errorName, message: e.message } satisfies DataFileResponse);
    },
  );
});
