/**
 * What a server adds to its Kafka listener, on one node and on a cluster's tablet servers alike:
 * the lake history of the topics (a Fetch below a lake-enabled topic's log start reads the
 * bucket's rows from the lake with the native client's backfill, client/lake-backfill.ts, its
 * snapshot and warehouse asked through the node's own APIs, as the listener asks everything), and
 * ListConsumerGroups, the consumer groups this server coordinates with their lag.
 */
import type { TableInfo } from '../common/schema.js';
import { LakeBackfill, type LakeSnapshots } from '../client/lake-backfill.js';
import type { GroupLag, LakeHistory, TributaryBackend } from '../kafka/index.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { RpcServer } from '../rpc/server.js';
import { fromPbLakeSnapshot } from '../rpc/lake-offsets.js';

export function kafkaLakeHistory(backend: TributaryBackend): LakeHistory {
  const snapshots: LakeSnapshots = {
    getLakeSnapshot: async (path) => fromPbLakeSnapshot(await backend.call(ApiKeys.GetLakeSnapshot, { tablePath: { databaseName: path.database, tableName: path.table } })),
    getLakeTieringStatus: (path) => backend.call(ApiKeys.GetLakeTieringStatus, { tablePath: { databaseName: path.database, tableName: path.table } }),
  };
  /** One backfill per table, in the columns of its schema when it was opened: it plans each snapshot once. */
  const backfills = new Map<number, { schemaId: number; backfill: LakeBackfill }>();
  return {
    open(table: TableInfo, bucket: number, from: bigint) {
      let found = backfills.get(table.tableId);
      if (found?.schemaId !== table.schemaId) {
        const schema = toArrowSchema(table.schema);
        found = { schemaId: table.schemaId, backfill: new LakeBackfill(snapshots, table, () => schema) };
        backfills.set(table.tableId, found);
      }
      return found.backfill.open({ bucket }, from);
    },
  };
}

/** Serves ListConsumerGroups (SHOW CONSUMER GROUPS asks every tablet server): `groups`, those this server coordinates. */
export function registerListConsumerGroups(rpc: RpcServer, groups: () => GroupLag[]): void {
  rpc.register(ApiKeys.ListConsumerGroups, async () => ({
    groups: groups().map((g) => ({ groupId: g.group, state: g.state, members: g.members, protocolType: g.protocolType, protocol: g.protocol, topics: g.topics })),
  }));
}
