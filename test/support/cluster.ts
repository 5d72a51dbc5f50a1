/**
 * The end-to-end fixture: real `tributary start` processes (one in most suites) on temp data dirs
 * and ephemeral ports, a client connection to them and, where a suite asks, a SQL executor on a
 * DuckDB session. Everything it started is ended and removed afterwards, also when a test fails or
 * the start fails half-way.
 *
 *   const cluster = useCluster({ args: ['--no-tiering'], sql: 'shop' }); // the suite's before/after
 *   test('…', async () => {
 *     await cluster.sql.execute('…');
 *     await cluster.server.kill(); // a crash
 *     await cluster.restart(); // again on the same data dir and port
 *   });
 *
 *   test('…', async (t) => {
 *     const cluster = await startCluster(t, { settings: { 'kv.snapshot.interval': '1s' } }); // ends with the test
 *     const worker = await cluster.startTiering();
 *   });
 *
 * At the end the connection and the DuckDB session close, then the processes stop with SIGTERM,
 * tiering workers before the servers they read from, and each must exit 0: every suite checks the
 * clean shutdown. Each process is an OwnedProcess; the services a cluster of servers needs
 * (ZooKeeper, an S3 server) are more of them, started before the servers and stopped after them.
 *
 * With `zooKeeper`, the cluster is the real thing: a ZooKeeper server, coordinators (`tributary
 * coordinator-server`, the first started becomes the active one) and tablet servers with ids 0..n-1
 * (`tributary tablet-server`), all sharing one remote.data.dir. `bootstrap` lists them all.
 *
 *   const cluster = useCluster({ zooKeeper: { coordinators: 2, tabletServers: 3 } });
 *   await cluster.tabletServer(1).kill();
 *   await cluster.restart(cluster.members.indexOf(cluster.tabletServer(1)));
 *   const added = await cluster.addTabletServer(); // tablet server 3, on a new data dir
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import type { TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Connection } from '../../src/client/index.js';
import { DEFAULT_DATABASE } from '../../src/common/schema.js';
import { DuckSession } from '../../src/query/duckdb/session.js';
import { SqlExecutor } from '../../src/query/executor.js';
import { type OwnedProcess, type ServerCommand, ServerProcess, TieringProcess, tempDir } from './server-process.js';
import { suiteHooks } from './suite-hooks.js';
import { ZooKeeperServer } from './zookeeper.js';
import { type S3TestServer, startS3Server } from '../../src/storage/fixtures/s3-server.js';

export interface ClusterOptions {
  /** How many server processes; 1 by default. */
  servers?: number;
  /** `--set` settings of every server. */
  settings?: Record<string, string>;
  /** More CLI flags of every server, e.g. `--no-tiering`. */
  args?: string[];
  /** A built CLI to run instead of the sources (an installed package's `dist/cli/main.js`). */
  cli?: string;
  /** Where the servers' data dirs are made (a small disk, say); the system's temp dir by default. */
  dataRoot?: string;
  /** Client settings of `conn`, or `false` for no connection (a suite that counts the server's connections). */
  client?: Record<string, string> | false;
  /** The current database of `sql`, a SQL executor on `conn`; created unless it is the default one. */
  sql?: string;
  /** A cluster on ZooKeeper instead of `servers` embedded nodes: how many coordinators (1 by default) and tablet servers. */
  zooKeeper?: { coordinators?: number; tabletServers: number };
  /** A real S3 server (s3rver on loopback) for the cluster, holding remote.data.dir, the lake warehouse, or both. */
  objectStorage?: { remoteData?: boolean; warehouse?: boolean };
}

/** One process of the cluster: what it runs, its tablet server id, and the process once started. */
interface Member {
  command: ServerCommand;
  id?: number;
  dataDir: string;
  process?: ServerProcess;
}

/** A ZooKeeper session short enough that a killed tablet server is noticed within seconds. */
const SESSION_TIMEOUT = '4s';

/** How long a process may take to stop on SIGTERM before it is killed and reported. */
const STOP_TIMEOUT_MS = 60_000;

export class TestCluster {
  private readonly roster: Member[] = [];
  private readonly workers: TieringProcess[] = [];
  private zk?: ZooKeeperServer;
  private s3Server?: S3TestServer;
  /** Settings of every cluster process: where ZooKeeper is, the shared remote.data.dir. */
  private readonly clusterSettings: Record<string, string> = {};
  private readonly dirs: string[] = [];
  private connection?: Connection;
  private session?: DuckSession;
  private executor?: SqlExecutor;

  constructor(private readonly options: ClusterOptions = {}) {}

  /** A started cluster, for a test that ends it itself (`finally { await cluster.stop() }`). */
  static async start(options: ClusterOptions = {}): Promise<TestCluster> {
    const cluster = new TestCluster(options);
    await cluster.start();
    return cluster;
  }

