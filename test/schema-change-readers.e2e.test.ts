/**
 * Readers that cross an ALTER TABLE … ADD COLUMN, on a real server: a LogScanner made before the
 * change (without a projection) takes the new schema on when rows written with it arrive, and so
 * do `tributary tail` (table and json) and `tributary sql --stream` over `*`; a projected scanner
 * keeps its columns. None of them drops the new values.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import type { LogScanner, ScanRecord } from '../src/client/index.js';
import type { TablePath } from '../src/common/schema.js';
import { useCluster } from './support/cluster.js';
import { CLI_ARGS } from './support/server-process.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const cluster = useCluster({ args: ['--no-tiering'], client: { 'client.writer.batch-timeout': '2ms' } });

async function createTable(table: string): Promise<TablePath> {
  const path = { database: 'tributary', table };
  await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'BIGINT' }, { name: 'name', type: 'STRING' }], bucketCount: 1 });
  return path;
}

async function append(path: TablePath, rows: Record<string, unknown>[]): Promise<void> {
  const writer = await (await cluster.conn.getTable(path)).newAppend().createWriter();
  for (const row of rows) await writer.append(row);
  await writer.flush();
  await writer.close();
}

async function pollUntil(scanner: LogScanner, count: number): Promise<ScanRecord[]> {
  const out: ScanRecord[] = [];
  for (let i = 0; i < 200 && out.length < count; i++) out.push(...(await scanner.poll(200)));
  assert.equal(out.length, count, 'records read');
  return out;
}

/** A CLI child whose stdout is read line by line. */
function cli(args: string[]): { next: () => Promise<string>; stop: () => Promise<number | null>; stderr: () => string } {
  const child = spawn(process.execPath, [...CLI_ARGS, ...args, '--bootstrap', cluster.bootstrap], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const lines = readline.createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  return {
    next: async () => {
      const line = await lines.next();
      assert.ok(!line.done, `the output goes on: ${stderr}`);
      return line.value as string;
    },
    stop: async () => {
      child.kill('SIGINT');
      return exited;
    },
    stderr: () => stderr,
  };
}

test('a LogScanner made before ADD COLUMN yields the new column once rows carry it; a projected one keeps its columns', { timeout: 120_000 }, async () => {
  const path = await createTable('scanned');
  const before = await cluster.conn.getTable(path);
  const scanner = before.newScan().createLogScanner();
  const projected = before.newScan().project(['name', 'id']).createLogScanner();
  await scanner.subscribe(0, 'earliest');
  await projected.subscribe(0, 'earliest');
  const oldWriter = await before.newAppend().createWriter();
  await oldWriter.append({ id: 1n, name: 'a' });
  await oldWriter.flush();
  assert.deepEqual((await pollUntil(scanner, 1)).map((r) => r.row), [{ id: 1n, name: 'a' }]);
  assert.equal(scanner.schemaId, 0);

  await cluster.conn.getAdmin().alterTable(path, { addColumns: [{ name: 'tag', type: 'STRING' }] });
  await oldWriter.append({ id: 2n, name: 'b' }); // still schema 0
  await oldWriter.flush();
  await append(path, [{ id: 3n, name: 'c', tag: 't3' }]);
  await oldWriter.append({ id: 4n, name: 'd' });
  await oldWriter.flush();
  await oldWriter.close();

  const rows = (await pollUntil(scanner, 3)).map((r) => r.row);
  assert.equal(scanner.schemaId, 1);
  assert.deepEqual(scanner.schema.columns.map((c) => c.name), ['id', 'name', 'tag']);
  // The batch of schema 0 that came in the same fetch as the first of schema 1 is shown in schema 1 too.
  assert.deepEqual(rows, [
    { id: 2n, name: 'b', tag: null },
    { id: 3n, name: 'c', tag: 't3' },
    { id: 4n, name: 'd', tag: null },
  ]);
  assert.deepEqual((await pollUntil(projected, 4)).map((r) => r.row), [
    { name: 'a', id: 1n },
    { name: 'b', id: 2n },
    { name: 'c', id: 3n },
    { name: 'd', id: 4n },
  ]);
  assert.equal(projected.schemaId, 0);
  scanner.close();
  projected.close();
});

test('tributary tail started before ADD COLUMN prints the new column: table says the schema changed, json rows gain the key', { timeout: 120_000 }, async () => {
  const path = await createTable('tailed');
  await append(path, [{ id: 1n, name: 'a' }]);
  const table = cli(['tail', 'tailed', '--from', 'earliest', '--format', 'table']);
  const json = cli(['tail', 'tailed', '--from', 'earliest', '--format', 'json']);
  try {
    assert.equal(await table.next(), 'op | bucket | offset | timestamp | id | name');
    assert.match(await table.next(), /^\+A \| 0 \| 0 \| \S+ \| 1 \| a$/);
    assert.deepEqual(JSON.parse(await json.next()).row, { id: 1, name: 'a' });

    await cluster.conn.getAdmin().alterTable(path, { addColumns: [{ name: 'tag', type: 'STRING' }] });
    await append(path, [{ id: 2n, name: 'b', tag: 't2' }]);

    assert.equal(await table.next(), '-- schema changed (schema id 1): added tag');
    assert.equal(await table.next(), 'op | bucket | offset | timestamp | id | name | tag');
    assert.match(await table.next(), /^\+A \| 0 \| 1 \| \S+ \| 2 \| b \| t2$/);
    assert.deepEqual(JSON.parse(await json.next()).row, { id: 2, name: 'b', tag: 't2' });
  } finally {
    assert.equal(await table.stop(), 0, table.stderr());
    assert.equal(await json.stop(), 0, json.stderr());
  }
  assert.match(json.stderr(), /schema changed \(schema id 1\): added tag/);
});

test('tributary sql --stream over * started before ADD COLUMN prints the new column', { timeout: 120_000 }, async () => {
  const path = await createTable('streamed');
  await append(path, [{ id: 1n, name: 'a' }]);
  const stream = cli(['sql', '--format', 'json', '--stream', '-e', 'SELECT * FROM streamed']);
  const named = cli(['sql', '--format', 'json', '--stream', '-e', 'SELECT id FROM streamed']);
  try {
    assert.deepEqual(JSON.parse(await stream.next()), { id: 1, name: 'a' });
    assert.deepEqual(JSON.parse(await named.next()), { id: 1 });

    await cluster.conn.getAdmin().alterTable(path, { addColumns: [{ name: 'tag', type: 'STRING' }] });
    await append(path, [{ id: 2n, name: 'b', tag: 't2' }]);

    assert.deepEqual(JSON.parse(await stream.next()), { id: 2, name: 'b', tag: 't2' });
    assert.deepEqual(JSON.parse(await named.next()), { id: 2 });
  } finally {
    assert.equal(await stream.stop(), 0, stream.stderr());
    assert.equal(await named.stop(), 0, named.stderr());
  }
});
