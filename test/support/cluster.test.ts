/**
 * The end-to-end fixture itself: a start that fails after its servers are up ends them and removes
 * their data dirs, and a member restarted after a kill -9 comes back on its data dir and port.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { TributaryError } from '../../src/common/errors.js';
import { startCluster, TestCluster } from './cluster.js';
import { tempDir } from './server-process.js';

/** The command lines of this process's children (from /proc, so also a zombie's, if any). */
function children(): string[] {
  const ppid = (stat: string): number => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  return fs.readdirSync('/proc').filter((pid) => /^\d+$/.test(pid)).flatMap((pid) => {
    try {
      return ppid(fs.readFileSync(`/proc/${pid}/stat`, 'utf8')) === process.pid ? [fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ')] : [];
    } catch {
      return []; // gone meanwhile
    }
  });
}

test('a start that fails half-way ends the servers it started and removes their data dirs', { skip: !fs.existsSync('/proc/self/stat') && 'needs /proc' }, async () => {
  const root = tempDir('cluster-fixture');
  try {
    // The servers start; the connection after them is refused its settings.
    const cluster = new TestCluster({ servers: 2, args: ['--no-tiering'], dataRoot: root, client: { 'client.request-timeout': 'soon' } });
    await assert.rejects(cluster.start(), (e: unknown) => e instanceof TributaryError && e.errorName === 'INVALID_CONFIG_EXCEPTION');
    assert.deepEqual(children().filter((c) => c.includes(' start ')), [], 'no server left');
    assert.deepEqual(fs.readdirSync(root), [], 'no data dir left');
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

test('a killed member restarts on its data dir and port, and the connection reaches it', async (t) => {
  const cluster = await startCluster(t, { args: ['--no-tiering'] });
  const path = { database: 'tributary', table: 'kept' };
  await cluster.conn.getAdmin().createTable(path, { columns: [{ name: 'a', type: 'INT' }] });
  const { dataDir, port } = cluster.server;
  await cluster.server.kill();
  await assert.rejects(cluster.conn.getAdmin().tableExists(path));
  const again = await cluster.restart();
  assert.deepEqual([again.dataDir, again.port], [dataDir, port]);
  assert.equal(await cluster.conn.getAdmin().tableExists(path), true);
});
