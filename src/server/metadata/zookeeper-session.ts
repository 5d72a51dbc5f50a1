/**
 * One ZooKeeper session (node-zookeeper-client), with promises and Tributary's errors: the
 * connection a coordinator shares between its leader election and its metadata store, so that
 * losing the session loses both at once.
 *
 * - A request made while the session is not connected fails at once with NETWORK_EXCEPTION
 *   (retriable) instead of waiting in the client's queue; so does one whose connection drops before
 *   the answer, and then its outcome is unknown.
 * - When ZooKeeper expires the session (the client was cut off longer than the session timeout), the
 *   session emits `expired` and every later request fails with STORAGE_EXCEPTION: the ephemeral
 *   znodes it held are gone, and with them any leadership.
 * - The client never retries on its own (`retries: 0`): a retried create or versioned write whose
 *   first attempt did land would fail against itself.
 * - Node-state outcomes that callers expect (a version that moved, a node that exists or not) come
 *   back as a ZooKeeperConflict naming the ZooKeeper code and, in a multi-op, the failed op.
 * - The client library waits for the answer to its connect request with no deadline once the TCP
 *   connection is up, so a server that accepts and stays silent (one still starting, or wedged)
 *   would hold the session disconnected forever. A watchdog closes such a socket after
 *   HANDSHAKE_TIMEOUT_MS, and the library tries again.
 */
import { EventEmitter } from 'node:events';
import zookeeper from 'node-zookeeper-client';
import type { Options } from '../../common/config.js';
import { TributaryError } from '../../common/errors.js';

const { CreateMode, Exception, State } = zookeeper;

const CREATE_MODES = { persistent: CreateMode.PERSISTENT, ephemeral: CreateMode.EPHEMERAL, 'ephemeral-sequential': CreateMode.EPHEMERAL_SEQUENTIAL };

export interface ZooKeeperSettings {
  /** Connection string: comma-separated host:port. */
  address: string;
  /** Parent znode of everything Tributary keeps (`zookeeper.path.root`). */
  root: string;
  sessionTimeoutMs: number;
  /** How long connect() waits for the first connection. */
  connectionTimeoutMs: number;
}

/** The ZooKeeper settings of a server from its options; `zookeeper.address` is required. */
export function zooKeeperSettings(options: Options): ZooKeeperSettings {
  const address = options.string('zookeeper.address');
  if (!address) throw new TributaryError('INVALID_CONFIG_EXCEPTION', "option 'zookeeper.address' is required to keep metadata in ZooKeeper");
  const root = options.string('zookeeper.path.root')!;
  if (!/^(\/[^/]+)+$/.test(root)) {
    throw new TributaryError('INVALID_CONFIG_EXCEPTION', `'zookeeper.path.root' = '${root}' must be an absolute znode path such as /tributary, without a trailing slash`);
  }
  return {
    address,
    root,
    sessionTimeoutMs: options.durationMs('zookeeper.client.session-timeout'),
    connectionTimeoutMs: options.durationMs('zookeeper.client.connection-timeout'),
  };
}

export type ZooKeeperOp =
  | { type: 'create'; path: string; data: Buffer }
  | { type: 'set'; path: string; data: Buffer; version: number }
  | { type: 'delete'; path: string; version: number }
  | { type: 'check'; path: string; version: number };

/** A znode at the version a leader wrote: transactions that check it fail once another leader wrote it. */
export interface EpochFence {
  znode: string;
  version: number;
}

export type ConflictCode = 'NO_NODE' | 'NODE_EXISTS' | 'BAD_VERSION' | 'NOT_EMPTY';

/** A request refused because of the state of a znode: the caller's view of the tree is out of date. */
export class ZooKeeperConflict extends Error {
  constructor(
    readonly code: ConflictCode,
    readonly path: string,
  ) {
    super(`${code} at ${path}`);
    this.name = 'ZooKeeperConflict';
  }
}

const CONFLICTS = new Map<number, ConflictCode>([
  [Exception.NO_NODE, 'NO_NODE'],
  [Exception.NODE_EXISTS, 'NODE_EXISTS'],
  [Exception.BAD_VERSION, 'BAD_VERSION'],
  [Exception.NOT_EMPTY, 'NOT_EMPTY'],
]);

