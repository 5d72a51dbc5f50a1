/**
 * The order in which Produce requests of one partition reach its log: the order they were taken
 * (the listener takes a connection's requests in the order they arrived). A request takes a turn
 * per partition synchronously when it starts, waits for the turns before it, and ends its turn
 * once it has handed its batches to the log (the log writes them in the order it is handed them)
 * or failed before that. It does not wait for the earlier requests' acknowledgements: a request
 * can be converted and written while the one before it waits for its fsync.
 */
export class ProduceTurns {
  /** The last turn taken per partition key, settled once it ended. */
  private readonly last = new Map<string, Promise<void>>();

  /** Takes a turn for each of `keys`: `ready` settles when the turns before end; call `end` once (more calls do nothing). */
  take(keys: readonly string[]): { ready: Promise<void>; end: () => void } {
    let end!: () => void;
    const mine = new Promise<void>((resolve) => (end = resolve));
    const before: Promise<void>[] = [];
    for (const key of keys) {
      const previous = this.last.get(key);
      if (previous) before.push(previous);
      this.last.set(key, mine);
    }
    return {
      ready: before.length === 0 ? Promise.resolve() : Promise.all(before).then(() => undefined),
      end: () => {
        end();
        // The map holds only turns that may still be waited for.
        for (const key of keys) if (this.last.get(key) === mine) this.last.delete(key);
      },
    };
  }

  /** Partitions with a turn not ended: none when the listener is idle. */
  get size(): number {
    return this.last.size;
  }
}
