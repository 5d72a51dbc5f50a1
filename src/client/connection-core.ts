/**
 * What admin, tables, writers and scanners use of the `Connection` they were made from: its
 * options, its metadata cache and the RPC connections to the nodes. They depend on this, not on
 * connection.ts, because `Connection` creates them: so no import runs back up to it.
 */
import type { Options } from '../common/config.js';
import type { RpcConnection } from '../rpc/connection.js';
import type { MetadataCache } from './metadata-cache.js';

export interface ConnectionCore {
  readonly options: Options;
  readonly metadata: MetadataCache;
  /**
   * The RPC connection to the active coordinator (metadata, DDL, writer ids, lake and tiering),
   * found again through the bootstrap servers after it failed.
   */
  coordinator(): Promise<RpcConnection>;
  /**
   * Runs `task` (requests to the active coordinator) on its connection, and again on the
   * coordinator found then, after a back-off, while there is no active coordinator to answer: a
   * standby's NETWORK_EXCEPTION, a closed connection, a timeout. Until `client.request-timeout`.
   */
  withCoordinator<T>(task: (rpc: RpcConnection) => Promise<T>): Promise<T>;
  /** The RPC connection to tablet server `nodeId` (a bucket's leader), opened on first use and after a failure. */
  tabletServer(nodeId: number): Promise<RpcConnection>;
}
