import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { gcFlags, missingFlags } from './node-flags.cjs';

const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bin.cts');
const canExecve = typeof (process as { execve?: unknown }).execve === 'function';

test('GC on the main thread alone on two cores or fewer, in parallel on more, unless TRIBUTARY_GC says', () => {
  assert.deepEqual(gcFlags({}, 1), ['--single-threaded-gc']);
  assert.deepEqual(gcFlags({}, 2), ['--single-threaded-gc']);
  assert.deepEqual(gcFlags({}, 3), []);
  assert.deepEqual(gcFlags({ TRIBUTARY_GC: 'parallel' }, 2), []);
  assert.deepEqual(gcFlags({ TRIBUTARY_GC: 'single' }, 16), ['--single-threaded-gc']);
  assert.throws(() => gcFlags({ TRIBUTARY_GC: 'fast' }, 2), /TRIBUTARY_GC is 'single' or 'parallel', got 'fast'/);
  assert.deepEqual(missingFlags(['--single-threaded-gc'], ['--single-threaded-gc', '--import', 'tsx']), []);
  assert.deepEqual(missingFlags(['--single-threaded-gc'], ['--import', 'tsx']), ['--single-threaded-gc']);
});

/** Runs the command's entry with `env`; resolves with its exit code and output once it exits or printed `until`. */
function runBin(args: string[], env: Record<string, string>, until?: RegExp): Promise<{ code: number | null; out: string; err: string; cmdline: string[] }> {
  const child = spawn(process.execPath, ['--import', 'tsx', BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  let cmdline: string[] = [];
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => {
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (until?.test(out) && cmdline.length === 0) {
        // The same pid as spawned: the process replaced itself rather than starting a child.
        cmdline = fs.readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0');
        child.kill('SIGTERM');
      }
    });
    child.once('exit', (code) => resolve({ code, out, err, cmdline }));
  });
}

test('a server started by the command runs with the GC flags, in the process it was started as', { timeout: 60_000 }, async (t) => {
  for (const mode of ['single', 'parallel']) {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-flags-'));
    t.after(() => fs.rmSync(dataDir, { recursive: true, force: true }));
    const { cmdline, err } = await runBin(['start', '--data-dir', dataDir, '--port', '0', '--http-port', '0', '--no-tiering'], { TRIBUTARY_GC: mode, TRIBUTARY_LOG_LEVEL: 'warn' }, /ready bootstrap=/);
    assert.ok(cmdline.length > 0, `the server did not become ready: ${err}`);
    // Nodes before 22.15 cannot replace the process and run without the flag.
    assert.equal(cmdline.includes('--single-threaded-gc'), mode === 'single' && canExecve, `${mode}: ${cmdline.join(' ')}`);
  }
});

test('TRIBUTARY_GC of another value stops a server command with a named error; other commands ignore it', { timeout: 60_000 }, async () => {
  const bad = await runBin(['start', '--data-dir', path.join(os.tmpdir(), 'never-created'), '--port', '0'], { TRIBUTARY_GC: 'fast' });
  assert.equal(bad.code, 2);
  assert.match(bad.err, /tributary: TRIBUTARY_GC is 'single' or 'parallel', got 'fast'/);
  const version = await runBin(['--version'], { TRIBUTARY_GC: 'fast' });
  assert.equal(version.code, 0, version.err);
});
