/**
 * A producer child process of a crash test (crash-writer-child.ts or pk-writer-child.ts): started
 * with its arguments, it prints `acked <n>` after each acknowledged round and `done` at the end;
 * the test waits for rounds between its kills and for the exit code at the end.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { CLI } from './server-process.js';

const SUPPORT = path.join(path.dirname(CLI), '..', '..', 'test', 'support');

export class WriterChild {
  /** The highest round (or id) acknowledged so far, -1 before the first. */
  acked = -1;
  done = false;
  private err = '';
  private readonly exited: Promise<number | null>;

  private constructor(private readonly child: ChildProcess) {
    child.stderr!.on('data', (d: Buffer) => (this.err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      for (const m of d.toString().matchAll(/acked (\d+)/g)) this.acked = Math.max(this.acked, Number(m[1]));
      if (d.toString().includes('done')) this.done = true;
    });
    this.exited = new Promise((resolve) => child.once('exit', resolve));
  }

  /** Runs `test/support/<script>` with `args`. */
  static start(script: 'crash-writer-child.ts' | 'pk-writer-child.ts', args: string[]): WriterChild {
    return new WriterChild(spawn(process.execPath, ['--import', 'tsx', path.join(SUPPORT, script), ...args], { stdio: ['ignore', 'pipe', 'pipe'] }));
  }

  /** Waits until `acked` reaches `atLeast` (or the writer is done), for at most `timeoutMs`. */
  async waitForAcks(atLeast: number, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.acked < atLeast && !this.done && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }

  /** Its exit code once it ends. */
  exit(): Promise<number | null> {
    return this.exited;
  }

  get stderr(): string {
    return this.err;
  }
}
