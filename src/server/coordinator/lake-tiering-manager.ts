/**
 * The coordinator's side of lake tiering (DESIGN.md §5): which lake-enabled table is tiered next,
 * by whom, and which lake snapshot holds which log offsets.
 *
 * Per table, a state machine:
 *
 *   SCHEDULED --(freshness elapsed since the last round started)--> PENDING (FIFO queue)
 *   PENDING   --(a worker asks for work)--> TIERING (new tiering epoch, lease renewed by heartbeats)
 *   TIERING   --(finished)--> SCHEDULED          --(force-finished: overran freshness)--> PENDING
 *   TIERING   --(failed, or no heartbeat for datalake.tiering.timeout)--> PENDING, epoch fenced
 *
 * Epochs come from a durable counter, so an epoch handed out before a coordinator restart is never
 * handed out again: a worker holding it is fenced. The registered lake snapshot of each table lives in
 * the metadata store (`…/tables/<table>/lake`); tablets learn its offsets so that log retention keeps
 * every segment the lake does not hold yet.
 */
import { parseDuration, tableOption } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';
import { type LakeBucketOffset, type LakeOffsetJson, lakeBucketKey, lakeOffsetsFromJson, lakeOffsetsToJson } from '../../common/lake.js';
import type { TableInfo, TablePath } from '../../common/schema.js';
import { tablePathString } from '../../common/schema.js';
import type { Logger } from '../../common/logger.js';
import type { MetadataStore } from '../metadata/metadata-store.js';

export interface LakeSnapshotRegistration {
  snapshotId: bigint;
  bucketOffsets: LakeBucketOffset[];
  /** When the coordinator registered the snapshot (ms). */
  commitTimestamp: number;
}

export type TieringState = 'SCHEDULED' | 'PENDING' | 'TIERING';

export interface TieringStatus {
  state: TieringState;
  epoch?: bigint;
  lastTieredTime?: number;
  failures: number;
  snapshot?: LakeSnapshotRegistration;
}

/** What the manager needs of the coordinator and the tablets. */
export interface TieringContext {
  store: MetadataStore;
  tablePathById(tableId: number): TablePath | undefined;
  tableInfo(path: TablePath): TableInfo;
  /** Tells the tablets what the lake now holds (retention gate). */
  lakeOffsetsChanged(table: TableInfo, offsets: readonly LakeBucketOffset[]): void;
  log: Logger;
}

interface TableTiering {
  tableId: number;
  state: TieringState;
  epoch?: bigint;
  leaseDeadline?: number;
  /** When a SCHEDULED table becomes PENDING. */
  dueAt?: number;
  /**
   * When the current round was assigned. The next one is due a freshness after it, not after its
   * end: rows that arrive just after a round planned its offsets then wait for the lake at most
   * freshness + the next round's time, instead of twice the round's time more.
   */
  roundStartedAt?: number;
  lastTieredTime?: number;
  failures: number;
}

interface StoredLakeSnapshot {
  snapshot_id: string;
  bucket_offsets: LakeOffsetJson[];
  commit_timestamp: number;
}

const lakePath = (p: TablePath): string => `/databases/${p.database}/tables/${p.table}/lake`;

export function isLakeEnabled(info: TableInfo): boolean {
  return info.properties['table.datalake.enabled'] === 'true';
}


