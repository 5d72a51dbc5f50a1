/**
 * Starts a real Tributary server as a child process (`tributary start`) on ephemeral ports and a
 * temp data dir, waits for its `ready` line, and stops or kills it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = path.join(ROOT, 'src', 'cli', 'main.ts');

export function tempDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `tributary-${prefix}-`));
}

export class ServerProcess {
  bootstrap = '';
  http = '';
  stderr = '';
  private exited: Promise<number | null>;

  private constructor(
    readonly child: ChildProcess,
    readonly dataDir: string,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /**
   * Starts a server on `dataDir` (a new temp dir by default); `port` 0 picks a free one; `args` are
   * more CLI flags (e.g. `--no-tiering`); `cli` is a built CLI to run instead of the source (e.g. an
   * installed package's `dist/cli/main.js`); `logLevel` is its log level (warn by default).
   */
  static async start(options: { dataDir?: string; port?: number; settings?: Record<string, string>; args?: string[]; cli?: string; logLevel?: string } = {}): Promise<ServerProcess> {
    const dataDir = options.dataDir ?? tempDir('data');
    const cli = options.cli === undefined ? ['--import', 'tsx', CLI] : [options.cli];
    const args = [...cli, 'start', '--data-dir', dataDir, '--port', String(options.port ?? 0), '--http-port', '0'];
    for (const [k, v] of Object.entries(options.settings ?? {})) args.push('--set', `${k}=${v}`);
    args.push(...(options.args ?? []));
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: options.logLevel ?? 'warn' } });
    const server = new ServerProcess(child, dataDir);
    child.stderr!.on('data', (d: Buffer) => (server.stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      const onData = (d: Buffer): void => {
        out += d.toString();
        const m = /ready bootstrap=(\S+) http=(\S+)/.exec(out);
        if (m) {
          server.bootstrap = m[1];
          server.http = m[2];
          child.stdout!.off('data', onData);
          resolve();
        }
      };
      child.stdout!.on('data', onData);
      child.once('close', (code) => reject(new Error(`server exited with ${code} before ready: ${server.stderr}`)));
    });
    return server;
  }

  get port(): number {
    return Number(this.bootstrap.split(':').pop());
  }

  /** SIGTERM and wait: the graceful path. */
  async stop(): Promise<number | null> {
    this.child.kill('SIGTERM');
    return this.exited;
  }

  /** SIGKILL and wait: a crash. */
  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** A `tributary tiering` worker process; `nodeArgs` go to Node (e.g. `--cpu-prof`). */
export class TieringProcess {
  stderr = '';
  private readonly exited: Promise<number | null>;

  private constructor(readonly child: ChildProcess) {
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  static async start(
    bootstrap: string,
    options: { logLevel?: string; threads?: number; pollIntervalMs?: number; nodeArgs?: string[] } = {},
  ): Promise<TieringProcess> {
    const args = [...(options.nodeArgs ?? []), '--import', 'tsx', CLI, 'tiering', '--bootstrap', bootstrap, '--poll-interval', String(options.pollIntervalMs ?? 100)];
    if (options.threads !== undefined) args.push('--threads', String(options.threads));
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, TRIBUTARY_LOG_LEVEL: options.logLevel ?? 'warn' },
    });
    const worker = new TieringProcess(child);
    child.stderr!.on('data', (d: Buffer) => (worker.stderr += d.toString()));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('ready tiering')) resolve();
      });
      child.once('close', (code) => reject(new Error(`tiering worker exited with ${code} before ready: ${worker.stderr}`)));
    });
    return worker;
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }

  async kill(): Promise<void> {
    this.child.kill('SIGKILL');
    await this.exited;
  }
}
