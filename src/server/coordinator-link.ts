/**
 * A cluster server's way to the active coordinator: its address from ZooKeeper
 * (`<root>/coordinators/active`, watched), and one RPC connection to it, opened on first use and
 * again after it fails or another coordinator takes over. Tablet servers send AdjustIsr,
 * ControlledShutdown and GetTableSchema through it; a standby coordinator names the active one in
 * its GetMetadata answers.
 */
import { TributaryError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import type { Api, RequestInit, ResponseMessage } from '../rpc/api-keys.js';
import { RpcConnection } from '../rpc/connection.js';
import { type ActiveCoordinator, readActiveCoordinator } from './metadata/active-coordinator.js';
import type { ZooKeeperSession } from './metadata/zookeeper-session.js';

export class CoordinatorLink {
  private active?: ActiveCoordinator;
  private known = false;
  private connection?: Promise<RpcConnection>;
  private closed = false;

  constructor(
    /** The session to read with: a function, since a tablet server's session is replaced after it expires. */
    private readonly session: () => ZooKeeperSession,
    private readonly root: string,
    private readonly log: Logger,
    private readonly requestTimeoutMs: number,
  ) {}

  /** The active coordinator as ZooKeeper last said, or undefined while none leads. */
  async coordinator(): Promise<ActiveCoordinator | undefined> {
    if (!this.known) {
      this.active = await readActiveCoordinator(this.session(), this.root, () => this.forget());
      this.known = true;
    }
    return this.active;
  }

  /** Sends a request to the active coordinator; NETWORK_EXCEPTION (retriable) while none leads or it cannot be reached. */
  async request<A extends Api>(api: A, body: RequestInit<A>): Promise<ResponseMessage<A>> {
    const conn = await this.connect();
    try {
      return await conn.request(api, body);
    } catch (err) {
      if (conn.isClosed) this.dropConnection();
      throw err;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const conn = this.connection;
    this.connection = undefined;
    await conn?.then((c) => c.close()).catch(() => undefined);
  }

  /** The open connection, or a new one (one attempt shared by concurrent callers). */
  private async connect(): Promise<RpcConnection> {
    for (;;) {
      if (this.closed) throw new TributaryError('CONNECTION_CLOSED', 'the server is stopping');
      if (!this.connection) {
        const opening = this.open();
        this.connection = opening;
        opening.catch((err: unknown) => {
          this.log.debug({ err }, 'cannot reach the active coordinator');
          if (this.connection === opening) this.connection = undefined;
        });
      }
      const attempt = this.connection;
      const conn = await attempt;
      if (!conn.isClosed) return conn;
      if (this.connection === attempt) this.connection = undefined;
    }
  }

  private async open(): Promise<RpcConnection> {
    const active = await this.coordinator();
    if (!active) throw new TributaryError('NETWORK_EXCEPTION', `no coordinator is active in ${this.root}`);
    return RpcConnection.connect(active.host, active.port, { requestTimeoutMs: this.requestTimeoutMs, clientName: 'tributary-server' });
  }

  /**
   * The znode changed: the coordinator connected to is no longer the active one (or another term of
   * it), so the connection goes and the next request reads the znode again. Dropped here, not when
   * the znode is read: the read happens while the new connection opens, and would drop that one.
   */
  private forget(): void {
    this.known = false;
    this.dropConnection();
  }

  private dropConnection(): void {
    const conn = this.connection;
    this.connection = undefined;
    void conn?.then((c) => c.close()).catch(() => undefined);
  }
}