export class LakeTieringManager {
  private readonly tables = new Map<number, TableTiering>();
  private readonly pending: number[] = [];
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly ctx: TieringContext,
    private readonly leaseTimeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Tracks every lake-enabled table; tables never tiered go straight to the queue. */
  start(tables: readonly TableInfo[], checkEveryMs = 1000): void {
    for (const info of tables) {
      const snapshot = this.lakeSnapshot(info.path);
      if (snapshot) this.ctx.lakeOffsetsChanged(info, snapshot.bucketOffsets);
      if (isLakeEnabled(info)) this.track(info, snapshot?.commitTimestamp);
    }
    this.timer = setInterval(() => this.tick(), checkEveryMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Called after a table is created or its options change. */
  tableChanged(info: TableInfo): void {
    const tracked = this.tables.has(info.tableId);
    if (isLakeEnabled(info) && !tracked) this.track(info, this.lakeSnapshot(info.path)?.commitTimestamp);
    else if (!isLakeEnabled(info) && tracked) this.untrack(info.tableId);
  }

  tableDropped(tableId: number): void {
    this.untrack(tableId);
  }

  // ------------------------------------------------------------------ worker protocol

  /** Hands the head of the queue to a worker, with a fresh epoch. */
  async assignTable(): Promise<{ tableId: number; path: TablePath; epoch: bigint } | undefined> {
    this.tick();
    while (this.pending.length > 0) {
      const tableId = this.pending.shift()!;
      const t = this.tables.get(tableId);
      const path = this.ctx.tablePathById(tableId);
      if (!t || !path || t.state !== 'PENDING') continue;
      t.epoch = BigInt(await this.ctx.store.nextId('tiering_epoch'));
      t.state = 'TIERING';
      t.roundStartedAt = this.now();
      t.leaseDeadline = t.roundStartedAt + this.leaseTimeoutMs;
      // Debug: an idle table is assigned a round every freshness; rounds that move data log their registered snapshot.
      this.ctx.log.debug({ table: tablePathString(path), epoch: t.epoch.toString() }, 'tiering round assigned');
      return { tableId, path, epoch: t.epoch };
    }
    return undefined;
  }

  /** Renews the lease of a table a worker is still tiering; throws FENCED_TIERING_EPOCH_EXCEPTION for a stale epoch. */
  renew(tableId: number, epoch: bigint): void {
    this.requireTiering(tableId, epoch).leaseDeadline = this.now() + this.leaseTimeoutMs;
  }

  /** The round ended: back to SCHEDULED, or straight to the queue when it overran the freshness. */
  finished(tableId: number, epoch: bigint, forceFinished: boolean): void {
    const t = this.requireTiering(tableId, epoch);
    t.lastTieredTime = this.now();
    t.failures = 0;
    if (forceFinished) this.enqueue(t);
    else this.schedule(t, t.roundStartedAt);
  }

  failed(tableId: number, epoch: bigint, reason: string): void {
    const t = this.requireTiering(tableId, epoch);
    t.failures++;
    this.ctx.log.warn({ tableId, epoch: epoch.toString(), reason, failures: t.failures }, 'tiering round failed');
    this.enqueue(t);
  }

  /**
   * Registers the lake snapshot a worker committed. Offsets never move backwards: a snapshot whose
   * offsets are behind the registered ones is an old one found again after a crash, and is ignored.
   */
  async commitSnapshot(tableId: number, epoch: bigint, snapshot: { snapshotId: bigint; bucketOffsets: LakeBucketOffset[] }): Promise<void> {
    this.requireTiering(tableId, epoch).leaseDeadline = this.now() + this.leaseTimeoutMs;
    const path = this.ctx.tablePathById(tableId)!;
    const info = this.ctx.tableInfo(path);
    const registered = this.lakeSnapshot(path);
    const merged = new Map((registered?.bucketOffsets ?? []).map((o) => [lakeBucketKey(o), o]));
    for (const o of snapshot.bucketOffsets) {
      const before = merged.get(lakeBucketKey(o));
      if (before && before.endOffset > o.endOffset) {
        this.ctx.log.warn({ table: tablePathString(path), snapshotId: snapshot.snapshotId.toString() }, 'lake snapshot behind the registered offsets ignored');
        return;
      }
      merged.set(lakeBucketKey(o), o);
    }
    const bucketOffsets = [...merged.values()];
    const stored: StoredLakeSnapshot = {
      snapshot_id: snapshot.snapshotId.toString(),
      bucket_offsets: lakeOffsetsToJson(bucketOffsets),
      commit_timestamp: this.now(),
    };
    await this.ctx.store.commit([{ op: 'put', path: lakePath(path), value: stored }]);
    this.ctx.lakeOffsetsChanged(info, bucketOffsets);
    this.ctx.log.info({ table: tablePathString(path), epoch: epoch.toString(), snapshotId: stored.snapshot_id, buckets: bucketOffsets.length }, 'lake snapshot registered');
  }

  // ------------------------------------------------------------------ reads

  lakeSnapshot(path: TablePath): LakeSnapshotRegistration | undefined {
    const s = this.ctx.store.get<StoredLakeSnapshot>(lakePath(path));
    if (!s) return undefined;
    return {
      snapshotId: BigInt(s.snapshot_id),
      commitTimestamp: s.commit_timestamp,
      bucketOffsets: lakeOffsetsFromJson(s.bucket_offsets),
    };
  }

  status(info: TableInfo): TieringStatus {
    const t = this.tables.get(info.tableId);
    if (!t) throw new TributaryError('INVALID_TABLE_EXCEPTION', `table '${tablePathString(info.path)}' is not lake-enabled (table.datalake.enabled)`);
    const snapshot = this.lakeSnapshot(info.path);
    return {
      state: t.state,
      failures: t.failures,
      ...(t.epoch !== undefined ? { epoch: t.epoch } : {}),
      ...(t.lastTieredTime !== undefined ? { lastTieredTime: t.lastTieredTime } : {}),
      ...(snapshot ? { snapshot } : {}),
    };
  }

  // ------------------------------------------------------------------ internals

  private track(info: TableInfo, lastTieredTime: number | undefined): void {
    const t: TableTiering = { tableId: info.tableId, state: 'SCHEDULED', failures: 0, ...(lastTieredTime !== undefined ? { lastTieredTime } : {}) };
    this.tables.set(info.tableId, t);
    if (lastTieredTime === undefined) this.enqueue(t);
    else this.schedule(t, lastTieredTime);
  }

  private untrack(tableId: number): void {
    this.tables.delete(tableId);
    const i = this.pending.indexOf(tableId);
    if (i >= 0) this.pending.splice(i, 1);
  }

  private freshnessMs(tableId: number): number {
    const path = this.ctx.tablePathById(tableId);
    return path ? parseDuration(tableOption(this.ctx.tableInfo(path).properties, 'table.datalake.freshness')!)! : 0;
  }

  private schedule(t: TableTiering, from = this.now()): void {
    t.state = 'SCHEDULED';
    t.epoch = undefined;
    t.leaseDeadline = undefined;
    t.dueAt = from + this.freshnessMs(t.tableId);
  }

  private enqueue(t: TableTiering): void {
    t.state = 'PENDING';
    t.epoch = undefined;
    t.leaseDeadline = undefined;
    t.dueAt = undefined;
    if (!this.pending.includes(t.tableId)) this.pending.push(t.tableId);
  }

  private requireTiering(tableId: number, epoch: bigint): TableTiering {
    const t = this.tables.get(tableId);
    if (!t || t.state !== 'TIERING' || t.epoch !== epoch) {
      throw new TributaryError('FENCED_TIERING_EPOCH_EXCEPTION', `tiering epoch ${epoch} of table ${tableId} is no longer current${t?.epoch !== undefined ? ` (current ${t.epoch})` : ''}`);
    }
    return t;
  }

  /** Moves due tables to the queue and expired leases back to it. */
  private tick(): void {
    const now = this.now();
    for (const t of this.tables.values()) {
      if (t.state === 'SCHEDULED' && t.dueAt !== undefined && t.dueAt <= now) this.enqueue(t);
      else if (t.state === 'TIERING' && t.leaseDeadline !== undefined && t.leaseDeadline <= now) {
        t.failures++;
        this.ctx.log.warn({ tableId: t.tableId, epoch: t.epoch?.toString() }, 'tiering worker timed out; table queued again and its epoch fenced');
        this.enqueue(t);
      }
    }
  }
}
