/**
 * The data disk's write lock (Fluss's disk protection): while the disk of data.dir is fuller than
 * `server.data-disk.write-limit-ratio`, or a write found it full (ENOSPC), writes are refused with
 * DISK_WRITE_LOCKED and reads go on. Writes resume by themselves once the disk is back at or
 * below `server.data-disk.write-recover-ratio`: two marks, so the lock does not flap around one.
 *
 * The disk use is read with statfs on a timer (`server.data-disk.check-interval`), never on the
 * write path, which only reads a flag. Entering the lock is one warning in the log, leaving it one
 * info line.
 */
import fs from 'node:fs';
import type { ServerActivity } from '../../common/activity.js';
import type { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { isNoSpace } from '../../common/files.js';
import type { Logger } from '../../common/logger.js';

export interface DataDiskState {
  writeLocked: boolean;
  /** Share of the disk in use, 0..1, as of the last check. */
  usedRatio: number;
}

export class DataDisk {
  private locked = false;
  private used = 0;
  private timer: NodeJS.Timeout | undefined;
  private checking = false;

  private constructor(
    private readonly dir: string,
    private readonly limitRatio: number,
    private readonly recoverRatio: number,
    private readonly log: Logger,
  ) {}

  /** Reads the disk use once (a start on a full disk starts locked), then every check interval. */
  static async start(dir: string, options: Options, log: Logger, activity: ServerActivity): Promise<DataDisk> {
    const limit = options.double('server.data-disk.write-limit-ratio');
    const recover = options.double('server.data-disk.write-recover-ratio');
    if (recover > limit) {
      throw new TributaryError('INVALID_CONFIG_EXCEPTION', `server.data-disk.write-recover-ratio (${recover}) must be at most server.data-disk.write-limit-ratio (${limit})`);
    }
    const disk = new DataDisk(dir, limit, recover, log);
    await disk.check();
    disk.timer = activity.every('data-disk-check', options.durationMs('server.data-disk.check-interval'), () => disk.check());
    return disk;
  }

  get state(): DataDiskState {
    return { writeLocked: this.locked, usedRatio: this.used };
  }

  get writeLocked(): boolean {
    return this.locked;
  }

  /** Throws DISK_WRITE_LOCKED while writes are refused. */
  checkWritable(): void {
    if (this.locked) throw this.lockedError();
  }

  /**
   * Looks at a failed write: one that found the disk full locks writes (until the disk is back
   * below the recover ratio) and is answered as DISK_WRITE_LOCKED; others pass unchanged.
   */
  writeFailed(err: unknown): unknown {
    if (!isNoSpace(err)) return err;
    if (!this.locked) this.enter('a write found no space left');
    return err instanceof TributaryError && err.errorName === 'DISK_WRITE_LOCKED' ? err : this.lockedError(err);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private lockedError(cause?: unknown): TributaryError {
    const percent = (r: number): string => `${Math.round(r * 1000) / 10}%`;
    return new TributaryError(
      'DISK_WRITE_LOCKED',
      `the data disk is ${percent(this.used)} full: writes are refused until it is back at ${percent(this.recoverRatio)} (server.data-disk.write-recover-ratio)`,
      cause === undefined ? undefined : { cause },
    );
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const s = await fs.promises.statfs(this.dir);
      this.used = s.blocks > 0 ? 1 - s.bavail / s.blocks : 0;
    } catch (err) {
      this.log.warn({ err, dir: this.dir }, 'cannot read the data disk use');
      return;
    } finally {
      this.checking = false;
    }
    if (!this.locked && this.used >= this.limitRatio) this.enter(`disk use is above server.data-disk.write-limit-ratio ${this.limitRatio}`);
    else if (this.locked && this.used <= this.recoverRatio) {
      this.locked = false;
      this.log.info({ dir: this.dir, usedRatio: round(this.used) }, 'data disk has space again: writes resume');
    }
  }

  private enter(why: string): void {
    this.locked = true;
    this.log.warn({ dir: this.dir, usedRatio: round(this.used), limitRatio: this.limitRatio, recoverRatio: this.recoverRatio, why }, 'data disk full: writes are refused until space returns');
  }
}

function round(r: number): number {
  return Math.round(r * 10000) / 10000;
}
