/**
 * `Connection`: the entry point of the TypeScript client. It asks any server of
 * `bootstrap.servers` where the active coordinator and the tablet servers are, keeps one RPC
 * connection per node (opened on first use, re-opened transparently after a failure; nodes at one
 * address, as coordinator and tablet server of `tributary start`, share it), owns the metadata
 * cache and hands out `Admin` and `Table` objects, which are cheap.
 *
 *   const conn = await Connection.create({ 'bootstrap.servers': '127.0.0.1:9123,127.0.0.1:9124' });
 *   const table = await conn.getTable({ database: 'tributary', table: 'orders' });
 */
import { Options } from '../common/config.js';
import { configureObjectStorageFrom, isObjectStorageOption, processCacheDir } from '../storage/stores.js';
import { type ErrorName, TributaryError } from '../common/errors.js';
import type { TablePath } from '../common/schema.js';
import { initArrowCompression } from '../record/compression.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { RpcConnection } from '../rpc/connection.js';
import { Admin } from './admin.js';
import type { ConnectionCore } from './connection-core.js';
import { retryBackoffMs } from './leader-requests.js';
import { addressOf, MetadataCache } from './metadata-cache.js';
import { Table } from './table.js';

/** What a coordinator request fails with while no coordinator is active (or the client still talks to one that no longer is). */
const NO_ACTIVE_COORDINATOR = new Set<ErrorName>(['NETWORK_EXCEPTION', 'CONNECTION_CLOSED', 'REQUEST_TIME_OUT']);

interface Endpoint {
  host: string;
  port: number;
}

function parseEndpoint(text: string): Endpoint {
  const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(text.trim());
  if (!m) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `invalid server address '${text}': expected host:port`);
  return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

export class Connection implements ConnectionCore {
  readonly options: Options;
  readonly metadata: MetadataCache;
  private readonly endpoints: Endpoint[];
  /** Open (or opening) RPC connections by `host:port`. */
  private readonly pool = new Map<string, Promise<RpcConnection>>();
  private bootstrapping?: Promise<void>;
  private closed = false;

  private constructor(options: Options) {
    this.options = options;
    this.endpoints = options.list('bootstrap.servers').map(parseEndpoint);
    if (this.endpoints.length === 0) throw new TributaryError('INVALID_CONFIG_EXCEPTION', 'bootstrap.servers names no server');
    this.metadata = new MetadataCache((task) => this.withCoordinator(task));
  }

  /**
   * Bootstraps from the first bootstrap server that answers. Options use the client keys of
   * docs/configuration.md; the object storage options among them (`s3.*`, `datalake.cache.*`: how
   * this process reads lake files on S3 for a backfill) set the process's object storage, for
   * every connection of the process.
   */
  static async create(options: Record<string, string> = {}): Promise<Connection> {
    await initArrowCompression();
    const client = Object.fromEntries(Object.entries(options).filter(([k]) => !isObjectStorageOption(k)));
    const conn = new Connection(new Options('client', client));
    if (Object.keys(client).length < Object.keys(options).length) configureObjectStorageFrom(options, processCacheDir());
    try {
      await conn.coordinator();
    } catch (err) {
      await conn.close();
      throw err;
    }
    return conn;
  }

  getAdmin(): Admin {
    return new Admin(this);
  }

  async getTable(path: TablePath): Promise<Table> {
    return new Table(this, await this.metadata.table(path, true));
  }

  async coordinator(): Promise<RpcConnection> {
    this.checkOpen();
    const known = this.metadata.coordinatorServer;
    const open = known && (await this.existing(addressOf(known)));
    if (open) return open;
    // Never reached, or its connection failed: another coordinator may be the active one now.
    this.bootstrapping ??= this.bootstrap().finally(() => (this.bootstrapping = undefined));
    await this.bootstrapping;
    return this.open(this.metadata.coordinatorServer!);
  }

