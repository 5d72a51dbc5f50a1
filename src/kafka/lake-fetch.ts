/**
 * Fetches below the log start of a lake-enabled topic: the lake holds what retention deleted from
 * the log (a segment is deleted only once the lake holds it), so a partition whose FetchLog answers
 * LOG_OFFSET_OUT_OF_RANGE reads the lake rows from the fetch offset, at their log offsets, up to
 * the first offset the lake does not hold, where the log continues: no gap, and the Kafka offset
 * stays the log offset.
 *
 * A read is bounded as a log read is, by the response's fetch budget (fetch-budget.ts): a lake run
 * (consecutive offsets, one commit time) becomes one Kafka batch, cut to the rows that fit, the
 * rest kept for the next Fetch. The lake is read one file group at a time, so each partition's
 * read stays open between fetches (at most `maxCursors`, the least recently used dropped): a
 * consumer's next Fetch starts where the last one stopped.
 */
import { tableOption } from '../common/config.js';
import type { TableInfo } from '../common/schema.js';
import type { LakeCursor, LakeHistory, LakeRun } from './backend.js';
import type { PartitionBudget } from './fetch-budget.js';
import type { NewKafkaBatch } from './records/record-batch.js';

/** An open read of a bucket's lake rows and the runs read but not yet sent. */
interface OpenRead {
  cursor: LakeCursor;
  /** The offset the next Fetch of the partition continues at. */
  next: bigint;
  pending: LakeRun[];
}

export class LakeFetch {
  /** Open reads by table id, schema id and bucket, least recently used first. */
  private readonly reads = new Map<string, OpenRead>();

  constructor(
    private readonly history: LakeHistory,
    private readonly maxCursors: number,
  ) {}

  static enabledFor(table: TableInfo): boolean {
    return tableOption(table.properties, 'table.datalake.enabled') === 'true';
  }

  /** Whether the lake holds rows of the bucket at or after `from`. */
  async holds(table: TableInfo, bucket: number, from: bigint): Promise<boolean> {
    return (await this.history.open(table, bucket, from)) !== undefined;
  }

  /**
   * Adds the lake's records of a bucket from `from` to `budget`, `records` giving a run's, and
   * returns the offset the lake part ends at; nothing is added when the lake holds no row at or
   * after `from` below its end (the log continues at `endOffset`). Undefined when the lake holds
   * nothing there.
   */
  async read(table: TableInfo, bucket: number, from: bigint, budget: PartitionBudget, records: (run: LakeRun) => NewKafkaBatch['records']): Promise<{ endOffset: bigint } | undefined> {
    const key = `${table.tableId}/${table.schemaId}/${bucket}`;
    let read = this.reads.get(key);
    this.reads.delete(key);
    if (read?.next !== from) {
      const cursor = await this.history.open(table, bucket, from);
      if (!cursor) return undefined;
      read = { cursor, next: from, pending: [] };
    }
    let ended = false;
    while (!budget.full) {
      const run = read.pending.shift() ?? (await this.nextRun(read));
      if (!run) {
        ended = true;
        break;
      }
      const taken = budget.add({ baseOffset: run.baseOffset, partitionLeaderEpoch: -1, records: records(run) });
      read.next = run.baseOffset + BigInt(taken);
      // The rows that did not fit, for the next Fetch.
      if (taken < run.batch.numRows) read.pending.unshift({ ...run, baseOffset: read.next, batch: run.batch.slice(taken) });
    }
    const endOffset = read.cursor.endOffset;
    if (!ended) {
      this.reads.set(key, read);
      for (const oldest of this.reads.keys()) {
        if (this.reads.size <= this.maxCursors) break;
        this.reads.delete(oldest);
      }
    }
    return { endOffset };
  }

  /** The next run of the lake read (its next file group when the runs read so far are sent). */
  private async nextRun(read: OpenRead): Promise<LakeRun | undefined> {
    for (;;) {
      const runs = await read.cursor.next();
      if (!runs) return undefined;
      read.pending.push(...runs);
      const run = read.pending.shift();
      if (run) return run;
    }
  }
}
