/**
 * A bounded local cache of immutable remote files (lake data and delete files on S3), for readers
 * that need a local path: DuckDB cannot read S3 here. A file is fetched whole, once, into
 * `<dir>/<sha256 of its location>` and kept. A reader that needs only a part of a file (some
 * columns, some row groups of a Parquet file) may have the cache build a file of that part
 * instead, kept as `<dir>/<sha256 of location#part>`; it gets the whole file's copy whenever the
 * cache has one, else the copy of any part it says covers its own.
 * Past `maxBytes` the least recently used files are deleted, never one that is pinned (a planned
 * read holds its files until it is released, so a running query's files stay). Pinned files may
 * hold the cache above its size for that long.
 * Files a writer uploads can be adopted from their staging file, so a fresh file is read locally.
 *
 * The files directly in the directory are the cache's own: those it does not know (a previous
 * process's) are deleted when it opens. Subdirectories are left alone (another process's cache,
 * such as the embedded tiering worker's, may live in one).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { countCacheRead } from './storage-stats.js';
import { TributaryError } from '../common/errors.js';
import type { ObjectStore } from './object-store.js';

interface Entry {
  file: string;
  size: number;
  pins: number;
  /** Resolves once the file is in place; a fetch in flight is shared. */
  ready: Promise<void>;
  /** The location and part of a part's copy. */
  part?: { location: string; name: string };
}

export class FileCache {
  /** Entries by location, least recently used first (Map keeps insertion order). */
  private readonly entries = new Map<string, Entry>();
  /** The parts held of each location, by name. */
  private readonly parts = new Map<string, Set<string>>();
  private bytes = 0;
  private cleared?: Promise<void>;

  constructor(
    readonly dir: string,
    readonly maxBytes: number,
  ) {}

  /** Bytes the cache holds now. */
  get size(): number {
    return this.bytes;
  }

  /** A new path in the cache's directory for a file a writer stages before upload. */
  async stagingPath(): Promise<string> {
    await this.open();
    return path.join(this.dir, `staging-${crypto.randomUUID()}.tmp`);
  }

  /** Takes `staged`, just uploaded as `location`, as the cached copy of `location`. */
  async adopt(location: string, staged: string): Promise<void> {
    const file = this.pathOf(location);
    const size = (await fs.promises.stat(staged)).size;
    await fs.promises.rename(staged, file);
    this.forget(location);
    this.add(location, { file, size, pins: 0, ready: Promise.resolve() });
  }

  /** The local copy of each location (fetched from `store` when missing), pinned until `release`d. */
  async pin(store: ObjectStore, locations: readonly string[]): Promise<PinnedFiles> {
    await this.open();
    return this.pinEach([...new Set(locations)].map((location) => ({ key: location, fill: (file) => fetchWhole(store, location, file) })));
  }

  /**
   * A local file of `location` that holds at least its part named `part`, pinned until
   * `release`d: the whole file's copy when the cache has it, else the copy of a part that
   * `covers` (the part itself among them), else the part `plan` says how to build, or (when
   * `plan` says nothing) the whole file fetched from `store`.
   */
  async pinPart(store: ObjectStore, location: string, part: string, covers: (held: string) => boolean, plan: () => Promise<PartBuilder | undefined>): Promise<PinnedFiles> {
    await this.open();
    const key = `${location}#${part}`;
    const held = this.entries.has(location) ? undefined : [part, ...(this.parts.get(location) ?? [])].find((p) => this.entries.has(`${location}#${p}`) && covers(p));
    if (!this.entries.has(location) && held === undefined) {
      const builder = await plan();
      if (builder) {
        const pinned = await this.pinEach([{ key, part: { location, name: part }, fill: builder }]);
        return { path: (l) => (l === location ? pinned.path(key) : undefined), release: pinned.release };
      }
    }
    const heldKey = held === undefined ? location : `${location}#${held}`;
    const pinned = await this.pinEach([{ key: heldKey, fill: (file) => fetchWhole(store, location, file) }]);
    return { path: (l) => (l === location ? pinned.path(heldKey) : undefined), release: pinned.release };
  }

