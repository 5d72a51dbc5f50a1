/**
 * The lake tiering RPCs: LakeTieringHeartbeat and CommitLakeTableSnapshot (from tiering workers),
 * GetLakeSnapshot and GetLakeTieringStatus (from any client). Protobuf in, LakeTieringManager calls,
 * protobuf out.
 */
import { asTributaryError, TributaryError } from '../../common/errors.js';
import { lakeBucketKey } from '../../common/lake.js';
import type { TableInfo } from '../../common/schema.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import { fromPbLakeOffset, toPbLakeOffset } from '../../rpc/lake-offsets.js';
import { fieldError, idOf, intIn, optionalIdOf, tablePathOf } from '../../rpc/request-fields.js';
import type { ApiRegistrar } from '../../rpc/server.js';
import type { Coordinator } from './coordinator.js';

export interface TieringServiceDeps {
  coordinator: Coordinator;
  /** The lake's warehouse workers write to, and its format (datalake.format): workers and clients learn both from here. */
  warehouse: string;
  lakeFormat: string;
  highWatermarks(tableId: number): { partitionId?: number; partitionName?: string; bucket: number; highWatermark: bigint }[];
}

export function registerTieringService(rpc: ApiRegistrar, deps: TieringServiceDeps): void {
  const { coordinator, warehouse, lakeFormat } = deps;
  const tiering = coordinator.tiering;

  rpc.register(ApiKeys.LakeTieringHeartbeat, async (req) => {
    const errors: { tableId: bigint; errorCode: number; errorMessage: string }[] = [];
    const each = (tableId: bigint, task: () => void): void => {
      try {
        task();
      } catch (err) {
        const e = asTributaryError(err);
        errors.push({ tableId, errorCode: e.code, errorMessage: e.message });
      }
    };
    const api = ApiKeys.LakeTieringHeartbeat;
    req.tieringTables.forEach((t, i) => each(t.tableId, () => tiering.renew(idOf(api, `tiering_tables[${i}].table_id`, t.tableId), t.tieringEpoch)));
    req.finishedTables.forEach((t, i) => each(t.tableId, () => tiering.finished(idOf(api, `finished_tables[${i}].table_id`, t.tableId), t.tieringEpoch, false)));
    req.forceFinishedTables.forEach((t, i) => each(t.tableId, () => tiering.finished(idOf(api, `force_finished_tables[${i}].table_id`, t.tableId), t.tieringEpoch, true)));
    req.failedTables.forEach((t, i) => each(t.tableId, () => tiering.failed(idOf(api, `failed_tables[${i}].table_id`, t.tableId), t.tieringEpoch, t.errorMessage)));
    const assigned = req.requestTable ? await tiering.assignTable() : undefined;
    return {
      errors,
      ...(assigned
        ? {
            tieringTable: {
              tableId: BigInt(assigned.tableId),
              tablePath: { databaseName: assigned.path.database, tableName: assigned.path.table },
              tieringEpoch: assigned.epoch,
              warehouse,
              lakeFormat,
            },
          }
        : {}),
    };
  });

  rpc.register(ApiKeys.CommitLakeTableSnapshot, async (req) => {
    const api = ApiKeys.CommitLakeTableSnapshot;
    const tableId = idOf(api, 'table_id', req.tableId);
    if (req.snapshotId < 0n) throw fieldError(api, 'snapshot_id', `${req.snapshotId} is negative`);
    const bucketOffsets = req.bucketOffsets.map((o, i) => {
      const field = `bucket_offsets[${i}]`;
      intIn(api, `${field}.bucket_id`, o.bucketId, 0, 2 ** 31 - 1);
      optionalIdOf(api, `${field}.partition_id`, o.partitionId);
      if (o.logEndOffset < 0n) throw fieldError(api, `${field}.log_end_offset`, `${o.logEndOffset} is negative`);
      if (o.maxTimestamp !== undefined && (o.maxTimestamp < 0n || o.maxTimestamp > BigInt(Number.MAX_SAFE_INTEGER))) throw fieldError(api, `${field}.max_timestamp`, `${o.maxTimestamp} is out of range`);
      return fromPbLakeOffset(o);
    });
    await tiering.commitSnapshot(tableId, req.tieringEpoch, { snapshotId: req.snapshotId, bucketOffsets });
    return {};
  });

  rpc.register(ApiKeys.GetLakeSnapshot, async (req) => {
    const info = coordinator.getTableInfo(tablePathOf(ApiKeys.GetLakeSnapshot, req.tablePath));
    const snapshot = tiering.lakeSnapshot(info.path);
    if (!snapshot) throw new TributaryError('LAKE_SNAPSHOT_NOT_EXIST', `table '${info.path.database}.${info.path.table}' has no lake snapshot yet`);
    return {
      tableId: BigInt(info.tableId),
      snapshotId: snapshot.snapshotId,
      bucketOffsets: snapshot.bucketOffsets.map(toPbLakeOffset),
      commitTimestamp: BigInt(snapshot.commitTimestamp),
    };
  });

  rpc.register(ApiKeys.GetLakeTieringStatus, async (req) => {
    const info = coordinator.getTableInfo(tablePathOf(ApiKeys.GetLakeTieringStatus, req.tablePath));
    const { status, lagMs, buckets } = lakeTieringLag(deps, info);
    return {
      lagMs: BigInt(lagMs),
      tableId: BigInt(info.tableId),
      warehouse,
      lakeFormat,
      state: status.state,
      failures: BigInt(status.failures),
      ...(status.epoch !== undefined ? { tieringEpoch: status.epoch } : {}),
      ...(status.snapshot ? { snapshotId: status.snapshot.snapshotId } : {}),
      ...(status.lastTieredTime !== undefined ? { lastTieredTime: BigInt(status.lastTieredTime) } : {}),
      buckets: buckets.map((b) => ({
        ...(b.partitionId !== undefined ? { partitionId: BigInt(b.partitionId), partitionName: b.partitionName } : {}),
        bucketId: b.bucket,
        lakeEndOffset: b.lakeEndOffset,
        highWatermark: b.highWatermark,
      })),
    };
  });
}

/**
 * How far a lake-enabled table's lake is behind its log: per bucket the lake's end offset and the
 * high watermark, and the time since the latest lake snapshot (since the table's creation before
 * the first) while any bucket is behind, else 0. Throws for tables that are not lake-enabled.
 */
export function lakeTieringLag({ coordinator, highWatermarks }: TieringServiceDeps, info: TableInfo) {
  const status = coordinator.tiering.status(info);
  const lake = new Map((status.snapshot?.bucketOffsets ?? []).map((o) => [lakeBucketKey(o), o.endOffset]));
  const buckets = highWatermarks(info.tableId).map((b) => ({ ...b, lakeEndOffset: lake.get(lakeBucketKey(b)) ?? 0n }));
  const behind = buckets.some((b) => b.highWatermark > b.lakeEndOffset);
  const lagMs = behind ? Math.max(0, Date.now() - (status.snapshot?.commitTimestamp ?? info.createdTime)) : 0;
  return { status, lagMs, buckets };
}
