/**
 * Real Tributary processes as children of a test: a server (`tributary start`, or a cluster's
 * `coordinator-server` or `tablet-server`) on ephemeral ports and a temp data dir, and a tiering
 * worker (`tributary tiering`). Each waits for its `ready` line, and stops (SIGTERM), is killed
 * (SIGKILL), or is frozen (SIGSTOP) and resumed. test/support/cluster.ts builds suites' servers from these.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT, 'src', 'cli', 'main.ts');

/**
 * Node's arguments that run the `tributary` command (its own arguments follow): the built CLI
 * when `dist/` is current with the sources (`npm ci` and `npm run build` make it), else the
 * sources through tsx. A built process starts on about half the CPU (no transpiling loader), and
 * the suites start hundreds of them.
 */
export const CLI_ARGS: readonly string[] = distIsCurrent() ? [path.join(ROOT, 'dist', 'cli', 'main.js')] : ['--import', 'tsx', CLI];

/** Whether every source the build compiles (tsconfig.build.json) has its output in dist/, written after it. */
export function distIsCurrent(): boolean {
  const src = path.join(ROOT, 'src');
  for (const entry of fs.readdirSync(src, { recursive: true, withFileTypes: true })) {
    const file = path.join(entry.parentPath, entry.name);
    const rel = path.relative(src, file);
    if (!entry.isFile() || !/\.c?ts$/.test(rel) || /\.test\.ts$|-child\.ts$/.test(rel) || rel.split(path.sep).includes('fixtures')) continue;
    const built = path.join(ROOT, 'dist', rel.replace(/\.ts$/, '.js').replace(/\.cts$/, '.cjs'));
    let builtAt: number;
    try {
      builtAt = fs.statSync(built).mtimeMs;
    } catch {
      return false;
    }
    if (builtAt < fs.statSync(file).mtimeMs) return false;
  }
  return true;
}

/** The Node options of the installed command (the `#!` line of src/cli/bin.cts), which the processes started here are given too. */
export const TRIBUTARY_NODE_OPTIONS: readonly string[] = /^#!\/usr\/bin\/env -S node (.+)$/.exec(fs.readFileSync(path.join(ROOT, 'src', 'cli', 'bin.cts'), 'utf8').split('\n')[0])?.[1].split(' ') ?? [];

/** A new directory in `parent`, the system's temp dir by default. */
export function tempDir(prefix: string, parent = os.tmpdir()): string {
  return fs.mkdtempSync(path.join(parent, `tributary-${prefix}-`));
}

/** A process a test started and has to end: a server, a tiering worker, later ZooKeeper or an S3 server. */
export interface OwnedProcess {
  /** What it is, for messages. */
  readonly name: string;
  readonly running: boolean;
  /** Its stderr so far. */
  readonly stderr: string;
  /** The signal that ended it, if one did. */
  readonly signalCode?: NodeJS.Signals | null;
  /** SIGTERM and wait: the graceful path. Resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait: a crash. */
  kill(): Promise<void>;
}

