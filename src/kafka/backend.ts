/**
 * How the Kafka listener reaches Tributary: through the node's own APIs (rpc/api-keys.ts), run in
 * the same process. On one node every API is the node's; on a tablet server of a cluster the data
 * APIs (ProduceLog, FetchLog, ListOffsets) are the server's own and the metadata APIs go to the
 * active coordinator. The listener never touches a log or the metadata store itself, so it gets
 * every check a client's request gets: leadership, acks, limits, the idempotent writer state.
 */
import type * as arrow from 'apache-arrow';
import type { TableInfo } from '../common/schema.js';
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

/**
 * A lake-enabled topic's past below its log start (retention deleted those segments once the lake
 * held them), read from the lake snapshot the coordinator registered: rows in offset order, at
 * their log offsets, in the table's current columns.
 */
export interface LakeHistory {
  /** The lake rows of a bucket from offset `from`; undefined when the lake holds nothing of it at or after `from`. */
  open(table: TableInfo, bucket: number, from: bigint): Promise<LakeCursor | undefined>;
}

export interface LakeCursor {
  /** The first offset the lake does not hold: where the log continues. */
  readonly endOffset: bigint;
  /** The next runs of consecutive offsets sharing one commit time (ms), in offset order; undefined at the end. */
  next(): Promise<LakeRun[] | undefined>;
}

export interface LakeRun {
  baseOffset: bigint;
  timestamp: number;
  batch: arrow.RecordBatch;
}
