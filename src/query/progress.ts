/**
 * Progress of a statement: the rows its reads and writes have handled so far, for the shell's
 * progress line on long statements. The listener is the statement's context (AsyncLocalStorage),
 * so readers report where they count rows, without a callback threaded through every reader;
 * outside a statement with a listener, counting costs one lookup per read or write.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface ProgressEvent {
  /** Rows read from a table (its log or state) or written to it. */
  phase: 'read' | 'write';
  /** The table, as `db.table`. */
  table: string;
  /** Rows so far, of this read or write. */
  rows: number;
  /** All the rows it will handle, when known. */
  total?: number;
}

export type ProgressListener = (event: ProgressEvent) => void;

const listeners = new AsyncLocalStorage<ProgressListener>();

/** Runs `work` with `listener` told the progress of the reads and writes within it. */
export function withProgress<T>(listener: ProgressListener | undefined, work: () => Promise<T>): Promise<T> {
  return listener ? listeners.run(listener, work) : work();
}

/** A counter of the rows one read or write handles: call it with each step's rows. */
export function rowCounter(phase: ProgressEvent['phase'], table: string, total?: number): (rows: number) => void {
  const listener = listeners.getStore();
  if (!listener) return () => undefined;
  let rows = 0;
  return (n) => {
    rows += n;
    listener({ phase, table, rows, ...(total !== undefined ? { total } : {}) });
  };
}
