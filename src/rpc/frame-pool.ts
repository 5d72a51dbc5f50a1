/**
 * Reusable memory for request frames that arrive in more than one socket chunk, and for the bytes
 * of responses (records read from a log segment) until they are written to the socket.
 *
 * Without it, each large request (a ProduceLog of a few MB) is assembled in a fresh allocation.
 * At high append rates that is what sets off most of the server's full garbage collections (V8
 * collects when external memory grows), and the fresh pages must be faulted in by the OS, which
 * on a virtual machine can cost more than the copy itself. A pooled buffer is hot memory.
 *
 * Buffers come in power-of-two sizes from `minPooled` (64 KiB for request frames). A frame given
 * back puts its buffer on the free list of its size while the idle buffers stay within
 * `maxIdleBytes`; beyond that it is left to the garbage collector. Only buffers this pool made are
 * taken back, each once per take. A buffer that is never given back (its owner failed, or a write
 * never completed) is simply collected: losing one costs an allocation, reusing one too early
 * would hand out bytes something still reads or writes.
 */

/**
 * Idle memory a pool may keep out of a listener's in-flight budget (`server.buffer.memory-size`):
 * a quarter of it, so each pool of a server (request frames, response bytes, the Kafka listener's
 * frames) stays a fixed share of the memory planned for requests.
 */
export function idleShareOf(budgetBytes: number): number {
  return Math.floor(budgetBytes / 4);
}

/** Frames below this size are small enough to be concatenated as they are. */
export const MIN_POOLED_FRAME = 64 * 1024;

export class FramePool {
  private readonly free = new Map<number, Buffer[]>();
  /** Buffers handed out and not yet given back. */
  private readonly lent = new WeakSet<ArrayBufferLike>();
  private idle = 0;

  constructor(
    private readonly maxIdleBytes: number,
    /** Smaller buffers are allocated as they are (below 4 KiB Node takes them from a shared slab). */
    private readonly minPooled = MIN_POOLED_FRAME,
  ) {}

  /** Bytes held in idle buffers. */
  get idleBytes(): number {
    return this.idle;
  }

  /** A buffer of exactly `length` bytes (contents undefined); pooled when `length` ≥ `minPooled`. */
  take(length: number): Buffer {
    if (length < this.minPooled) return Buffer.allocUnsafe(length);
    const size = sizeClass(length);
    let whole = this.free.get(size)?.pop();
    if (whole) this.idle -= size;
    else whole = Buffer.allocUnsafeSlow(size);
    this.lent.add(whole.buffer);
    return whole.subarray(0, length);
  }

  /**
   * Gives back a buffer from `take` (or any view of it): nothing may read or write it afterwards.
   * Buffers the pool did not lend are ignored.
   */
  give(frame: Uint8Array): void {
    const memory = frame.buffer;
    if (!this.lent.delete(memory)) return;
    const size = memory.byteLength;
    if (this.idle + size > this.maxIdleBytes) return;
    let list = this.free.get(size);
    if (!list) this.free.set(size, (list = []));
    list.push(Buffer.from(memory, 0, size));
    this.idle += size;
  }
}

/**
 * The buffers one response takes from a pool, given back together once the response is written
 * (or left to the garbage collector when it never is).
 */
export class PoolLease {
  private taken: Buffer[] = [];

  constructor(private readonly pool: FramePool) {}

  /** A buffer of `length` bytes from the pool, held until `giveBack`. */
  readonly take = (length: number): Buffer => {
    const buf = this.pool.take(length);
    this.taken.push(buf);
    return buf;
  };

  /** Gives back every buffer taken: nothing may read or write them afterwards. */
  readonly giveBack = (): void => {
    for (const buf of this.taken) this.pool.give(buf);
    this.taken = [];
  };
}

/** The power of two at or above `length`. */
function sizeClass(length: number): number {
  return 2 ** Math.ceil(Math.log2(length));
}
