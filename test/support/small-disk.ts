/**
 * A small disk that tests fill for real: a tmpfs mounted on a temp dir (mounting needs root, as
 * in CI), filled by a file until writes fail with ENOSPC, and freed by removing that file.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export class SmallDisk {
  private readonly filler: string;

  private constructor(
    readonly mountPoint: string,
    /** Why the disk could not be mounted (tests skip with it); undefined once mounted. */
    readonly refused: string | undefined,
  ) {
    this.filler = path.join(mountPoint, 'filler');
  }

  static mount(prefix: string, size: string): SmallDisk {
    const mountPoint = fs.mkdtempSync(path.join(os.tmpdir(), `tributary-${prefix}-`));
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', mountPoint], { stdio: 'pipe' });
      return new SmallDisk(mountPoint, undefined);
    } catch (err) {
      return new SmallDisk(mountPoint, `cannot mount a tmpfs to fill (needs root): ${(err as Error).message.split('\n')[0]}`);
    }
  }

  /** Writes the filler until the disk is full, in ever smaller pieces down to 512 bytes. */
  fill(): void {
    const fd = fs.openSync(this.filler, 'a');
    const chunk = Buffer.alloc(256 * 1024, 7);
    try {
      for (let size = chunk.length; size >= 512; ) {
        try {
          fs.writeSync(fd, chunk, 0, size);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
          size >>= 1;
        }
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  /** Removes the filler: the space is back. */
  free(): void {
    fs.rmSync(this.filler, { force: true });
  }

  unmount(): void {
    if (!this.refused) execFileSync('umount', ['-l', this.mountPoint]);
    fs.rmSync(this.mountPoint, { recursive: true, force: true });
  }
}
