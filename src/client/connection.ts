/**
 * `Connection`: the entry point of the TypeScript client. It bootstraps from any server, keeps one
 * RPC connection per server (re-opened transparently after a failure), owns the metadata cache and
 * hands out `Admin` and `Table` objects, which are cheap.
 *
 *   const conn = await Connection.create({ 'bootstrap.servers': '127.0.0.1:9123' });
 *   const table = await conn.getTable({ database: 'tributary', table: 'orders' });
 */
import { Options } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import type { TablePath } from '../common/schema.js';
import { initArrowCompression } from '../record/compression.js';
import { RpcConnection } from '../rpc/connection.js';
import { Admin } from './admin.js';
import type { ConnectionCore } from './connection-core.js';
import { MetadataCache } from './metadata-cache.js';
import { Table } from './table.js';

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
  private current?: Promise<RpcConnection>;
  private closed = false;

  private constructor(options: Options) {
    this.options = options;
    this.endpoints = options.list('bootstrap.servers').map(parseEndpoint);
    if (this.endpoints.length === 0) throw new TributaryError('INVALID_CONFIG_EXCEPTION', 'bootstrap.servers names no server');
    this.metadata = new MetadataCache(() => this.server());
  }

  /** Connects to the first reachable bootstrap server. Options use the client keys of docs/configuration.md. */
  static async create(options: Record<string, string> = {}): Promise<Connection> {
    await initArrowCompression();
    const conn = new Connection(new Options('client', options));
    await conn.server();
    return conn;
  }

  getAdmin(): Admin {
    return new Admin(this);
  }

  async getTable(path: TablePath): Promise<Table> {
    return new Table(this, await this.metadata.table(path, true));
  }

  /**
   * The RPC connection to the server hosting coordinator and buckets (one node today). A broken
   * connection is replaced on the next call, trying each bootstrap server in turn.
   */
  async server(): Promise<RpcConnection> {
    if (this.closed) throw new TributaryError('CONNECTION_CLOSED', 'the connection is closed');
    const existing = this.current && (await this.current.catch(() => undefined));
    if (existing && !existing.isClosed) return existing;
    this.current = this.connectAny();
    return this.current;
  }

  async close(): Promise<void> {
    this.closed = true;
    const c = this.current && (await this.current.catch(() => undefined));
    c?.close();
  }

  private async connectAny(): Promise<RpcConnection> {
    let last: unknown;
    for (const e of this.endpoints) {
      try {
        return await RpcConnection.connect(e.host, e.port, {
          connectTimeoutMs: this.options.durationMs('client.connect-timeout'),
          requestTimeoutMs: this.options.durationMs('client.request-timeout'),
          clientName: 'tributary-client-ts',
        });
      } catch (err) {
        last = err;
      }
    }
    const why = last instanceof Error ? last.message : String(last);
    throw new TributaryError('NETWORK_EXCEPTION', `cannot reach any bootstrap server (${this.endpoints.map((e) => `${e.host}:${e.port}`).join(', ')}): ${why}`);
  }
}
