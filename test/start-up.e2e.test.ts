/**
 * Start-up failures: each gives a named error and a non-zero exit promptly, and leaves nothing
 * behind (no data dir the start created, no lock). And the data-dir lock: a killed server that its
 * parent has not reaped yet (a zombie) does not hold the lock.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, test } from 'node:test';
import { pino } from 'pino';
import { TributaryError } from '../src/common/errors.js';
import { DataDirLock, LOCK_FILE, processStartTime } from '../src/server/data-dir-lock.js';
import { TributaryServer } from '../src/server/server.js';
import { CLI_ARGS, ServerProcess, tempDir } from './support/server-process.js';

const silent = pino({ level: 'silent' });
const root = tempDir('start-up');
const children: ChildProcess[] = [];
after(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  fs.rmSync(root, { recursive: true, force: true });
});

function settings(dataDir: string, more: Record<string, string> = {}): Record<string, string> {
  return { 'data.dir': dataDir, 'bind.listeners': 'TRIBUTARY://127.0.0.1:0', 'http.port': '0', ...more };
}

async function startFails(s: Record<string, string>, name: string): Promise<TributaryError> {
  let caught: unknown;
  await TributaryServer.start(s, silent).then(
    (server) => server.stop(),
    (err: unknown) => (caught = err),
  );
  assert.ok(caught instanceof TributaryError, `expected ${name}, got ${String(caught)}`);
  assert.equal(caught.errorName, name, caught.message);
  return caught;
}

/** A port some other socket listens on. */
async function takenPort(): Promise<{ port: number; close: () => void }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}

function run(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [...CLI_ARGS, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn' } });
  children.push(child);
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stderr })));
}

test('a data dir under /proc fails with INVALID_DATA_DIR and exit 1 instead of hanging', { timeout: 120_000 }, async () => {
  const { code, stderr } = await run(['start', '--data-dir', '/proc/tributary-nope/data', '--port', '0', '--http-port', '0', '--no-tiering']);
  assert.equal(code, 1);
  assert.match(stderr, /^ERROR INVALID_DATA_DIR: cannot create \/proc\/tributary-nope\/data/m);
  assert.equal(fs.existsSync('/proc/tributary-nope'), false);
});

test('a data dir that is a file, or under one, fails with INVALID_DATA_DIR', async () => {
  const file = path.join(root, 'a-file');
  fs.writeFileSync(file, 'not a directory');
  const err = await startFails(settings(file), 'INVALID_DATA_DIR');
  assert.match(err.message, /is not a directory/);
  await startFails(settings(path.join(file, 'data')), 'INVALID_DATA_DIR');
  assert.equal(fs.readFileSync(file, 'utf8'), 'not a directory');
});

test('a port out of range fails with INVALID_CONFIG_EXCEPTION before the data dir is made', async () => {
  const dir = path.join(root, 'bad-port');
  const err = await startFails(settings(dir, { 'bind.listeners': 'TRIBUTARY://127.0.0.1:99999' }), 'INVALID_CONFIG_EXCEPTION');
  assert.match(err.message, /99999/);
  await startFails(settings(dir, { 'http.port': '99999' }), 'INVALID_CONFIG_EXCEPTION');
  assert.equal(fs.existsSync(dir), false);
});

test('a lake format other than iceberg fails with INVALID_CONFIG_EXCEPTION naming the supported one, before the data dir is made', async () => {
  const dir = path.join(root, 'bad-lake-format');
  for (const format of ['paimon', 'delta']) {
    const err = await startFails(settings(dir, { 'datalake.format': format }), 'INVALID_CONFIG_EXCEPTION');
    assert.match(err.message, new RegExp(`'${format}' for option 'datalake.format'.*iceberg`));
  }
  assert.equal(fs.existsSync(dir), false);
});

