/**
 * How the Kafka listener reaches Tributary: through the node's own APIs (rpc/api-keys.ts), run in
 * the same process. On one node every API is the node's; on a tablet server of a cluster the data
 * APIs (ProduceLog, FetchLog, ListOffsets) are the server's own and the metadata APIs go to the
 * active coordinator. The listener never touches a log or the metadata store itself, so it gets
 * every check a client's request gets: leadership, acks, limits, the idempotent writer state.
 */
import type { Api, RequestInit, ResponseMessage } from '../rpc/api-keys.js';

export interface TributaryBackend {
  call<A extends Api>(api: A, request: RequestInit<A>): Promise<ResponseMessage<A>>;
}

/** A Kafka broker as Metadata lists it: a Tributary server id and the address of its Kafka listener. */
export interface KafkaBrokerNode {
  nodeId: number;
  host: string;
  port: number;
  rack: string | null;
}
