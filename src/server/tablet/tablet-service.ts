/**
 * The tablet server's RPCs on an RPC listener: the data APIs of logs and primary-key buckets and, for
 * a member of a cluster, the coordinator's requests (NotifyLeaderAndIsr, StopReplica, UpdateMetadata,
 * NotifyLakeTableOffset) and the followers' OffsetForLeaderEpoch.
 */
import { ApiKeys } from '../../rpc/api-keys.js';
import { decodeLookupRequest } from '../../rpc/lookup-messages.js';
import { encodeFetchLogResponse } from '../../rpc/fetch-log-response.js';
import type { RpcServer } from '../../rpc/server.js';
import type { TabletServer } from './tablet-server.js';

export function registerTabletService(rpc: RpcServer, tablets: TabletServer): void {
  rpc.register(ApiKeys.ProduceLog, (req) => tablets.produceLog(req), { releasesBody: true });
  rpc.register(ApiKeys.FetchLog, (req, ctx) => tablets.fetchLog(req, ctx.responseMemory), { encode: encodeFetchLogResponse });
  rpc.register(ApiKeys.ListOffsets, (req) => tablets.listOffsets(req));
  rpc.register(ApiKeys.LimitScan, (req) => tablets.limitScan(req));
  const kv = tablets.kvService;
  rpc.register(ApiKeys.PutKv, (req) => kv.putKv(req));
  rpc.register(ApiKeys.Lookup, (req) => kv.lookup(req), { decode: decodeLookupRequest });
  rpc.register(ApiKeys.PrefixLookup, (req) => kv.prefixLookup(req));
  rpc.register(ApiKeys.GetTableStats, (req) => kv.getTableStats(req));
  rpc.register(ApiKeys.ScanKv, (req) => kv.scanKv(req));
  if (!tablets.replication) return;
  rpc.register(ApiKeys.NotifyLeaderAndIsr, (req) => tablets.notifyLeaderAndIsr(req));
  rpc.register(ApiKeys.StopReplica, (req) => tablets.stopReplica(req));
  rpc.register(ApiKeys.UpdateMetadata, (req) => tablets.updateMetadata(req));
  rpc.register(ApiKeys.NotifyLakeTableOffset, (req) => tablets.notifyLakeTableOffset(req));
  rpc.register(ApiKeys.NotifyRemoteLogOffsets, (req) => tablets.notifyRemoteLogOffsets(req));
  rpc.register(ApiKeys.OffsetForLeaderEpoch, (req) => tablets.offsetForLeaderEpoch(req));
}
