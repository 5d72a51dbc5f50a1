/**
 * What admin, tables, writers and scanners use of the `Connection` they were made from: its
 * options, its metadata cache and the RPC connection to the server. They depend on this, not on
 * connection.ts, because `Connection` creates them: so no import runs back up to it.
 */
import type { Options } from '../common/config.js';
import type { RpcConnection } from '../rpc/connection.js';
import type { MetadataCache } from './metadata-cache.js';

export interface ConnectionCore {
  readonly options: Options;
  readonly metadata: MetadataCache;
  /** The RPC connection to the server hosting coordinator and buckets, re-opened after a failure. */
  server(): Promise<RpcConnection>;
}
