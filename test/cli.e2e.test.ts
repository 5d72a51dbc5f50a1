/**
 * The `tributary` command as users run it: a real CLI process per case, its stdout, stderr and
 * exit code.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { testTempDir } from '../src/common/fixtures/temp-dirs.js';
import type { ProgressEvent } from '../src/query/progress.js';
import { startCluster, useCluster } from './support/cluster.js';
import { CLI_ARGS } from './support/server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Runs the CLI with `args`, `input` on its stdin (a pipe, so not a terminal), until it exits. */
export function runCli(args: string[], input = ''): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [...CLI_ARGS, ...args], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, TRIBUTARY_LOG_LEVEL: 'warn' } });
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

describe('tributary sql with statements piped into stdin', () => {
  const cluster = useCluster({ args: ['--no-tiering'] });

  it('prints only the results, no prompts and no progress, and stops at the first error with exit code 1', async () => {
    const script = [
      'CREATE DATABASE piped;',
      'CREATE TABLE piped.src (id BIGINT, note STRING);',
      "INSERT INTO piped.src SELECT range, 'a;\nb' FROM range(5000);",
      'CREATE TABLE piped.dst (id BIGINT, note STRING);',
      'INSERT INTO piped.dst SELECT * FROM piped.src;',
      'SELECT count(*) AS n, min(note) AS note',
      '  FROM piped.dst;',
      'SELECT nope FROM piped.dst;',
      'SELECT 42 AS after_error;',
    ].join('\n');
    const { code, stdout, stderr } = await runCli(['sql', '--bootstrap', cluster.bootstrap, '--format', 'json'], script);
    assert.equal(code, 1, stderr);
    assert.deepEqual(
      stdout.trim().split('\n').map((l) => JSON.parse(l)),
      [{ n: 5000, note: 'a;\nb' }],
    );
    assert.doesNotMatch(stdout, /tributary:|->/);
    assert.match(stderr, /row\(s\) inserted/);
    assert.match(stderr, /ERROR INVALID_ARGUMENT: .*nope/);
    assert.doesNotMatch(stderr, /after_error|\r/);
  });

  it('runs on after a failed statement with --continue-on-error, still exiting 1', async () => {
    const { code, stdout } = await runCli(['sql', '--bootstrap', cluster.bootstrap, '--format', 'csv', '--continue-on-error'], 'SELECT nope;\nSELECT 42 AS after_error;\nSELECT 43 AS last');
    assert.equal(code, 1);
    assert.equal(stdout, 'after_error\r\n42\nlast\r\n43\n');
  });
});

describe('progress of a statement', () => {
  it('reports the rows an INSERT … SELECT has read and written so far, up to all of them', async (t) => {
    const executor = (await startCluster(t, { args: ['--no-tiering'], sql: 'tributary' })).sql;
    await executor.execute("CREATE TABLE src (id BIGINT) WITH ('bucket.num' = '2')");
    await executor.execute('CREATE TABLE dst (id BIGINT)');
    await executor.execute('INSERT INTO src SELECT range FROM range(5000)');
    const events: ProgressEvent[] = [];
    await executor.execute('INSERT INTO dst SELECT * FROM src', undefined, { onProgress: (e) => events.push({ ...e }) });
    const reads = events.filter((e) => e.phase === 'read');
    const writes = events.filter((e) => e.phase === 'write');
    assert.ok(reads.length > 0 && reads.every((e) => e.table === 'tributary.src'), JSON.stringify(reads));
    assert.equal(reads.at(-1)!.rows, 5000);
    assert.ok(writes.length > 1, 'several reports while writing');
    assert.ok(writes.every((e, i) => e.table === 'tributary.dst' && e.total === 5000 && (i === 0 || e.rows > writes[i - 1].rows)), JSON.stringify(writes));
    assert.equal(writes.at(-1)!.rows, 5000);
    // Without a listener nothing is reported, and statements run as before.
    assert.match((await executor.execute('INSERT INTO dst SELECT * FROM src')).message!, /5000 row\(s\) inserted/);
  });
});

describe('object storage options of the commands that are not servers', () => {
  const SECRET = 'wJalrXUtnFEMI-never-shown';
  const KEY_ID = 'AKIA-never-shown';
  // Port 1 on loopback: nothing listens, so every S3 request fails at once.
  const s3 = ['--set', 's3.endpoint=http://127.0.0.1:1', '--set', `s3.access-key=${KEY_ID}`, '--set', `s3.secret-key=${SECRET}`, '--set', 's3.max-attempts=1'];

  it('tributary lake, tiering and sql take s3.* from --set and --config, and never print the credentials', async () => {
    const lake = await runCli(['lake', 'expire-snapshots', '--warehouse', 's3://nowhere/warehouse', '--table', 'db.t', ...s3]);
    assert.equal(lake.code, 1);
    assert.match(lake.stderr, /STORAGE_EXCEPTION.*127\.0\.0\.1:1|127\.0\.0\.1:1.*STORAGE_EXCEPTION/s, 'the S3 settings were used');
    const config = path.join(testTempDir('cli-s3'), 'tributary.yaml');
    fs.writeFileSync(config, `s3.endpoint: http://127.0.0.1:1\ns3.access-key: ${KEY_ID}\ns3.secret-key: ${SECRET}\ns3.max-attempts: 1\n`);
    const fromFile = await runCli(['lake', 'compact', '--warehouse', 's3://nowhere/warehouse', '--table', 'db.t', '--config', config]);
    assert.equal(fromFile.code, 1);
    assert.match(fromFile.stderr, /127\.0\.0\.1:1/, 'the config file was read');
    const typo = await runCli(['tiering', '--bootstrap', '127.0.0.1:1', '--set', `s3.secret-kee=${SECRET}`]);
    assert.equal(typo.code, 1);
    assert.match(typo.stderr, /INVALID_CONFIG_EXCEPTION.*s3\.secret-kee/);
    const other = await runCli(['sql', '--bootstrap', '127.0.0.1:1', '-e', 'SELECT 1', '--set', 'table.log.ttl=1d', ...s3]);
    assert.equal(other.code, 1);
    assert.match(other.stderr, /tributary sql takes the s3\.\* and datalake\.cache\.\* options and the sql\.\* options, got 'table\.log\.ttl'/);
    for (const run of [lake, fromFile, typo, other]) {
      for (const secret of [SECRET, KEY_ID]) assert.ok(!run.stdout.includes(secret) && !run.stderr.includes(secret), `${secret} is not printed: ${run.stderr}`);
    }
  });
});
