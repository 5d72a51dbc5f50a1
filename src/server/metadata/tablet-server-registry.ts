/**
 * Tablet servers in ZooKeeper: each server's own registration, and the coordinator's view of which
 * servers are live.
 *
 *   <root>/tabletservers/ids/<id>   ephemeral, created by the tablet server itself with its own session;
 *                                   JSON {version: 1, host, port, rack?, kafka?: {host, port},
 *                                   register_timestamp} (kafka: its advertised Kafka listener)
 *
 * A server is live exactly while its znode exists: it goes when the server's session closes or
 * expires. The znode's owner (the registering session's id) tells a server that restarted from the
 * one before it, even when the coordinator never saw the id vanish in between. A server restarted
 * right after a crash waits for the registration its previous process left to time out; a second
 * server started with an id a live server holds fails, after that wait, with
 * INVALID_CONFIG_EXCEPTION naming the id. A registration
 * whose session expires (the server was cut off longer than the session timeout) connects a new
 * session and registers again; the coordinator sees the server leave and join.
 */
import { EventEmitter } from 'node:events';
import { TributaryError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { ZooKeeperConflict, ZooKeeperSession, type ZooKeeperSettings } from './zookeeper-session.js';

/** Pause before trying again after a failed listing or a failed re-registration. */
const RETRY_MS = 1_000;
/** Beyond the session timeout, for ZooKeeper to notice an expired session (it checks once per tick). */
const STALE_REGISTRATION_MARGIN_MS = 2_000;

/** What a tablet server registers: how clients and other servers reach it. */
export interface TabletServerAddress {
  id: number;
  host: string;
  port: number;
  rack?: string;
  /** The advertised Kafka listener, when the server speaks the Kafka protocol. */
  kafka?: { host: string; port: number };
}

/** A live tablet server as the coordinator sees it. */
export interface TabletServerNode extends TabletServerAddress {
  registerTimestamp: number;
  /** Id (hex) of the session holding its registration: a new one after every restart or re-registration. */
  session: string;
}

interface Registration {
  version: 1;
  host: string;
  port: number;
  rack?: string;
  kafka?: { host: string; port: number };
  register_timestamp: number;
}

const idsDir = (root: string): string => `${root}/tabletservers/ids`;

/** A registration's epoch: the id of the session holding it, as a signed 64-bit number (an int64 on the wire). */
export const registrationEpoch = (session: string): bigint => BigInt.asIntN(64, BigInt(`0x${session}`));

/** A tablet server's registration; it holds its own session, which it replaces when ZooKeeper expires it. */
export class TabletServerRegistration extends EventEmitter<{ registered: [ZooKeeperSession]; failed: [Error] }> {
  private closed = false;

  private constructor(
    private current: ZooKeeperSession,
    private readonly settings: ZooKeeperSettings,
    private readonly server: TabletServerAddress,
    private readonly log: Logger,
  ) {
    super();
    this.watchExpiry();
  }

  /** Connects and registers `server`; INVALID_CONFIG_EXCEPTION when a live server has its id. */
  static async register(settings: ZooKeeperSettings, server: TabletServerAddress, log: Logger): Promise<TabletServerRegistration> {
    const session = await ZooKeeperSession.connect(settings);
    try {
      await TabletServerRegistration.create(session, settings.root, server, settings.sessionTimeoutMs, log);
    } catch (err) {
      await session.close();
      throw err;
    }
    return new TabletServerRegistration(session, settings, server, log);
  }

  /** The session holding the registration now (`registered` tells of a new one). */
  get session(): ZooKeeperSession {
    return this.current;
  }

  /** The registration's epoch, as ControlledShutdown carries it. */
  get epoch(): bigint {
    return registrationEpoch(this.current.id);
  }

  /** Ends the session: the server leaves the cluster at once. */
  async close(): Promise<void> {
    this.closed = true;
    await this.current.close();
  }

  private static async create(session: ZooKeeperSession, root: string, server: TabletServerAddress, sessionTimeoutMs: number, log: Logger): Promise<void> {
    await session.ensure([root, `${root}/tabletservers`, idsDir(root)]);
    const registration: Registration = {
      version: 1,
      host: server.host,
      port: server.port,
      ...(server.rack !== undefined ? { rack: server.rack } : {}),
      ...(server.kafka !== undefined ? { kafka: server.kafka } : {}),
      register_timestamp: Date.now(),
    };
    const znode = `${idsDir(root)}/${server.id}`;
    // A server restarted right after a crash finds the registration of its previous process, which
    // ZooKeeper removes once that session times out: wait that long. One still there after it is
    // another live server's.
    const deadline = Date.now() + sessionTimeoutMs + STALE_REGISTRATION_MARGIN_MS;
    for (;;) {
      try {
        await session.create(znode, Buffer.from(JSON.stringify(registration)), 'ephemeral');
        return;
      } catch (err) {
        if (!(err instanceof ZooKeeperConflict && err.code === 'NODE_EXISTS')) throw err;
      }
      if (Date.now() >= deadline) {
        throw new TributaryError('INVALID_CONFIG_EXCEPTION', `tablet server id ${server.id} is already registered by another live tablet server in ${root}: every tablet-server.id must be unique`);
      }
      log.info({ id: server.id }, 'the id is still registered, by this server before a crash or by another one: waiting for that session to time out');
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, RETRY_MS);
        void session.exists(znode, () => (clearTimeout(timer), resolve())).catch(() => undefined);
      });
    }
  }

  private watchExpiry(): void {
    this.current.once('expired', () => void this.registerAgain());
  }

  private async registerAgain(): Promise<void> {
    this.log.warn({ id: this.server.id, session: this.current.id }, 'ZooKeeper session expired: registering again with a new session');
    while (!this.closed) {
      let session: ZooKeeperSession | undefined;
      try {
        session = await ZooKeeperSession.connect(this.settings);
        await TabletServerRegistration.create(session, this.settings.root, this.server, this.settings.sessionTimeoutMs, this.log);
        if (this.closed) {
          await session.close();
          return;
        }
        this.current = session;
        this.watchExpiry();
        this.log.info({ id: this.server.id, session: session.id }, 'registered again');
        this.emit('registered', session);
        return;
      } catch (err) {
        await session?.close();
        if (err instanceof TributaryError && err.errorName === 'INVALID_CONFIG_EXCEPTION') {
          this.emit('failed', err);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
  }
}

/**
 * The live tablet servers, as the active coordinator watches them: the children of the ids znode and
 * each server's own znode. `joined` and `left` tell every change after the first listing; a server
 * whose znode was replaced (a restart) leaves and joins again.
 */
export class LiveTabletServers extends EventEmitter<{ joined: [TabletServerNode]; left: [number] }> {
  private readonly servers = new Map<number, TabletServerNode>();
  /** Servers whose znode carries a watch of ours that has not fired yet. */
  private readonly watched = new Set<number>();
  private refreshing: Promise<void> = Promise.resolve();
  private closed = false;
  /** One function for every children watch: the client keeps a watcher once however often it is set. */
  private readonly onChildren = (): void => this.refresh();

  private constructor(
    private readonly session: ZooKeeperSession,
    private readonly root: string,
  ) {
    super();
  }

  /** Lists the live servers and watches them from then on. */
  static async watch(session: ZooKeeperSession, root: string): Promise<LiveTabletServers> {
    await session.ensure([root, `${root}/tabletservers`, idsDir(root)]);
    const live = new LiveTabletServers(session, root);
    await live.refreshOnce();
    return live;
  }

  /** The live servers, sorted by id. */
  list(): TabletServerNode[] {
    return [...this.servers.values()].sort((a, b) => a.id - b.id);
  }

  get(id: number): TabletServerNode | undefined {
    return this.servers.get(id);
  }

  isLive(id: number): boolean {
    return this.servers.has(id);
  }

  close(): void {
    this.closed = true;
    this.removeAllListeners();
  }

  private refresh(): void {
    this.refreshing = this.refreshing.then(() => this.refreshOnce());
  }

  /** Compares ZooKeeper's ids with the known ones; on a failure (reconnecting) it looks again a little later. */
  private async refreshOnce(): Promise<void> {
    if (this.closed) return;
    try {
      const names = await this.session.children(idsDir(this.root), this.onChildren);
      const present = new Map<number, TabletServerNode>();
      for (const name of names) {
        const id = Number(name);
        if (!Number.isInteger(id)) continue;
        const known = this.servers.get(id);
        if (known && this.watched.has(id)) {
          present.set(id, known);
          continue;
        }
        const node = await this.session.get(`${idsDir(this.root)}/${name}`, () => {
          this.watched.delete(id);
          this.refresh();
        });
        if (!node) continue;
        this.watched.add(id);
        const reg = JSON.parse(node.data.toString('utf8')) as Registration;
        present.set(id, { id, host: reg.host, port: reg.port, ...(reg.rack !== undefined ? { rack: reg.rack } : {}), ...(reg.kafka !== undefined ? { kafka: reg.kafka } : {}), registerTimestamp: reg.register_timestamp, session: node.owner });
      }
      for (const [id, known] of this.servers) {
        const now = present.get(id);
        if (now && now.session === known.session) continue;
        this.servers.delete(id);
        if (!this.closed) this.emit('left', id);
      }
      for (const [id, server] of present) {
        if (this.servers.has(id)) continue;
        this.servers.set(id, server);
        if (!this.closed) this.emit('joined', server);
      }
    } catch (err) {
      if (this.closed || (err instanceof TributaryError && err.errorName === 'STORAGE_EXCEPTION')) return;
      setTimeout(() => this.refresh(), RETRY_MS).unref();
    }
  }
}
