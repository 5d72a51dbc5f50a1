/**
 * The lake tiering RPCs: LakeTieringHeartbeat and CommitLakeTableSnapshot (from tiering workers),
 * GetLakeSnapshot and GetLakeTieringStatus (from any client). Protobuf in, LakeTieringManager calls,
 * protobuf out.
 */
import { asTributaryError, TributaryError } from '../../common/errors.js';
import { lakeBucketKey } from '../../common/lake.js';
import type { TableInfo, TablePath } from '../../common/schema.js';
import { ApiKeys } from '../../rpc/api-keys.js';
import type { PbTablePath } from '../../rpc/gen/tributary_pb.js';
import { fromPbLakeOffset, toPbLakeOffset } from '../../rpc/lake-offsets.js';
import type { RpcServer } from '../../rpc/server.js';
import type { Coordinator } from './coordinator.js';

function toPath(p: PbTablePath | undefined): TablePath {
  if (!p || !p.databaseName || !p.tableName) throw new TributaryError('INVALID_TABLE_EXCEPTION', 'request names no table (database and table are required)');
  return { database: p.databaseName, table: p.tableName };
}

export interface TieringServiceDeps {
  coordinator: Coordinator;
  /** The Iceberg filesystem catalog workers write to. */
  warehouse: string;
  highWatermarks(tableId: number): { partitionId?: number; partitionName?: string; bucket: number; highWatermark: bigint }[];
}

export function registerTieringService(rpc: RpcServer, { coordinator, warehouse, highWatermarks }: TieringServiceDeps): void {
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
    for (const t of req.tieringTables) each(t.tableId, () => tiering.renew(Number(t.tableId), t.tieringEpoch));
    for (const t of req.finishedTables) each(t.tableId, () => tiering.finished(Number(t.tableId), t.tieringEpoch, false));
    for (const t of req.forceFinishedTables) each(t.tableId, () => tiering.finished(Number(t.tableId), t.tieringEpoch, true));
    for (const t of req.failedTables) each(t.tableId, () => tiering.failed(Number(t.tableId), t.tieringEpoch, t.errorMessage));
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
            },
          }
        : {}),
    };
  });

  rpc.register(ApiKeys.CommitLakeTableSnapshot, async (req) => {
    await tiering.commitSnapshot(Number(req.tableId), req.tieringEpoch, { snapshotId: req.snapshotId, bucketOffsets: req.bucketOffsets.map(fromPbLakeOffset) });
    return {};
  });

  rpc.register(ApiKeys.GetLakeSnapshot, async (req) => {
    const info = coordinator.getTableInfo(toPath(req.tablePath));
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
    const info = coordinator.getTableInfo(toPath(req.tablePath));
    const { status, lagMs, buckets } = lakeTieringLag({ coordinator, warehouse, highWatermarks }, info);
    return {
      lagMs: BigInt(lagMs),
      tableId: BigInt(info.tableId),
      warehouse,
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
