/** File helpers shared by every component that keeps state on disk. */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from './errors.js';

/** Writes `name` in `dir` so that readers see the old or the new content, never a torn one. */
export async function writeFileAtomic(dir: string, name: string, content: string | Uint8Array): Promise<void> {
  const target = path.join(dir, name);
  const tmp = `${target}.tmp`;
  try {
    const fh = await fs.promises.open(tmp, 'w');
    try {
      await fh.writeFile(content);
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
    throw new TributaryError('STORAGE_EXCEPTION', `cannot write ${target}: ${(err as Error).message}`, { cause: err });
  }
}
