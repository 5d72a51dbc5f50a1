/**
 * An ObjectStore on a local or shared directory: a location is an absolute path (or a `file:`
 * URI). Every write goes to `<name>.<uuid>.tmp` beside its target, is fsynced, renamed into place,
 * and the directory is fsynced, so an object is whole and durable once a call resolves; missing
 * parent directories are created and synced too. A `.tmp` file is the rest of an interrupted write.
 *
 * `publish` of a new object links the temp file to the target: link() fails when the target
 * exists, so of writers racing to create one object exactly one wins, on any POSIX filesystem
 * (rename would silently replace). `publish` over an etag holds `<name>.lock` (created
 * exclusively) while it compares and renames; a lock left by a crash is broken after
 * `lockTimeoutMs`. The etag is the file's inode, change time and size: a rename gives the target
 * a new inode, so every publish changes it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ioError, PacedFileWriter } from '../common/files.js';
import type { ByteRange, ObjectHead, ObjectInfo, ObjectStore, PublishExpectation } from './object-store.js';
import { filePathOf } from './object-store.js';

const LOCK_WAIT_MS = 5;

export class LocalObjectStore implements ObjectStore {
  readonly kind = 'local';

  constructor(private readonly lockTimeoutMs = 30_000) {}

  localPath(location: string): string {
    return path.resolve(filePathOf(location));
  }

  async put(location: string, body: Uint8Array | string): Promise<void> {
    await this.writeThenPlace(location, (file) => file.write(body), (tmp, file) => fs.promises.rename(tmp, file));
  }

  async putStream(location: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    await this.writeThenPlace(
      location,
      async (file) => {
        for await (const chunk of body) await file.write(chunk);
      },
      (tmp, file) => fs.promises.rename(tmp, file),
    );
  }

  async putFile(location: string, file: string): Promise<void> {
    if (path.resolve(file) === this.localPath(location)) return;
    await this.putStream(location, fs.createReadStream(file));
  }

  async get(location: string, range?: ByteRange): Promise<Uint8Array | undefined> {
    const file = this.localPath(location);
    try {
      if (!range) return await fs.promises.readFile(file);
      const fh = await fs.promises.open(file, 'r');
      try {
        const size = (await fh.stat()).size;
        const length = Math.max(0, Math.min(range.length ?? size, size - range.offset));
        const buffer = Buffer.alloc(length);
        let read = 0;
        while (read < length) {
          const { bytesRead } = await fh.read(buffer, read, length - read, range.offset + read);
          if (bytesRead === 0) break;
          read += bytesRead;
        }
        return buffer.subarray(0, read);
      } finally {
        await fh.close();
      }
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw ioError('STORAGE_EXCEPTION', `cannot read ${file}`, err);
    }
  }

  async getToFile(location: string, file: string): Promise<boolean> {
    const source = this.localPath(location);
    const tmp = `${file}.${crypto.randomUUID()}.tmp`;
    try {
      await fs.promises.copyFile(source, tmp);
      await fs.promises.rename(tmp, file);
      return true;
    } catch (err) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      if (isMissing(err)) return false;
      throw ioError('STORAGE_EXCEPTION', `cannot copy ${source} to ${file}`, err);
    }
  }

  async head(location: string): Promise<ObjectHead | undefined> {
    const file = this.localPath(location);
    try {
      const stat = await fs.promises.stat(file, { bigint: true });
      if (!stat.isFile()) return undefined;
      return { location, size: Number(stat.size), lastModifiedMs: Number(stat.mtimeMs), etag: `${stat.ino}-${stat.ctimeNs}-${stat.size}` };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw ioError('STORAGE_EXCEPTION', `cannot stat ${file}`, err);
    }
  }

  async list(dir: string): Promise<ObjectInfo[]> {
    const root = this.localPath(dir);
    const out: ObjectInfo[] = [];
    const walk = async (at: string, prefix: string): Promise<void> => {
      let entries: fs.Dirent[];
      try {
        entries = await fs.promises.readdir(at, { withFileTypes: true });
      } catch (err) {
        if (isMissing(err)) return;
        throw ioError('STORAGE_EXCEPTION', `cannot list ${at}`, err);
      }
      for (const e of entries) {
        const child = path.join(at, e.name);
        if (e.isDirectory()) await walk(child, `${prefix}${e.name}/`);
        else if (e.isFile()) {
          const stat = await fs.promises.stat(child).catch(() => undefined); // deleted meanwhile
          if (stat) out.push({ location: `${dir.replace(/\/+$/, '')}/${prefix}${e.name}`, size: stat.size, lastModifiedMs: stat.mtimeMs });
        }
      }
    };
    await walk(root, '');
    return out.sort((a, b) => (a.location < b.location ? -1 : a.location > b.location ? 1 : 0));
  }

  async listDirectories(dir: string): Promise<string[]> {
    const root = this.localPath(dir);
    try {
      const entries = await fs.promises.readdir(root, { withFileTypes: true });
      return entries.filter((e) => e.isDirectory()).map((e) => e.name).sort();
    } catch (err) {
      if (isMissing(err)) return [];
      throw ioError('STORAGE_EXCEPTION', `cannot list ${root}`, err);
    }
  }

  async delete(location: string): Promise<void> {
    const file = this.localPath(location);
    await fs.promises.rm(file, { force: true }).catch((err: unknown) => {
      throw ioError('STORAGE_EXCEPTION', `cannot delete ${file}`, err);
    });
  }

  async deleteMany(locations: readonly string[]): Promise<void> {
    await Promise.all(locations.map((l) => this.delete(l)));
  }

  async deleteDirectory(dir: string): Promise<void> {
    const root = this.localPath(dir);
    await fs.promises.rm(root, { recursive: true, force: true }).catch((err: unknown) => {
      throw ioError('STORAGE_EXCEPTION', `cannot delete ${root}`, err);
    });
  }

  async publish(location: string, body: Uint8Array | string, expected: PublishExpectation): Promise<ObjectHead | undefined> {
    if ('absent' in expected) {
      let won = true;
      await this.writeThenPlace(location, (file) => file.write(body), async (tmp, file) => {
        try {
          await fs.promises.link(tmp, file);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
          won = false;
        } finally {
          await fs.promises.unlink(tmp).catch(() => {});
        }
      });
      return won ? this.head(location) : undefined;
    }
    const release = await this.lock(this.localPath(location));
    try {
      if ((await this.head(location))?.etag !== expected.etag) return undefined;
      await this.put(location, body);
      return await this.head(location);
    } finally {
      await release();
    }
  }

  /** Writes a temp file beside the target with `write` (paced syncs), fsyncs it, `place`s it, and fsyncs the directory. */
  private async writeThenPlace(location: string, write: (file: PacedFileWriter) => Promise<void>, place: (tmp: string, file: string) => Promise<void>): Promise<void> {
    const file = this.localPath(location);
    const dir = path.dirname(file);
    const tmp = `${file}.${crypto.randomUUID()}.tmp`;
    try {
      await makeDurableDirectory(dir);
      const fh = await fs.promises.open(tmp, 'wx');
      try {
        await write(new PacedFileWriter(fh));
        await fh.datasync();
      } finally {
        await fh.close();
      }
      await place(tmp, file);
      await syncDirectory(dir);
    } catch (err) {
      await fs.promises.rm(tmp, { force: true }).catch(() => {});
      throw ioError('STORAGE_EXCEPTION', `cannot write ${file}`, err);
    }
  }

  /** Holds `<file>.lock`, breaking one older than the lock timeout (its holder died). */
  private async lock(file: string): Promise<() => Promise<void>> {
    const lockFile = `${file}.lock`;
    await makeDurableDirectory(path.dirname(file));
    for (;;) {
      try {
        await (await fs.promises.open(lockFile, 'wx')).close();
        return () => fs.promises.rm(lockFile, { force: true });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError('STORAGE_EXCEPTION', `cannot lock ${file}`, err);
      }
      const stat = await fs.promises.stat(lockFile).catch(() => undefined);
      if (stat && Date.now() - stat.mtimeMs > this.lockTimeoutMs) await fs.promises.rm(lockFile, { force: true });
      else await sleep(LOCK_WAIT_MS);
    }
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

async function syncDirectory(dir: string): Promise<void> {
  const dh = await fs.promises.open(dir, 'r');
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}

/** Creates `dir` and its missing parents so that they survive a crash. */
export async function makeDurableDirectory(dir: string): Promise<void> {
  const first = await fs.promises.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  // A new directory's entry is durable once the directory holding it is synced.
  const top = path.dirname(first);
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    await syncDirectory(d);
    if (d === top || d === path.dirname(d)) break;
  }
}