  /** Starts the servers, then the connection and the SQL executor; on a failure ends what started. */
  async start(): Promise<void> {
    try {
      const dir = (): string => tempDir('data', this.options.dataRoot);
      const zooKeeper = this.options.zooKeeper;
      if (zooKeeper) {
        this.zk = await ZooKeeperServer.start();
        Object.assign(this.clusterSettings, {
          'zookeeper.address': this.zk.address,
          'zookeeper.client.session-timeout': SESSION_TIMEOUT,
          'remote.data.dir': this.tempDir('remote'),
        });
        await this.startObjectStorage();
        for (let i = 0; i < (zooKeeper.coordinators ?? 1); i++) this.roster.push({ command: 'coordinator-server', dataDir: dir() });
        for (let id = 0; id < zooKeeper.tabletServers; id++) this.roster.push({ command: 'tablet-server', id, dataDir: dir() });
        // The first coordinator is the active one: it starts alone, the rest together after it.
        await this.launchAll(this.roster.slice(0, 1));
        await this.launchAll(this.roster.slice(1));
      } else {
        await this.startObjectStorage();
        for (let i = 0; i < (this.options.servers ?? 1); i++) this.roster.push({ command: 'start', dataDir: dir() });
        await this.launchAll(this.roster);
      }
      if (this.options.client !== false) this.connection = await this.connect();
      if (this.options.sql !== undefined) {
        if (this.options.sql !== DEFAULT_DATABASE) await this.conn.getAdmin().createDatabase(this.options.sql);
        this.session = await DuckSession.create();
        this.executor = new SqlExecutor(this.conn, this.session, this.options.sql);
      }
    } catch (err) {
      await this.stop().catch(() => undefined);
      throw err;
    }
  }

  /** The first server: the only one, in most suites; the first coordinator of a cluster on ZooKeeper. */
  get server(): ServerProcess {
    return this.servers[0];
  }

  /** Every server process, in start order (coordinators, then tablet servers by id). */
  get servers(): readonly ServerProcess[] {
    assert.ok(this.roster.length > 0 && this.roster.every((m) => m.process), 'the cluster has not started');
    return this.roster.map((m) => m.process!);
  }

  get coordinators(): readonly ServerProcess[] {
    return this.servers.filter((s) => s.command === 'coordinator-server');
  }

  /** The tablet server with `tablet-server.id` = `id`. */
  tabletServer(id: number): ServerProcess {
    const member = this.roster.find((m) => m.command === 'tablet-server' && m.id === id);
    assert.ok(member?.process, `the cluster has a tablet server ${id}`);
    return member.process;
  }

  /** The ZooKeeper server of a cluster started with `zooKeeper`. */
  get zooKeeper(): ZooKeeperServer {
    assert.ok(this.zk, 'a cluster started with the `zooKeeper` option');
    return this.zk;
  }

  /** The S3 server of a cluster started with `objectStorage`. */
  get s3(): S3TestServer {
    assert.ok(this.s3Server, 'a cluster started with the `objectStorage` option');
    return this.s3Server;
  }

  /** The lake warehouse of the first server: on the S3 server with `objectStorage.warehouse`, else the data dir's `lake`. */
  get warehouse(): string {
    return this.options.objectStorage?.warehouse ? this.s3.location('warehouse') : path.join(this.server.dataDir, 'lake');
  }

  /** `bootstrap.servers` for a client of the cluster. */
  get bootstrap(): string {
    return this.servers.map((s) => s.bootstrap).join(',');
  }

  get conn(): Connection {
    assert.ok(this.connection, 'a cluster started with a connection');
    return this.connection;
  }

  get sql(): SqlExecutor {
    assert.ok(this.executor, 'a cluster started with the `sql` option');
    return this.executor;
  }

  /** The DuckDB session `sql` runs on. */
  get duck(): DuckSession {
    assert.ok(this.session, 'a cluster started with the `sql` option');
    return this.session;
  }

  /**
   * Starts server `member` again, once it has exited (killed or stopped by the test), on its data
   * dir and port, with the cluster's settings and `settings` over them.
   */
  async restart(member: number | ServerProcess = 0, settings: Record<string, string> = {}): Promise<ServerProcess> {
    const index = typeof member === 'number' ? member : this.servers.indexOf(member);
    const old = this.servers[index];
    assert.ok(!old.running, `server ${index} is still running: stop or kill it first`);
    return this.launch(this.roster[index], old.port, settings);
  }

  /** Starts one more tablet server on a cluster on ZooKeeper, with the next id and a new data dir. */
  async addTabletServer(): Promise<ServerProcess> {
    assert.ok(this.zk, 'a cluster started with the `zooKeeper` option');
    const id = Math.max(-1, ...this.roster.map((m) => m.id ?? -1)) + 1;
    const member: Member = { command: 'tablet-server', id, dataDir: tempDir('data', this.options.dataRoot) };
    this.roster.push(member);
    return this.launch(member, 0);
  }

  /** Closes `conn` and opens a new one with the same settings. */
  async reconnect(): Promise<Connection> {
    await this.connection?.close();
    this.connection = await this.connect();
    return this.connection;
  }

