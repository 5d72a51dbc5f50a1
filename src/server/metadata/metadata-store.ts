/**
 * The cluster's metadata, behind an interface shaped like a hierarchical key-value store (paths such
 * as `/databases/<db>/tables/<table>`), so that the coordinator works the same on the local store
 * of one node (local-metadata-store.ts) and on ZooKeeper for a cluster (zookeeper-metadata-store.ts).
 *
 * Invariants: a commit applies all of its operations or none; a committed change survives kill -9;
 * `nextId` never hands out the same id twice, across restarts.
 */
export type MetadataOp =
  | { op: 'put'; path: string; value: unknown }
  | { op: 'delete'; path: string; recursive?: boolean };

export interface MetadataStore {
  get<T>(path: string): T | undefined;
  /** Names of the direct children of `path`, sorted. */
  children(path: string): string[];
  /** Applies the operations atomically and durably. */
  commit(ops: MetadataOp[]): Promise<void>;
  /** Allocates the next value of a named counter (durably); with `count`, that many consecutive values, returning the first. */
  nextId(counter: string, count?: number): Promise<number>;
  close(): Promise<void>;
}
