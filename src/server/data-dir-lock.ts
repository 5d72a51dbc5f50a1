/**
 * The data directory's lock: `server.lock` says which process owns the directory, so that two
 * servers never write the same logs.
 *
 * File `server.lock`: `<pid> <start time>\n` while a server owns the directory, empty once it
 * stopped. The start time is field 22 of `/proc/<pid>/stat` (clock ticks since boot), so a pid
 * the kernel handed to another process since is not taken for the owner. The file stays after a
 * stop: claiming it again overwrites bytes it already has, which a full disk still allows.
 *
 * The owner counts as gone when its pid does not exist, is a zombie (killed but not yet reaped by
 * its parent: a supervisor that restarts at once sees this) or belongs to a process started at
 * another time. Without /proc, a pid that exists counts as the owner.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from '../common/errors.js';

export const LOCK_FILE = 'server.lock';

interface Owner {
  pid: number;
  startTime?: string;
}

/** Field 22 (start time) of `/proc/<pid>/stat`, undefined when that process is gone or is a zombie; null without /proc. */
export function processStartTime(pid: number | 'self'): string | undefined | null {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return null;
    return fs.existsSync('/proc/self/stat') ? undefined : null;
  }
  // `pid (comm) state …`: comm may hold spaces and parentheses, so fields count from the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  return fields[19];
}

function isOwnerAlive(owner: Owner): boolean {
  const startTime = processStartTime(owner.pid);
  if (startTime === null) {
    try {
      process.kill(owner.pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  }
  return startTime !== undefined && (owner.startTime === undefined || owner.startTime === startTime);
}

function parseOwner(text: string): Owner | undefined {
  const [pid, startTime] = text.trim().split(/\s+/);
  const n = Number(pid);
  if (!Number.isInteger(n) || n <= 0) return undefined;
  return { pid: n, ...(startTime ? { startTime } : {}) };
}

export class DataDirLock {
  private constructor(
    private readonly file: string,
    private readonly createdFile: boolean,
  ) {}

  /** Claims `dataDir` for this process; DATA_DIR_LOCKED when a live process owns it. */
  static async acquire(dataDir: string): Promise<DataDirLock> {
    const file = path.join(dataDir, LOCK_FILE);
    let fh: fs.promises.FileHandle;
    let created = false;
    try {
      try {
        fh = await fs.promises.open(file, 'r+');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        fh = await fs.promises.open(file, 'wx+');
        created = true;
      }
    } catch (err) {
      throw new TributaryError('INVALID_DATA_DIR', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
    }
    try {
      const owner = parseOwner(await fh.readFile('utf8'));
      if (owner && owner.pid !== process.pid && isOwnerAlive(owner)) {
        throw new TributaryError('DATA_DIR_LOCKED', `data dir ${dataDir} is in use by the server with pid ${owner.pid} (${file})`);
      }
      const claim = Buffer.from(`${process.pid} ${processStartTime('self') ?? ''}`.trim() + '\n');
      await fh.write(claim, 0, claim.length, 0);
      await fh.truncate(claim.length);
      await fh.datasync();
    } catch (err) {
      if (created) await fs.promises.rm(file, { force: true });
      if (err instanceof TributaryError) throw err;
      throw new TributaryError('INVALID_DATA_DIR', `cannot write ${file}: ${(err as Error).message}`, { cause: err });
    } finally {
      await fh.close();
    }
    return new DataDirLock(file, created);
  }

  /** Gives the directory up: the file is emptied (kept, see above). */
  async release(): Promise<void> {
    await fs.promises.truncate(this.file, 0);
  }

  /** Gives the directory up after a failed start, leaving no lock file the start created. */
  async abandon(): Promise<void> {
    if (this.createdFile) await fs.promises.rm(this.file, { force: true });
    else await this.release();
  }
}