/** Spawns `node args` from the project root and resolves once its stdout matched `ready`. */
async function spawnUntilReady(name: string, args: string[], logLevel: string, ready: RegExp): Promise<{ child: ChildProcess; match: RegExpExecArray; stderr: () => string }> {
  // The file I/O thread pool the installed command gives a server (src/cli/bin.cts), which a
  // process started from the sources has to be given before it starts.
  const env = { ...process.env, TRIBUTARY_LOG_LEVEL: logLevel, UV_THREADPOOL_SIZE: process.env.UV_THREADPOOL_SIZE ?? '16' };
  const child = spawn(process.execPath, [...TRIBUTARY_NODE_OPTIONS, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const match = await new Promise<RegExpExecArray>((resolve, reject) => {
    let out = '';
    const onData = (d: Buffer): void => {
      out += d.toString();
      const m = ready.exec(out);
      if (m) {
        child.stdout!.off('data', onData);
        resolve(m);
      }
    };
    child.stdout!.on('data', onData);
    child.once('close', (code) => reject(new Error(`${name} exited with ${code} before ready: ${stderr}`)));
  });
  return { child, match, stderr: () => stderr };
}

abstract class OwnedChildProcess implements OwnedProcess {
  abstract readonly name: string;
  private readonly exited: Promise<number | null>;

  protected constructor(
    readonly child: ChildProcess,
    private readonly err: () => string,
  ) {
    this.exited = new Promise((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
      else child.once('exit', (code) => resolve(code));
    });
  }

  get signalCode(): NodeJS.Signals | null {
    return this.child.signalCode;
  }

  get stderr(): string {
    return this.err();
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  async stop(): Promise<number | null> {
    if (this.running) this.child.kill('SIGTERM');
    return this.exited;
  }

  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGSTOP: the process stays, frozen (a long GC pause, a hung machine) until `resume`. */
  freeze(): void {
    if (this.running) this.child.kill('SIGSTOP');
  }

  resume(): void {
    if (this.running) this.child.kill('SIGCONT');
  }
}

/** What a server process runs: the embedded node, or one role of a cluster. */
export type ServerCommand = 'start' | 'coordinator-server' | 'tablet-server';

export class ServerProcess extends OwnedChildProcess {

  private constructor(
    child: ChildProcess,
    stderr: () => string,
    readonly command: ServerCommand,
    readonly dataDir: string,
    readonly bootstrap: string,
    readonly http: string,
    /** The Kafka listener's address, when the server was started with one. */
    readonly kafka: string,
  ) {
    super(child, stderr);
  }

  /**
   * Starts a server on `dataDir` (a new temp dir by default); `command` is what it runs (`start` by
   * default); `port` 0 picks a free one; `args` are more CLI flags (e.g. `--no-tiering`); `cli` is a
   * built CLI to run instead of the source (e.g. an installed package's `dist/cli/main.js`);
   * `logLevel` is its log level (warn by default); `nodeArgs` go to Node (e.g. `--cpu-prof`).
   */
  static async start(
    options: { command?: ServerCommand; dataDir?: string; port?: number; settings?: Record<string, string>; args?: string[]; cli?: string; logLevel?: string; nodeArgs?: string[] } = {},
  ): Promise<ServerProcess> {
    const command = options.command ?? 'start';
    const dataDir = options.dataDir ?? tempDir('data');
    const cli = options.cli === undefined ? CLI_ARGS : [options.cli];
    const args = [...(options.nodeArgs ?? []), ...cli, command, '--data-dir', dataDir, '--port', String(options.port ?? 0), '--http-port', '0'];
    for (const [k, v] of Object.entries(options.settings ?? {})) args.push('--set', `${k}=${v}`);
    args.push(...(options.args ?? []));
    const { child, match, stderr } = await spawnUntilReady(command === 'start' ? 'server' : command, args, options.logLevel ?? 'warn', /ready bootstrap=(\S+)(?: http=(\S+))?(?: kafka=(\S+))?/);
    return new ServerProcess(child, stderr, command, dataDir, match[1], match[2] ?? '', match[3] ?? '');
  }

  override get name(): string {
    return this.command === 'start' ? 'server' : this.command;
  }

  get port(): number {
    return Number(this.bootstrap.split(':').pop());
  }

  /** Stops the server (SIGTERM) and removes its data dir: the end of a test that is done with both. */
  async stopAndRemove(): Promise<number | null> {
    const code = await this.stop();
    fs.rmSync(this.dataDir, { recursive: true, force: true });
    return code;
  }
}

/** A `tributary tiering` worker process; `nodeArgs` go to Node (e.g. `--cpu-prof`). */
export class TieringProcess extends OwnedChildProcess {
  readonly name = 'tiering worker';

  static async start(
    bootstrap: string,
    options: { logLevel?: string; threads?: number; pollIntervalMs?: number; nodeArgs?: string[]; settings?: Record<string, string> } = {},
  ): Promise<TieringProcess> {
    const args = [...(options.nodeArgs ?? []), ...CLI_ARGS, 'tiering', '--bootstrap', bootstrap, '--poll-interval', String(options.pollIntervalMs ?? 100)];
    if (options.threads !== undefined) args.push('--threads', String(options.threads));
    for (const [k, v] of Object.entries(options.settings ?? {})) args.push('--set', `${k}=${v}`);
    const { child, stderr } = await spawnUntilReady('tiering worker', args, options.logLevel ?? 'warn', /ready tiering/);
    return new TieringProcess(child, stderr);
  }
}
