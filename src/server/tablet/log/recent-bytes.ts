/**
 * The last bytes appended to the active segment's file, at most `capacity`, in a ring of memory
 * that is reused: a read that starts within them is served without a file read, which would wait
 * for a thread of the pool. Readers of the log's head (a consumer that keeps up, a union read's
 * tail) are such reads.
 *
 * Appended bytes are copied in, so whoever appended them may reuse their memory at once (request
 * frames are pooled, rpc/frame-pool.ts). The ring grows by doubling up to `capacity` as bytes
 * arrive, so a segment that receives little holds little.
 */
const FIRST_RING = 64 * 1024;

export class RecentBytes {
  private ring = Buffer.alloc(0);
  /** File position of the first byte kept; `start === end` when nothing is. */
  private start = 0;
  /** File position after the last byte kept. */
  private end = 0;

  constructor(private readonly capacity: number) {}

  /** `bytes` were written at file position `position`, right after what was appended before. */
  append(position: number, bytes: Uint8Array): void {
    const length = bytes.length;
    // A batch larger than the whole ring would push out everything and could not be read whole
    // from it.
    if (length > this.capacity) {
      this.start = this.end = position + length;
      return;
    }
    if (length === 0) return;
    if (position !== this.end) this.start = this.end = position; // a gap (not expected): nothing kept follows on
    const kept = this.end - this.start;
    if (kept + length > this.ring.length && this.ring.length < this.capacity) this.grow(kept + length);
    // The ring now holds at least `length` bytes: the oldest make room.
    this.start = Math.max(this.start, position + length - this.ring.length);
    this.copyIn(bytes, position);
    this.end = position + length;
  }

  /**
   * Copies into `buf` the bytes of [position, position + length) up to the last appended, as a
   * file read would; -1 when `position` is not kept.
   */
  read(buf: Buffer, length: number, position: number): number {
    if (this.start === this.end || position < this.start) return -1;
    const n = Math.max(0, Math.min(length, this.end - position));
    const size = this.ring.length;
    const at = position % size;
    const first = Math.min(n, size - at);
    this.ring.copy(buf, 0, at, at + first);
    if (first < n) this.ring.copy(buf, first, 0, n - first);
    return n;
  }

  /** Drops what is kept and the ring's memory (the segment stops being the active one). */
  clear(): void {
    this.ring = Buffer.alloc(0);
    this.start = this.end = 0;
  }

  private grow(needed: number): void {
    let size = Math.max(FIRST_RING, this.ring.length);
    while (size < needed) size *= 2;
    const ring = Buffer.allocUnsafe(Math.min(size, this.capacity));
    const old = this.ring;
    const kept = this.end - this.start;
    this.ring = ring;
    if (kept === 0) return;
    // Re-place the kept bytes by their file position in the bigger ring.
    const copy = Buffer.allocUnsafe(kept);
    const at = this.start % old.length;
    const first = Math.min(kept, old.length - at);
    old.copy(copy, 0, at, at + first);
    if (first < kept) old.copy(copy, first, 0, kept - first);
    this.copyIn(copy, this.start);
  }

  /** Writes `bytes` at their file position `position` into the ring (at most its size). */
  private copyIn(bytes: Uint8Array, position: number): void {
    const size = this.ring.length;
    const at = position % size;
    const first = Math.min(bytes.length, size - at);
    this.ring.set(bytes.subarray(0, first), at);
    if (first < bytes.length) this.ring.set(bytes.subarray(first), 0);
  }
}
