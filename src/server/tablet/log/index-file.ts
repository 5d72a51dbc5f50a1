/**
 * A sparse index of one log segment: fixed-size entries (key → value), both columns strictly
 * increasing. Subclasses own the file grammar (OffsetIndex, TimeIndex).
 *
 * Invariants:
 * - entries live in memory as typed columns; the file holds a prefix of them until `flush()`;
 * - the file carries no checksum: a segment rebuilds its index from the log for everything after
 *   the recovery point, and `load()` keeps only the longest strictly increasing prefix;
 * - the file is written only by `flush()` (at checkpoint, roll and close), never per append, so
 *   appending costs no system call; flushes run one at a time and entries appended during one are
 *   left to the next.
 */
import fs from 'node:fs';
import { storageError } from './storage-error.js';

const INITIAL_CAPACITY = 64;

export abstract class IndexFile {
  private keys = new Float64Array(INITIAL_CAPACITY);
  private values = new Int32Array(INITIAL_CAPACITY);
  private count = 0;
  /** Entries known to be in the file, equal to memory. */
  private persisted = 0;
  /** A new index has no file yet: the first flush creates it. */
  private dirty = true;
  private flushing: Promise<void> = Promise.resolve();

  protected constructor(
    readonly path: string,
    private readonly entrySize: number,
  ) {}

  protected abstract encodeEntry(buf: Buffer, at: number, key: number, value: number): void;
  protected abstract decodeKey(buf: Buffer, at: number): number;
  protected abstract decodeValue(buf: Buffer, at: number): number;

  get length(): number {
    return this.count;
  }

  keyAt(i: number): number {
    return this.keys[i];
  }

  valueAt(i: number): number {
    return this.values[i];
  }

  /** The last key, or -Infinity when empty. */
  get lastKey(): number {
    return this.count === 0 ? -Infinity : this.keys[this.count - 1];
  }

  /**
   * Reads the file. Returns true when it exists and every entry is in order; otherwise keeps the
   * ordered prefix (if any) and returns false, and the owner rebuilds what is missing.
   */
  async load(): Promise<boolean> {
    let buf: Buffer;
    try {
      buf = await fs.promises.readFile(this.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw storageError(`cannot read index ${this.path}`, err);
      this.count = 0;
      this.persisted = 0;
      this.dirty = true; // the next flush creates the file
      return false;
    }
    const n = Math.floor(buf.length / this.entrySize);
    this.reserve(n);
    this.count = 0;
    for (let i = 0; i < n; i++) {
      const at = i * this.entrySize;
      const key = this.decodeKey(buf, at);
      const value = this.decodeValue(buf, at);
      if (value < 0 || (this.count > 0 && (key <= this.keys[this.count - 1] || value <= this.values[this.count - 1]))) break;
      this.keys[this.count] = key;
      this.values[this.count] = value;
      this.count++;
    }
    this.persisted = this.count;
    this.dirty = this.count * this.entrySize !== buf.length;
    return !this.dirty;
  }

  append(key: number, value: number): void {
    this.reserve(this.count + 1);
    this.keys[this.count] = key;
    this.values[this.count] = value;
    this.count++;
    this.dirty = true;
  }

  /** Index of the last entry whose key is at most `key`, or -1. */
  floor(key: number): number {
    let lo = 0;
    let hi = this.count - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      if (this.keys[mid] <= key) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }

  /** Keeps the first `count` entries. */
  truncate(count: number): void {
    if (count >= this.count) return;
    this.count = count;
    this.persisted = Math.min(this.persisted, count);
    this.dirty = true;
  }

  /** Writes the entries not yet in the file, cuts what was truncated, and fsyncs. */
  flush(): Promise<void> {
    const run = this.flushing.then(() => this.write());
    this.flushing = run.catch(() => undefined);
    return run;
  }

  private async write(): Promise<void> {
    if (!this.dirty) return;
    // Entries appended while this runs (a checkpoint runs beside appends) go in the next flush.
    const upTo = this.count;
    const from = this.persisted;
    const buf = Buffer.allocUnsafe((upTo - from) * this.entrySize);
    for (let i = from; i < upTo; i++) {
      this.encodeEntry(buf, (i - from) * this.entrySize, this.keys[i], this.values[i]);
    }
    try {
      const fh = await fs.promises.open(this.path, fs.constants.O_RDWR | fs.constants.O_CREAT);
      try {
        if (buf.length > 0) await fh.write(buf, 0, buf.length, from * this.entrySize);
        await fh.truncate(upTo * this.entrySize);
        await fh.datasync();
      } finally {
        await fh.close();
      }
    } catch (err) {
      throw storageError(`cannot write index ${this.path}`, err);
    }
    // A truncate meanwhile (recovery only) leaves `persisted` at most the new count.
    this.persisted = Math.min(upTo, this.count);
    this.dirty = this.persisted !== this.count || upTo !== this.count;
  }

  private reserve(n: number): void {
    if (n <= this.keys.length) return;
    let capacity = this.keys.length * 2;
    while (capacity < n) capacity *= 2;
    const keys = new Float64Array(capacity);
    keys.set(this.keys.subarray(0, this.count));
    const values = new Int32Array(capacity);
    values.set(this.values.subarray(0, this.count));
    this.keys = keys;
    this.values = values;
  }
}
