/** File helpers shared by every component that keeps state on disk. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type ErrorName, TributaryError } from './errors.js';

/** errno codes of a write that found no room: the disk (or the user's quota) is full; by name (Node) or number (lmdb). */
const NO_SPACE = new Set<string | number>(['ENOSPC', 'EDQUOT', os.constants.errno.ENOSPC, os.constants.errno.EDQUOT]);

/** Whether `err`, or an error it wraps, is a write that found no space left. */
export function isNoSpace(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = e.cause) {
    const code = (e as { code?: unknown }).code;
    if ((typeof code === 'string' || typeof code === 'number') && NO_SPACE.has(code)) return true;
    if (e instanceof TributaryError && e.errorName === 'DISK_WRITE_LOCKED') return true;
  }
  return false;
}

/**
 * An I/O failure as a TributaryError: DISK_WRITE_LOCKED when the disk is full (retriable: writes
 * resume once space returns), else `name`, with the failing action in the message.
 */
export function ioError(name: ErrorName, what: string, err: unknown): TributaryError {
  if (err instanceof TributaryError) return err;
  if (isNoSpace(err)) return new TributaryError('DISK_WRITE_LOCKED', `${what}: no space left on the data disk`, { cause: err });
  return new TributaryError(name, `${what}: ${(err as Error).message}`, { cause: err });
}

/**
 * Bytes a large background write (a lake file, a snapshot chunk, an object of a local store) leaves
 * unsynced at most. A log's fsync on the same disk waits behind whatever else is dirty, so a file of
 * tens of MB written in one go and synced at its end stalls the appends acknowledged meanwhile;
 * synced a MiB at a time, each wait is short.
 */
const DIRTY_BYTES_PER_SYNC = 1 << 20;

/** Writes a file sequentially, datasyncing every DIRTY_BYTES_PER_SYNC bytes; the caller syncs the tail. */
export class PacedFileWriter {
  private unsynced = 0;

  constructor(private readonly fh: fs.promises.FileHandle) {}

  async write(content: Uint8Array | string): Promise<void> {
    const bytes = typeof content === 'string' ? Buffer.from(content) : content;
    for (let at = 0; at < bytes.length; ) {
      const n = Math.min(bytes.length - at, DIRTY_BYTES_PER_SYNC - this.unsynced);
      await this.fh.writeFile(bytes.subarray(at, at + n));
      at += n;
      this.unsynced += n;
      if (this.unsynced === DIRTY_BYTES_PER_SYNC) {
        await this.fh.datasync();
        this.unsynced = 0;
      }
    }
  }
}

/** Writes `name` in `dir` so that readers see the old or the new content, never a torn one. */
export async function writeFileAtomic(dir: string, name: string, content: string | Uint8Array): Promise<void> {
  const target = path.join(dir, name);
  const tmp = `${target}.tmp`;
  try {
    const fh = await fs.promises.open(tmp, 'w');
    try {
      await new PacedFileWriter(fh).write(content);
      await fh.datasync();
    } finally {
      await fh.close();
    }
    await fs.promises.rename(tmp, target);
    const dh = await fs.promises.open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  } catch (err) {
    // A half-written temp file would hold the space a full disk lacks.
    await fs.promises.rm(tmp, { force: true }).catch(() => undefined);
    throw ioError('STORAGE_EXCEPTION', `cannot write ${target}`, err);
  }
}

/**
 * Makes `dir` a directory, creating it and its missing parents one level at a time (a recursive
 * mkdir loops forever under /proc). Returns the topmost directory it created, for the caller to
 * remove if it gives up, or undefined when `dir` existed. Fails with `errorName` when a component
 * is not a directory or cannot be created.
 */
export async function makeDirectory(dir: string, errorName: ErrorName): Promise<string | undefined> {
  const missing: string[] = [];
  for (let at = path.resolve(dir); ; ) {
    let stat: fs.Stats;
    try {
      stat = await fs.promises.stat(at);
    } catch (err) {
      const parent = path.dirname(at);
      const code = (err as NodeJS.ErrnoException).code;
      // ENOTDIR: a parent is a file, which the walk up reports.
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || parent === at) {
        throw new TributaryError(errorName, `cannot use ${dir}: ${at}: ${(err as Error).message}`, { cause: err });
      }
      missing.unshift(at);
      at = parent;
      continue;
    }
    if (!stat.isDirectory()) throw new TributaryError(errorName, `cannot use ${dir}: ${at} is not a directory`);
    break;
  }
  for (const [i, d] of missing.entries()) {
    try {
      await fs.promises.mkdir(d);
    } catch (err) {
      if (i > 0) await fs.promises.rm(missing[0], { recursive: true, force: true });
      throw new TributaryError(errorName, `cannot create ${dir}: ${(err as Error).message}`, { cause: err });
    }
  }
  return missing[0];
}
