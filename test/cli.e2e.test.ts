/**
 * The `tributary` command as users run it: a real CLI process per case, its stdout, stderr and
 * exit code.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { CLI } from './support/server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs the CLI with `args`, `input` on its stdin (a pipe, so not a terminal), until it exits. */
export function runCli(args: string[], input = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn' } });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdin.end(input);
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

describe('tributary start --help', () => {
  it("shows each option's default as the configuration declares it", async () => {
    const { code, stdout } = await runCli(['start', '--help']);
    assert.equal(code, 0);
    const help = stdout.replace(/\s+/g, ' ');
    assert.match(help, /--data-dir <dir> data directory \(data\.dir, default: \.\/tributary-data\)/);
    assert.match(help, /--host <host> .*default: 127\.0\.0\.1\)/);
    assert.match(help, /--port <port> .*default: 9123\)/);
    assert.match(help, /--http-port <port> .*default: 9124\)/);
    assert.doesNotMatch(help, /default: \{\}/);
  });
});
