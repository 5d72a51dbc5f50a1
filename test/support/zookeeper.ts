/**
 * Runs a real ZooKeeper server (Debian's `zookeeper` package) as a child process for tests: a
 * standalone QuorumPeerMain on a temp data dir and an ephemeral loopback port, with start, stop,
 * kill -9 and a restart on the same port and data dir.
 *
 * The classpath is the one the package's own `environment` file sets (found through `dpkg -L
 * zookeeper`), with our config dir in front of it; the jar's manifest brings in its dependencies.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { OwnedProcess } from './server-process.js';
import { suiteHooks } from './suite-hooks.js';

const INSTALL_HINT = 'ZooKeeper is not installed: run `apt-get install -y zookeeper` (Debian; .ci/run installs it in CI)';
/** Session timeouts the server grants: 2 ticks up to maxSessionTimeout, so tests can ask for short ones. */
const TICK_MS = 250;
const START_ATTEMPTS = 5;
const SERVING_TIMEOUT_MS = 60_000;

/** The jars of Debian's ZooKeeper, read from the CLASSPATH line of its packaged `environment` file. */
function zooKeeperJars(): string[] {
  let files: string[];
  try {
    files = execFileSync('dpkg', ['-L', 'zookeeper'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n');
  } catch {
    throw new Error(INSTALL_HINT);
  }
  const environment = files.find((f) => f.endsWith('/environment') && fs.existsSync(f));
  const classpath = environment && /^CLASSPATH="?([^"\n]*)"?/m.exec(fs.readFileSync(environment, 'utf8'))?.[1];
  const jars = (classpath ?? '').split(':').filter((p) => p.endsWith('.jar') && fs.existsSync(p));
  if (jars.length === 0) throw new Error(`${INSTALL_HINT} (no ZooKeeper jar found through the package's environment file)`);
  return jars;
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Sends a four-letter-word command and returns the answer ('' when nothing answers). */
function fourLetterWord(port: number, command: string): Promise<string> {
  return new Promise((resolve) => {
    let answer = '';
    const socket = net.connect(port, '127.0.0.1', () => socket.end(command));
    socket.setTimeout(2_000, () => socket.destroy());
    socket.on('data', (d: Buffer) => (answer += d.toString()));
    socket.on('error', () => undefined);
    socket.on('close', () => resolve(answer));
  });
}

/** A ZooKeeper server the test owns: one more `OwnedProcess`, beside servers and tiering workers. */
export class ZooKeeperServer implements OwnedProcess {
  readonly name = 'zookeeper';
  private child: ChildProcess | undefined;
  private exited: Promise<number | null> = Promise.resolve(null);
  private err = '';
  private readonly killOnExit = (): void => void this.child?.kill('SIGKILL');

  private constructor(
    readonly dir: string,
    private port: number,
  ) {}

  /** Starts a server on a new temp dir and a free loopback port; fails with how to install ZooKeeper when it is missing. */
  static async start(): Promise<ZooKeeperServer> {
    const server = new ZooKeeperServer(fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-zookeeper-')), 0);
    process.on('exit', server.killOnExit);
    try {
      for (let attempt = 1; ; attempt++) {
        server.port = await freePort();
        // Another process may take the port between our probe and the server's bind: pick another.
        if (await server.launch()) return server;
        if (attempt === START_ATTEMPTS) throw new Error(`ZooKeeper did not start in ${START_ATTEMPTS} attempts: ${server.stderr}`);
      }
    } catch (err) {
      await server.close();
      throw err;
    }
  }

  /** The connection string of this server (`zookeeper.address`). */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Sends a four-letter-word command (srvr, conf, wchp: the watched paths) and returns the answer. */
  command(word: 'srvr' | 'conf' | 'wchp'): Promise<string> {
    return fourLetterWord(this.port, word);
  }

  /** Starts the server again on the same port and data dir, after stop() or kill(). */
  async restart(): Promise<void> {
    if (this.child) throw new Error('ZooKeeper is still running');
    for (let attempt = 1; !(await this.launch()); attempt++) {
      if (attempt === START_ATTEMPTS) throw new Error(`ZooKeeper did not restart on port ${this.port}: ${this.stderr}`);
    }
  }

  get running(): boolean {
    return this.child !== undefined;
  }

  /** Its stderr so far (the last 4 KB). */
  get stderr(): string {
    return this.err;
  }

  /** SIGTERM and wait; resolves with the exit code. */
  async stop(): Promise<number | null> {
    this.child?.kill('SIGTERM');
    return this.exited;
  }

  /** SIGKILL and wait: a crash, the data dir stays as it was. */
  async kill(): Promise<void> {
    this.child?.kill('SIGKILL');
    await this.exited;
  }

  /** Stops the server and removes its data dir. */
  async close(): Promise<void> {
    await this.kill();
    process.off('exit', this.killOnExit);
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  /** Runs the server until it serves (true) or exits (false, e.g. its port was taken). */
  private async launch(): Promise<boolean> {
    const confDir = path.join(this.dir, 'conf');
    fs.mkdirSync(confDir, { recursive: true });
    const cfg = path.join(confDir, 'zoo.cfg');
    fs.writeFileSync(
      cfg,
      [
        `tickTime=${TICK_MS}`,
        `dataDir=${path.join(this.dir, 'data')}`,
        `clientPort=${this.port}`,
        'clientPortAddress=127.0.0.1',
        'maxSessionTimeout=60000',
        'admin.enableServer=false',
        '4lw.commands.whitelist=srvr,conf,wchp',
        '',
      ].join('\n'),
    );
    const classpath = [confDir, ...zooKeeperJars()].join(':');
    const jvm = ['-Xms32m', '-Xmx256m', '-XX:+UseSerialGC', '-XX:TieredStopAtLevel=1'];
    this.err = '';
    const child = spawn('java', [...jvm, '-cp', classpath, 'org.apache.zookeeper.server.quorum.QuorumPeerMain', cfg], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.on('data', (d: Buffer) => (this.err = (this.err + d.toString()).slice(-4_000)));
    let running = true;
    this.child = child;
    this.exited = new Promise((resolve) => {
      child.once('exit', (code) => {
        running = false;
        if (this.child === child) this.child = undefined;
        resolve(code);
      });
      child.once('error', (err) => {
        this.err += `${err.message}\n`;
        if (this.child === child) this.child = undefined;
        resolve(null);
      });
    });
    const deadline = Date.now() + SERVING_TIMEOUT_MS;
    while (running && Date.now() < deadline) {
      // A server still loading its data answers `srvr` without a mode; `conf` tells ours (our data dir)
      // from another that took the port first, which makes ours exit.
      if ((await fourLetterWord(this.port, 'srvr')).includes('Mode: standalone') && (await fourLetterWord(this.port, 'conf')).includes(this.dir)) {
        return running;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (running) {
      await this.kill();
      throw new Error(`ZooKeeper did not serve on port ${this.port} within ${SERVING_TIMEOUT_MS} ms: ${this.stderr}`);
    }
    return false;
  }
}

/** What a test file's ZooKeeper fixture holds: its server, and the sessions to close after its tests. */
export interface ZooKeeperFixture {
  readonly server: ZooKeeperServer;
  /** Closes `session` after the file's tests; returns it. */
  track<T extends { close(): Promise<void> }>(session: T): T;
  /** A new root znode path `/<prefix>-<n>`, so that every test starts from an empty tree. */
  newRoot(prefix: string): string;
}

/** One ZooKeeper server for a test file: started before its tests, stopped with every tracked session after them. */
export function useZooKeeper(): ZooKeeperFixture {
  let server: ZooKeeperServer | undefined;
  const sessions: { close(): Promise<void> }[] = [];
  let roots = 0;
  const { before, after } = suiteHooks();
  before(async () => {
    server = await ZooKeeperServer.start();
  });
  after(async () => {
    await Promise.all(sessions.map((s) => s.close()));
    await server?.close();
  });
  return {
    get server() {
      if (!server) throw new Error('the ZooKeeper server starts in before()');
      return server;
    },
    track(session) {
      sessions.push(session);
      return session;
    },
    newRoot: (prefix) => `/${prefix}-${++roots}`,
  };
}