  async withCoordinator<T>(task: (rpc: RpcConnection) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.options.durationMs('client.request-timeout');
    for (let attempt = 1; ; attempt++) {
      let rpc: RpcConnection | undefined;
      try {
        rpc = await this.coordinator();
        return await task(rpc);
      } catch (err) {
        const wait = retryBackoffMs(attempt);
        if (!(err instanceof TributaryError) || !NO_ACTIVE_COORDINATOR.has(err.errorName) || this.closed || Date.now() + wait >= deadline) throw err;
        // A standby answered, or the coordinator went away: bootstrap again to find the active one.
        if (rpc) this.drop(rpc.address);
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  async tabletServer(nodeId: number): Promise<RpcConnection> {
    this.checkOpen();
    let node = this.metadata.tabletServer(nodeId);
    if (!node) {
      await this.metadata.refreshNodes();
      node = this.metadata.tabletServer(nodeId);
    }
    if (!node) throw new TributaryError('NETWORK_EXCEPTION', `tablet server ${nodeId} is not registered with the coordinator`);
    return this.open(node);
  }

  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.pool.values()];
    this.pool.clear();
    await Promise.all(all.map(async (c) => (await c.catch(() => undefined))?.close()));
  }

  private checkOpen(): void {
    if (this.closed) throw new TributaryError('CONNECTION_CLOSED', 'the connection is closed');
  }

  /**
   * Asks each bootstrap server in turn for the nodes, until one names the active coordinator. A
   * bootstrap connection that is no node's afterwards is closed. While servers answer without
   * naming one (a cluster starting, or electing a coordinator), it asks again after a back-off,
   * for up to `client.connect-timeout`.
   */
  private async bootstrap(): Promise<void> {
    const deadline = Date.now() + this.options.durationMs('client.connect-timeout');
    for (let attempt = 1; ; attempt++) {
      let last: unknown;
      let answered = false;
      for (const e of this.endpoints) {
        try {
          const rpc = await this.open(e);
          const resp = await rpc.request(ApiKeys.GetMetadata, {});
          if (!resp.coordinatorServer) {
            answered = true;
            last = new TributaryError('NETWORK_EXCEPTION', `${rpc.address} does not know the active coordinator yet`);
            continue;
          }
          this.metadata.learnNodes(resp, rpc);
          const nodes = new Set([this.metadata.coordinatorServer!, ...this.metadata.tabletServers].map(addressOf));
          if (!nodes.has(rpc.address)) this.drop(rpc.address);
          return;
        } catch (err) {
          last = err;
        }
      }
      const wait = retryBackoffMs(attempt);
      if (!answered || Date.now() + wait >= deadline) {
        const why = last instanceof Error ? last.message : String(last);
        const servers = this.endpoints.map(addressOf).join(', ');
        throw new TributaryError('NETWORK_EXCEPTION', answered ? `no bootstrap server (${servers}) knows the active coordinator: ${why}` : `cannot reach any bootstrap server (${servers}): ${why}`);
      }
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }

  /** The open connection to `address`, if there is one. */
  private async existing(address: string): Promise<RpcConnection | undefined> {
    const c = await this.pool.get(address)?.catch(() => undefined);
    return c && !c.isClosed ? c : undefined;
  }

  /** The connection to `node`: the pooled one while it is open, else a new one, which concurrent callers share. */
  private async open(node: Endpoint): Promise<RpcConnection> {
    const address = addressOf(node);
    for (let pooled = this.pool.get(address); pooled; pooled = this.pool.get(address)) {
      const c = await pooled.catch(() => undefined);
      if (c && !c.isClosed) return c;
      if (this.pool.get(address) === pooled) this.pool.delete(address);
    }
    const connecting = RpcConnection.connect(node.host, node.port, {
      connectTimeoutMs: this.options.durationMs('client.connect-timeout'),
      requestTimeoutMs: this.options.durationMs('client.request-timeout'),
      clientName: 'tributary-client-ts',
    });
    this.pool.set(address, connecting);
    const c = await connecting;
    // Closed meanwhile: the connection must not outlive it.
    if (this.closed) void c.close();
    this.checkOpen();
    return c;
  }

  private drop(address: string): void {
    const c = this.pool.get(address);
    this.pool.delete(address);
    void c?.then((rpc) => rpc.close(), () => undefined);
  }
}
