/**
 * `TableFollower`: a LogScanner kept subscribed to every bucket of a table, and of every partition
 * of a partitioned table: partitions created later are picked up (listed again every
 * `refreshMs`) and read from their start, dropped ones are let go.
 *
 *   const follower = new TableFollower(conn, table.info, table.newScan().createLogScanner(), 'earliest');
 *   await follower.start();
 *   for (;;) for (const r of await follower.poll(500)) console.log(r.offset, r.row);
 */
import { TributaryError } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import { Admin, type OffsetSpec } from './admin.js';
import type { ConnectionCore } from './connection-core.js';
import type { BucketRef, LogScanner, ScanRecord } from './log-scanner.js';
import type { ScanBatch } from './scan-batch.js';

/** Where a bucket starts: one place for all, or per bucket (partition name undefined for tables without partitions). */
export type FollowFrom = bigint | OffsetSpec | ((bucket: number, partition: string | undefined) => bigint | OffsetSpec);

const DEFAULT_REFRESH_MS = 2000;

export class TableFollower {
  private readonly partitioned: boolean;
  private readonly subscribed = new Set<string>();
  private refreshed = 0;

  /** `from`: where the buckets there are at `start()` begin; partitions created after begin at their start. */
  constructor(
    private readonly conn: ConnectionCore,
    private readonly info: TableInfo,
    readonly scanner: LogScanner,
    private readonly from: FollowFrom,
    private readonly refreshMs = DEFAULT_REFRESH_MS,
  ) {
    this.partitioned = info.partitionKeys.length > 0;
  }

  /** Subscribes every bucket (of every partition) there is now. */
  async start(): Promise<void> {
    await this.refresh(true);
  }

  async poll(timeoutMs: number): Promise<ScanRecord[]> {
    return this.read(() => this.scanner.poll(timeoutMs));
  }

  async pollBatches(timeoutMs: number): Promise<ScanBatch[]> {
    return this.read(() => this.scanner.pollBatches(timeoutMs));
  }

  close(): void {
    this.scanner.close();
  }

  private async read<T>(poll: () => Promise<T[]>): Promise<T[]> {
    let out: T[];
    try {
      out = await poll();
    } catch (err) {
      if (!(err instanceof TributaryError) || !this.partitioned) throw err;
      // A partition dropped meanwhile: let it go and carry on with the others.
      if (await this.refresh(false)) return [];
      throw err;
    }
    if (this.partitioned && Date.now() - this.refreshed >= this.refreshMs) await this.refresh(false);
    return out;
  }

  /** Subscribes new partitions and lets dropped ones go; true when anything changed. */
  private async refresh(initial: boolean): Promise<boolean> {
    const buckets = Array.from({ length: this.info.bucketCount }, (_, b) => b);
    const start = (bucket: number, partition: string | undefined): bigint | OffsetSpec => {
      if (!initial) return 0n; // a partition created since: from its first offset
      return typeof this.from === 'function' ? this.from(bucket, partition) : this.from;
    };
    if (!this.partitioned) {
      if (!initial) return false;
      for (const b of buckets) await this.scanner.subscribe(b, start(b, undefined));
      return true;
    }
    this.refreshed = Date.now();
    const names = new Set((await new Admin(this.conn).listPartitionInfos(this.info.path)).map((p) => p.partitionName));
    let changed = false;
    for (const name of this.subscribed) {
      if (names.has(name)) continue;
      for (const bucket of buckets) this.scanner.unsubscribe({ partition: name, bucket });
      this.subscribed.delete(name);
      changed = true;
    }
    for (const name of names) {
      if (this.subscribed.has(name)) continue;
      try {
        for (const bucket of buckets) await this.scanner.subscribe({ partition: name, bucket } satisfies BucketRef, start(bucket, name));
      } catch (err) {
        // Dropped since listed.
        if (!(err instanceof TributaryError) || err.errorName !== 'PARTITION_NOT_EXISTS') throw err;
        for (const bucket of buckets) this.scanner.unsubscribe({ partition: name, bucket });
        continue;
      }
      this.subscribed.add(name);
      changed = true;
    }
    return changed;
  }
}