export interface ZNode {
  data: Buffer;
  version: number;
  /** The session id (hex) of the session that owns an ephemeral node; all zeros for a persistent one. */
  owner: string;
}

type Callback<T> = (error: unknown, result: T) => void;

/** Longest wait for ZooKeeper's answer to a connect request on an open socket. */
const HANDSHAKE_TIMEOUT_MS = 2_000;

/** The library's connection manager, as far as the watchdog needs it (not part of its typed API). */
interface ConnectionManagerInternals {
  socket?: { connecting: boolean; destroyed: boolean; destroy(): void };
}

export class ZooKeeperSession extends EventEmitter<{ expired: [] }> {
  private expired = false;
  private readonly watchdog: NodeJS.Timeout;

  private constructor(
    private readonly client: zookeeper.Client,
    readonly address: string,
  ) {
    super();
    client.on('expired', () => {
      this.expired = true;
      this.emit('expired');
    });
    // A socket seen open and unanswered at two ticks in a row has waited at least one full tick.
    let waiting: unknown;
    this.watchdog = setInterval(() => {
      const socket = (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager?.socket;
      const unanswered = !this.connected && socket !== undefined && !socket.connecting && !socket.destroyed ? socket : undefined;
      if (unanswered && unanswered === waiting) unanswered.destroy();
      waiting = unanswered;
    }, HANDSHAKE_TIMEOUT_MS).unref();
  }

  /** Connects, waiting up to the connection timeout; fails with NETWORK_EXCEPTION when no server answers. */
  static async connect(settings: Pick<ZooKeeperSettings, 'address' | 'sessionTimeoutMs' | 'connectionTimeoutMs'>): Promise<ZooKeeperSession> {
    const client = zookeeper.createClient(settings.address, { sessionTimeout: settings.sessionTimeoutMs, retries: 0 });
    const session = new ZooKeeperSession(client, settings.address);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        void session.close();
        reject(new TributaryError('NETWORK_EXCEPTION', `cannot connect to ZooKeeper at ${settings.address} within ${settings.connectionTimeoutMs} ms`));
      }, settings.connectionTimeoutMs);
      client.once('connected', () => {
        clearTimeout(timer);
        resolve();
      });
      client.connect();
    });
    return session;
  }

  get connected(): boolean {
    return this.client.getState() === State.SYNC_CONNECTED;
  }

  /** The session id as ZooKeeper shows it (hex), for logs. */
  get id(): string {
    return this.client.getSessionId().toString('hex');
  }

  /**
   * The node's data and version, or undefined when it does not exist; with `watch`, called once when
   * the node changes or goes (a node that does not exist sets no watch).
   */
  async get(path: string, watch?: () => void): Promise<ZNode | undefined> {
    try {
      return await this.call<ZNode>((cb) => {
        const done = (err: unknown, data: Buffer | undefined, stat: zookeeper.Stat | undefined): void =>
          cb(err, { data: data ?? Buffer.alloc(0), version: stat?.version ?? 0, owner: stat?.ephemeralOwner.toString('hex') ?? '' });
        if (watch) this.client.getData(path, watch, done);
        else this.client.getData(path, done);
      });
    } catch (err) {
      if (err instanceof ZooKeeperConflict && err.code === 'NO_NODE') return undefined;
      throw err;
    }
  }

  /**
   * Names of the node's children (unsorted); with `watch`, called once when they change or the node
   * goes. (The client keeps one watch per function and node: setting the same function again while
   * it waits does not make it called twice; this holds for every watch here.)
   */
  children(path: string, watch?: () => void): Promise<string[]> {
    return this.call((cb) => (watch ? this.client.getChildren(path, watch, cb) : this.client.getChildren(path, cb)));
  }

  /** Whether the node exists; with `watch`, called once when it is created, changed or deleted. */
  exists(path: string, watch?: () => void): Promise<boolean> {
    return this.call<boolean>((cb) => {
      const done = (err: unknown, stat: unknown): void => cb(err, stat !== null && stat !== undefined);
      if (watch) this.client.exists(path, watch, done);
      else this.client.exists(path, done);
    });
  }

  /**
   * Creates a node and returns its path (with the sequence number of a sequential one); an ephemeral
   * node lives as long as this session.
   */
  create(path: string, data: Buffer, mode: keyof typeof CREATE_MODES = 'persistent'): Promise<string> {
    const createMode = CREATE_MODES[mode];
    return this.call((cb) => this.client.create(path, data, createMode, cb));
  }

  /** Creates each of the znodes, in order, that does not exist yet (persistent, no data): a path and its parents. */
  async ensure(znodes: string[]): Promise<void> {
    for (const znode of znodes) {
      try {
        await this.create(znode, Buffer.alloc(0));
      } catch (err) {
        if (!(err instanceof ZooKeeperConflict && err.code === 'NODE_EXISTS')) throw err;
      }
    }
  }

  /** Writes the node if it still has `version`, returning the new version. */
  set(path: string, data: Buffer, version: number): Promise<number> {
    return this.call((cb) => this.client.setData(path, data, version, (err, stat) => cb(err, stat?.version)));
  }

  remove(path: string, version: number): Promise<void> {
    return this.call((cb) => this.client.remove(path, version, (err) => cb(err, undefined)));
  }

  /** Applies all the operations in one ZooKeeper transaction, or none of them. */
  multi(ops: ZooKeeperOp[]): Promise<void> {
    return this.call((cb) => {
      const tx = this.client.transaction();
      for (const op of ops) {
        if (op.type === 'create') tx.create(op.path, op.data, CreateMode.PERSISTENT);
        else if (op.type === 'set') tx.setData(op.path, op.data, op.version);
        else if (op.type === 'delete') tx.remove(op.path, op.version);
        else tx.check(op.path, op.version);
      }
      // The builder turns version 0 into -1 (`version || -1`), which matches any version: a
      // compare-and-set on a node written once would always pass. Put the versions back.
      (tx as unknown as { ops: { version?: number }[] }).ops.forEach((built, i) => {
        const op = ops[i];
        if (op.type !== 'create') built.version = op.version;
      });
      tx.commit((err, results: { err?: number }[] | undefined) => {
        // The failed op is the one with a code other than OK and RUNTIME_INCONSISTENCY (the ops after it).
        const failed = results?.findIndex((r) => r.err !== undefined && r.err !== Exception.OK && r.err !== Exception.RUNTIME_INCONSISTENCY) ?? -1;
        cb(err && failed >= 0 ? Object.assign(err, { path: ops[failed].path }) : err, undefined);
      });
    });
  }

  /** Ends the session: ZooKeeper deletes its ephemeral nodes at once. */
  close(): Promise<void> {
    clearInterval(this.watchdog);
    if (this.client.getState() !== State.SYNC_CONNECTED) {
      this.client.close();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.client.once('disconnected', () => resolve());
      this.client.close();
    });
  }

  private call<T>(request: (cb: Callback<T>) => void): Promise<T> {
    if (this.expired) return Promise.reject(this.expiredError());
    if (!this.connected) return Promise.reject(new TributaryError('NETWORK_EXCEPTION', `not connected to ZooKeeper at ${this.address}`));
    return new Promise((resolve, reject) => {
      request((err, result) => (err ? reject(this.translate(err)) : resolve(result)));
    });
  }

  private translate(err: unknown): Error {
    const { code, path } = err as { code?: number; path?: string };
    const conflict = code === undefined ? undefined : CONFLICTS.get(code);
    if (conflict) return new ZooKeeperConflict(conflict, path ?? '?');
    if (code === Exception.SESSION_EXPIRED || this.expired) return this.expiredError();
    if (code === Exception.CONNECTION_LOSS || code === Exception.OPERATION_TIMEOUT) {
      return new TributaryError('NETWORK_EXCEPTION', `lost the connection to ZooKeeper at ${this.address}; the request may or may not have been applied`, { cause: err });
    }
    return new TributaryError('STORAGE_EXCEPTION', `ZooKeeper at ${this.address} refused the request: ${String(err)}`, { cause: err });
  }

  private expiredError(): TributaryError {
    return new TributaryError('STORAGE_EXCEPTION', `the ZooKeeper session ${this.id} expired: its ephemeral znodes are gone and it can no longer write`);
  }
}
