/**
 * Leader-epoch cache: for each leader epoch that wrote to the log, the first offset it wrote
 * (what replication needs to find where a follower's log diverges from the leader's).
 *
 * File `leader-epoch-checkpoint` (checkpoint-file.ts layout), one entry per epoch:
 *   <epoch> <startOffset>      epochs and start offsets strictly increasing
 *
 * Invariants: entries are strictly increasing in both fields; every start offset lies in
 * [logStartOffset, logEndOffset); batches carry the epoch that wrote them, so the part of the cache
 * after the recovery point is rebuilt from batch headers on recovery.
 */
import { readCheckpoint, writeCheckpoint } from './checkpoint-file.js';

export const LEADER_EPOCH_FILE = 'leader-epoch-checkpoint';

interface EpochEntry {
  epoch: number;
  startOffset: bigint;
}

export class LeaderEpochCache {
  private entries: EpochEntry[] = [];

  /** The cache saved in `dir`, or undefined when there is no file. Throws when it is malformed. */
  static async load(dir: string): Promise<LeaderEpochCache | undefined> {
    const rows = await readCheckpoint(dir, LEADER_EPOCH_FILE, 2);
    if (!rows) return undefined;
    const cache = new LeaderEpochCache();
    for (const [epoch, start] of rows) cache.assign(Number(epoch), start);
    return cache;
  }

  /** The latest epoch that wrote to the log, -1 when none has. */
  get latestEpoch(): number {
    return this.entries.length === 0 ? -1 : this.entries[this.entries.length - 1].epoch;
  }

  /** Records that `epoch` starts writing at `startOffset`; older or equal epochs change nothing. */
  assign(epoch: number, startOffset: bigint): void {
    const last = this.entries[this.entries.length - 1];
    if (last && (epoch <= last.epoch || startOffset <= last.startOffset)) return;
    this.entries.push({ epoch, startOffset });
  }

  /**
   * Kafka's OffsetsForLeaderEpoch: the largest epoch at most `epoch` that wrote to the log and the
   * offset where it ends, the start of the next epoch or `logEndOffset` for the latest;
   * `{ epoch: -1, endOffset: -1n }` when every epoch of the log is newer (or there is none).
   */
  endOffsetFor(epoch: number, logEndOffset: bigint): { epoch: number; endOffset: bigint } {
    let i = this.entries.length - 1;
    while (i >= 0 && this.entries[i].epoch > epoch) i--;
    if (i < 0) return { epoch: -1, endOffset: -1n };
    const next = this.entries[i + 1];
    return { epoch: this.entries[i].epoch, endOffset: next ? next.startOffset : logEndOffset };
  }

  /** Drops epochs starting at or after `endOffset` (the log was cut there). */
  truncateFromEnd(endOffset: bigint): void {
    while (this.entries.length > 0 && this.entries[this.entries.length - 1].startOffset >= endOffset) this.entries.pop();
  }

  /** Drops epochs wholly before `startOffset`; the epoch holding it now starts there. */
  truncateFromStart(startOffset: bigint): void {
    let i = 0;
    while (i + 1 < this.entries.length && this.entries[i + 1].startOffset <= startOffset) i++;
    this.entries = this.entries.slice(i);
    if (this.entries.length > 0 && this.entries[0].startOffset < startOffset) this.entries[0] = { ...this.entries[0], startOffset };
  }

  /** The checkpoint entries of the cache as it is now. */
  snapshot(): bigint[][] {
    return this.entries.map((e) => [BigInt(e.epoch), e.startOffset]);
  }

  /** Replaces the checkpoint file of `dir` with `snapshot` (made by `snapshot()`), atomically. */
  static save(dir: string, snapshot: readonly (readonly bigint[])[]): Promise<void> {
    return writeCheckpoint(dir, LEADER_EPOCH_FILE, snapshot);
  }
}
