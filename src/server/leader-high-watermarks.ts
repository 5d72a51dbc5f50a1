/**
 * The high watermarks of a cluster's lake-enabled tables, as the coordinator reports tiering lag
 * with them. On one node the tablet server in the process answers at once; in a cluster they live
 * on each bucket's leader, so the coordinator asks the leaders (ListOffsets, through the client)
 * every REFRESH_MS and answers from the last round. A bucket whose leader did not answer keeps the
 * value it had.
 */
import type { Connection } from '../client/index.js';
import type { TableInfo } from '../common/schema.js';
import type { Logger } from '../common/logger.js';
import type { Coordinator } from './coordinator/coordinator.js';

const REFRESH_MS = 2_000;

export interface BucketHighWatermark {
  partitionId?: number;
  partitionName?: string;
  bucket: number;
  highWatermark: bigint;
}

export class LeaderHighWatermarks {
  private readonly byTable = new Map<number, Map<string, BucketHighWatermark>>();
  private readonly timer: NodeJS.Timeout;
  private refreshing = false;

  constructor(
    private readonly conn: Connection,
    private readonly coordinator: Coordinator,
    /** The tables to follow, read at each round. */
    private readonly tables: () => TableInfo[],
    private readonly log: Logger,
  ) {
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS).unref();
  }

  /** The last known high watermark of each bucket of the table. */
  of(tableId: number): BucketHighWatermark[] {
    return [...(this.byTable.get(tableId)?.values() ?? [])];
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async refresh(): Promise<void> {
    if (this.refreshing) return;
    this.refreshing = true;
    try {
      const tables = this.tables();
      for (const id of this.byTable.keys()) if (!tables.some((t) => t.tableId === id)) this.byTable.delete(id);
      for (const table of tables) {
        const partitions = new Map(this.coordinator.listPartitions(table.path).map((p) => [p.partitionName, p.partitionId]));
        const known = this.byTable.get(table.tableId) ?? new Map<string, BucketHighWatermark>();
        this.byTable.set(table.tableId, known);
        for (const b of await this.conn.getAdmin().listBuckets(table.path)) {
          if (b.highWatermark === null) continue;
          const partitionId = b.partition === undefined ? undefined : partitions.get(b.partition);
          known.set(`${b.partition ?? ''}/${b.bucket}`, {
            ...(b.partition !== undefined && partitionId !== undefined ? { partitionId, partitionName: b.partition } : {}),
            bucket: b.bucket,
            highWatermark: b.highWatermark,
          });
        }
      }
    } catch (err) {
      this.log.debug({ err }, 'could not read the high watermarks of the lake tables');
    } finally {
      this.refreshing = false;
    }
  }
}