  /** Pins the entry of each key, filling those missing; a fill writes the file and says how many bytes it fetched. */
  private async pinEach(items: readonly { key: string; part?: Entry['part']; fill: PartBuilder }[]): Promise<PinnedFiles> {
    const pinned: Entry[] = [];
    const paths = new Map<string, string>();
    const release = (): void => {
      for (const e of pinned.splice(0)) e.pins--;
      this.evict();
    };
    try {
      for (const { key, part, fill } of items) {
        let entry = this.entries.get(key);
        if (entry) {
          countCacheRead(true);
          this.entries.delete(key);
          this.entries.set(key, entry);
        } else {
          const file = this.pathOf(key);
          const created: Entry = { file, size: 0, pins: 0, ready: Promise.resolve(), ...(part ? { part } : {}) };
          created.ready = (async () => {
            const fetched = await fill(file);
            created.size = (await fs.promises.stat(file)).size;
            this.bytes += created.size;
            countCacheRead(false, fetched);
          })();
          created.ready.catch(() => this.entries.get(key) === created && this.remove(key, created));
          entry = created;
          this.entries.set(key, entry);
          if (part) this.parts.set(part.location, (this.parts.get(part.location) ?? new Set()).add(part.name));
        }
        entry.pins++;
        pinned.push(entry);
        paths.set(key, entry.file);
      }
      await Promise.all(pinned.map((e) => e.ready));
    } catch (err) {
      release();
      throw err;
    }
    this.evict();
    return { path: (key) => paths.get(key), release };
  }

  /** Whether the cache holds (or is fetching) the whole file's copy of `location`. */
  holds(location: string): boolean {
    return this.entries.has(location);
  }

  /** Where `location`'s copy is (or would be) kept. */
  pathOf(location: string): string {
    return path.join(this.dir, crypto.createHash('sha256').update(location).digest('hex'));
  }

  private add(location: string, entry: Entry): void {
    this.entries.set(location, entry);
    this.bytes += entry.size;
    this.evict();
  }

  private forget(location: string): void {
    const old = this.entries.get(location);
    if (!old) return;
    this.remove(location, old);
    this.bytes -= old.size;
  }

  /** Drops the entry of `key` (the caller accounts for its bytes). */
  private remove(key: string, entry: Entry): void {
    this.entries.delete(key);
    if (!entry.part) return;
    const names = this.parts.get(entry.part.location);
    names?.delete(entry.part.name);
    if (names?.size === 0) this.parts.delete(entry.part.location);
  }

  /** Deletes least recently used unpinned files while the cache is over its size. */
  private evict(): void {
    for (const [location, e] of this.entries) {
      if (this.bytes <= this.maxBytes) return;
      if (e.pins > 0 || e.size === 0) continue;
      this.remove(location, e);
      this.bytes -= e.size;
      fs.rmSync(e.file, { force: true });
    }
  }

  private open(): Promise<void> {
    return (this.cleared ??= (async () => {
      try {
        await fs.promises.mkdir(this.dir, { recursive: true });
        for (const e of await fs.promises.readdir(this.dir, { withFileTypes: true })) if (!e.isDirectory()) await fs.promises.rm(path.join(this.dir, e.name), { force: true });
      } catch (err) {
        throw new TributaryError('STORAGE_EXCEPTION', `cannot use the lake file cache ${this.dir}: ${(err as Error).message}`, { cause: err });
      }
    })());
  }
}

/** Writes a cache file at the path given (whole, then renamed into place) and says how many bytes it fetched for it. */
export type PartBuilder = (file: string) => Promise<number>;

async function fetchWhole(store: ObjectStore, location: string, file: string): Promise<number> {
  if (!(await store.getToFile(location, file))) throw new TributaryError('STORAGE_EXCEPTION', `cannot read ${location}: there is no such object`);
  return (await fs.promises.stat(file)).size;
}

/** Files held in a cache for one reader. */
export interface PinnedFiles {
  /** The local path of a pinned location. */
  path(location: string): string | undefined;
  /** Lets the cache evict them again. */
  release(): void;
}