  /** A `tributary tiering` worker on the cluster (given the S3 server's options, with `objectStorage`), ended with it. */
  async startTiering(options: Parameters<typeof TieringProcess.start>[1] = {}): Promise<TieringProcess> {
    const worker = await TieringProcess.start(this.bootstrap, { ...options, settings: { ...this.s3Server?.options, ...options.settings } });
    this.workers.push(worker);
    return worker;
  }

  /** A temp dir removed with the cluster. */
  tempDir(prefix: string): string {
    const dir = tempDir(prefix);
    this.dirs.push(dir);
    return dir;
  }

  /** Ends everything the cluster started; fails, after all is ended, if a process did not stop cleanly. */
  async stop(): Promise<void> {
    this.session?.close();
    this.session = undefined;
    await this.executor?.close();
    this.executor = undefined;
    await this.connection?.close();
    this.connection = undefined;
    const members = this.roster.splice(0);
    // A server that failed to start has no process. Tablet servers stop while the coordinator still
    // runs (their controlled shutdown asks it to move their leaderships), and a frozen one is resumed first.
    const ended = async (command: ServerCommand): Promise<(string | undefined)[]> =>
      Promise.all(members.filter((m) => m.command === command && m.process).map((m) => (m.process!.resume(), end(m.process!))));
    const unclean = [...(await Promise.all(this.workers.splice(0).map(end))), ...(await ended('start')), ...(await ended('tablet-server')), ...(await ended('coordinator-server'))];
    await this.zk?.close();
    this.zk = undefined;
    await this.s3Server?.stop();
    this.s3Server = undefined;
    for (const dir of [...members.map((m) => m.dataDir), ...this.dirs.splice(0)]) fs.rmSync(dir, { recursive: true, force: true });
    assert.deepEqual(unclean.filter((e) => e !== undefined), [], 'a clean shutdown');
  }

  /** Starts the S3 server `objectStorage` asks for, and points the cluster's settings at it. */
  private async startObjectStorage(): Promise<void> {
    const wanted = this.options.objectStorage;
    if (!wanted) return;
    const s3 = (this.s3Server = await startS3Server());
    Object.assign(this.clusterSettings, s3.options);
    if (wanted.remoteData) this.clusterSettings['remote.data.dir'] = s3.location('remote');
    if (wanted.warehouse) this.clusterSettings['datalake.iceberg.warehouse'] = s3.location('warehouse');
  }

  /** Starts the members side by side; settled one by one, so that one that started is ended even when another failed. */
  private async launchAll(members: Member[]): Promise<void> {
    const started = await Promise.allSettled(members.map((m) => this.launch(m, 0)));
    const failed = started.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
  }

  private async launch(member: Member, port: number, settings: Record<string, string> = {}): Promise<ServerProcess> {
    const { args, cli } = this.options;
    const own: Record<string, string> = member.id === undefined ? {} : { 'tablet-server.id': String(member.id) };
    // Flags of `start` (--no-tiering) are not flags of the cluster's commands.
    member.process = await ServerProcess.start({
      command: member.command,
      dataDir: member.dataDir,
      port,
      settings: { ...this.clusterSettings, ...this.options.settings, ...own, ...settings },
      args: member.command === 'start' ? args : [],
      cli,
    });
    return member.process;
  }

  private connect(): Promise<Connection> {
    // A client reading an S3 warehouse itself (union reads, backfill) reaches it with the same options.
    return Connection.create({ ...(this.options.client || {}), ...this.s3Server?.options, 'bootstrap.servers': this.bootstrap });
  }
}

/** SIGTERM, and SIGKILL after STOP_TIMEOUT_MS; says what went wrong, if anything. */
async function end(p: OwnedProcess): Promise<string | undefined> {
  if (!p.running) return undefined;
  const timeout = new AbortController();
  const code = await Promise.race([p.stop(), sleep(STOP_TIMEOUT_MS, 'timeout' as const, { signal: timeout.signal }).catch(() => 'aborted' as const)]);
  timeout.abort();
  if (code === 'timeout') await p.kill();
  if (code === 0) return undefined;
  const how = code === 'timeout' ? `did not stop within ${STOP_TIMEOUT_MS} ms` : code === null ? `ended by ${p.signalCode ?? "a signal"}` : `exited with ${code}`;
  return `${p.name} ${how}: ${p.stderr.slice(-2000)}`;
}

/**
 * A cluster for the enclosing suite: started in a `before` hook, then `setup` (a suite's tables, say)
 * in the same hook, since Node 20 runs a file's top-level hooks at the same time; ended in an `after` hook.
 */
export function useCluster(options: ClusterOptions = {}, setup?: (cluster: TestCluster) => Promise<void>): TestCluster {
  const cluster = new TestCluster(options);
  const { before, after } = suiteHooks();
  before(async () => {
    await cluster.start();
    await setup?.(cluster);
  });
  after(() => cluster.stop());
  return cluster;
}

/** A cluster for one test, ended when the test ends, whether it passed or failed. */
export async function startCluster(t: TestContext, options: ClusterOptions = {}): Promise<TestCluster> {
  const cluster = await TestCluster.start(options);
  t.after(() => cluster.stop());
  return cluster;
}

/** Polls `probe` until it gives a value (errors count as none), or fails after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