test('an RPC port in use fails with ADDRESS_IN_USE and removes the data dir the start created', async () => {
  const taken = await takenPort();
  try {
    const parent = path.join(root, 'rpc-in-use');
    const err = await startFails(settings(path.join(parent, 'data'), { 'bind.listeners': `TRIBUTARY://127.0.0.1:${taken.port}` }), 'ADDRESS_IN_USE');
    assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${taken.port} \\(bind\\.listeners\\)`));
    assert.equal(fs.existsSync(parent), false);
  } finally {
    taken.close();
  }
});

test('an HTTP port in use fails with ADDRESS_IN_USE, keeps an existing data dir and leaves no lock', async () => {
  const dir = path.join(root, 'http-in-use');
  const first = await TributaryServer.start(settings(dir), silent);
  await first.stop();
  const taken = await takenPort();
  try {
    fs.rmSync(path.join(dir, LOCK_FILE));
    const err = await startFails(settings(dir, { 'http.port': String(taken.port) }), 'ADDRESS_IN_USE');
    assert.match(err.message, /\(http\.port\)/);
    assert.ok(fs.existsSync(path.join(dir, 'metadata')), 'the existing data dir stays');
    assert.equal(fs.existsSync(path.join(dir, LOCK_FILE)), false, 'no lock file is left behind');
  } finally {
    taken.close();
  }
  // Nothing holds the dir: the next start takes it.
  const again = await TributaryServer.start(settings(dir), silent);
  await again.stop();
});

test('the CLI names a port in use and exits 1', { timeout: 120_000 }, async () => {
  const taken = await takenPort();
  try {
    const dir = path.join(root, 'cli-in-use');
    const { code, stderr } = await run(['start', '--data-dir', dir, '--port', '0', '--http-port', String(taken.port), '--no-tiering']);
    assert.equal(code, 1);
    assert.match(stderr, /^ERROR ADDRESS_IN_USE: /m);
    assert.equal(fs.existsSync(dir), false);
  } finally {
    taken.close();
  }
});

/** Runs `sh -c script`; resolves once its output matches `until`, with the child and the output so far. */
async function shell(until: RegExp, script: string, ...args: string[]): Promise<{ child: ChildProcess; out: string }> {
  const child = spawn('sh', ['-c', script, 'sh', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn' } });
  children.push(child);
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const out = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      if (until.test(text)) resolve(text);
    });
    child.once('close', () => reject(new Error(`the shell ended first: ${text} ${err}`)));
  });
  return { child, out };
}

async function untilZombie(pid: number): Promise<void> {
  for (let i = 0; i < 1000 && !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')); i++) await new Promise((r) => setTimeout(r, 10));
  assert.match(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'), /\) Z /, `process ${pid} should be a zombie`);
}

test('the lock: a live owner refuses, a zombie, a reused pid or an empty file does not', { skip: !fs.existsSync('/proc/self/stat') && 'needs /proc' }, async () => {
  const dir = path.join(root, 'lock');
  fs.mkdirSync(dir);
  const file = path.join(dir, LOCK_FILE);
  // `sleep 0` exits at once; its parent then becomes `sleep 30`, which never reaps it.
  const { child, out } = await shell(/\n/, 'sleep 0 & echo $!; exec sleep 30');
  const zombie = Number(out.trim());
  await untilZombie(zombie);
  const owner = child.pid!;

  fs.writeFileSync(file, `${owner} ${processStartTime(owner)}\n`);
  await assert.rejects(DataDirLock.acquire(dir), (err: unknown) => err instanceof TributaryError && err.errorName === 'DATA_DIR_LOCKED' && err.message.includes(String(owner)));
  // Files of the older format hold the pid only.
  fs.writeFileSync(file, `${owner}\n`);
  await assert.rejects(DataDirLock.acquire(dir), (err: unknown) => err instanceof TributaryError && err.errorName === 'DATA_DIR_LOCKED');

  for (const stale of [`${zombie} 1\n`, `${zombie}\n`, `${owner} 1\n`, '']) {
    fs.writeFileSync(file, stale);
    const lock = await DataDirLock.acquire(dir);
    assert.equal(fs.readFileSync(file, 'utf8'), `${process.pid} ${processStartTime('self')}\n`, `taking over '${stale.trim()}'`);
    await lock.release();
    assert.equal(fs.readFileSync(file, 'utf8'), '');
  }
});

test('a server killed with -9 and not yet reaped does not keep a new server from starting', { timeout: 180_000, skip: !fs.existsSync('/proc/self/stat') && 'needs /proc' }, async () => {
  const dir = path.join(root, 'restart');
  // The server's parent execs into `sleep`, which never reaps it: once killed it stays a zombie.
  const args = [...CLI_ARGS, 'start', '--data-dir', dir, '--port', '0', '--http-port', '0', '--no-tiering'];
  const { out } = await shell(/ready bootstrap=/, '"$@" & echo "pid $!"; exec sleep 150', process.execPath, ...args);
  const pid = Number(/^pid (\d+)$/m.exec(out)![1]);
  process.kill(pid, 'SIGKILL');
  await untilZombie(pid);
  const next = await ServerProcess.start({ dataDir: dir, args: ['--no-tiering'] });
  try {
    assert.match(fs.readFileSync(path.join(dir, LOCK_FILE), 'utf8'), new RegExp(`^${next.child.pid} `));
  } finally {
    await next.stop();
  }
});
