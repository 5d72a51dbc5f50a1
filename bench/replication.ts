/**
 * A cluster on ZooKeeper on this machine: replicated append throughput, and failover time.
 *
 * One ZooKeeper, one coordinator and three tablet servers (the tests' cluster fixture: real
 * processes, all sharing this machine's cores), every write acks = all.
 *
 *   append    the workload (support.ts) written through the columnar API in 10 000-row chunks into
 *             a table of 3 buckets with replication factor 3, and into one with factor 1, in
 *             alternating runs (`--runs`, `--records` each). Baseline: the RF=1 table of the same
 *             run. Target: RF=3 ≥ 0.4 × RF=1.
 *   failover  a writer appends one small batch after the other (acks = all) to a table of one
 *             bucket with factor 3 while the bucket's leader is taken down `--kills` times: by
 *             kill -9, and by SIGTERM (a controlled shutdown), brought back after each. Failover
 *             time: from the signal to the acknowledgement of the first write issued after it. Baseline: the
 *             ZooKeeper session timeout (`--session-timeout`), after which ZooKeeper tells the
 *             coordinator that a killed server is gone. Targets: kill -9 ≤ session timeout + 1 s
 *             (p99); SIGTERM ≤ 500 ms (p99).
 *
 *   npm run bench:replication [-- --records 200000 --runs 3 --kills 10 --session-timeout 4s --server key=value]
 */
import { parseArgs } from 'node:util';
import type { Connection, TablePath } from '../src/client/index.js';
import { TestCluster } from '../test/support/cluster.js';
import { clientOptionArgs, columnChunks, count, DATABASE, generateWorkload, median, now, percentile, printHeader, printTable, spread, verdict, WORKLOAD_COLUMNS, workloadColumns } from './support.js';

const { values: args } = parseArgs({
  options: {
    records: { type: 'string', default: '200000' },
    runs: { type: 'string', default: '3' },
    kills: { type: 'string', default: '10' },
    'session-timeout': { type: 'string', default: '4s' },
    server: { type: 'string', multiple: true },
  },
});
const records = Number(args.records);
const runs = Number(args.runs);
const kills = Number(args.kills);
const sessionTimeoutMs = Number.parseFloat(args['session-timeout']!) * (args['session-timeout']!.endsWith('ms') ? 1 : 1000);

const cluster = await TestCluster.start({
  zooKeeper: { tabletServers: 3 },
  settings: { 'zookeeper.client.session-timeout': args['session-timeout']!, ...clientOptionArgs(args.server) },
  client: { 'client.writer.acks': 'all', 'client.request-timeout': '60s' },
});

try {
  printHeader('replication: a cluster of 3 tablet servers on ZooKeeper, acks = all', [
    `records per append run: ${count(records)} in 10 000-row chunks, ${runs} runs per factor; failovers: ${kills} per kind; ZooKeeper session timeout ${sessionTimeoutMs} ms`,
  ]);
  const append = await appendRuns(cluster.conn);
  const rf1 = append.get(1)!;
  const rf3 = append.get(3)!;
  const ratio = median(rf3) / median(rf1);
  console.log('\nappend (rows/s; median (min–max) of the runs)');
  printTable(
    ['replication factor', 'rows/s', 'each run', 'ratio to RF=1', 'target'],
    [
      ['1 (baseline)', spread(rf1), rf1.map(count).join(', '), '1.00', ''],
      ['3', spread(rf3), rf3.map(count).join(', '), ratio.toFixed(2), verdict(ratio, 0.4)],
    ],
  );

  const killed = await failovers(cluster, 'kill -9');
  const drained = await failovers(cluster, 'SIGTERM');
  console.log('\nfailover (ms from the signal to the first acknowledged write after it)');
  const row = (kind: string, ms: number[], target: number) => {
    const sorted = [...ms].sort((a, b) => a - b);
    return [kind, String(ms.length), percentile(sorted, 50).toFixed(0), percentile(sorted, 99).toFixed(0), sorted[sorted.length - 1].toFixed(0), ms.map((v) => v.toFixed(0)).join(' '), verdict(percentile(sorted, 99), target, false, ' ms')];
  };
  printTable(['kind', 'n', 'p50', 'p99', 'max', 'every failover', 'target (p99)'], [row('kill -9', killed, sessionTimeoutMs + 1000), row('SIGTERM', drained, 500)]);
} finally {
  await cluster.stop();
}

/** Rows/s of each run, by replication factor, the factors alternating. */
async function appendRuns(conn: Connection): Promise<Map<number, number[]>> {
  const w = generateWorkload(records);
  const chunks = columnChunks(workloadColumns(w), records, 10_000);
  const out = new Map<number, number[]>([[1, []], [3, []]]);
  for (let run = 0; run < runs; run++) {
    for (const factor of [1, 3]) {
      const path = { database: DATABASE, table: `append_rf${factor}_${run}` };
      await conn.getAdmin().createTable(path, { columns: WORKLOAD_COLUMNS, properties: { 'bucket.num': '3', 'table.replication.factor': String(factor) } });
      const writer = await (await conn.getTable(path)).newAppend().createWriter();
      const start = now();
      for (const chunk of chunks) await writer.appendColumns(chunk);
      await writer.flush();
      out.get(factor)!.push(records / ((now() - start) / 1000));
      await writer.close();
    }
  }
  return out;
}

/** Milliseconds from each signal to the leader to the next acknowledged write. */
async function failovers(c: TestCluster, kind: 'kill -9' | 'SIGTERM'): Promise<number[]> {
  const path: TablePath = { database: DATABASE, table: `failover_${kind === 'SIGTERM' ? 'term' : 'kill'}` };
  const conn = c.conn;
  // A server restarted by the previous phase may still be waiting for its old registration to time out.
  while ((await conn.getAdmin().listTabletServers()).filter((s) => s.alive).length < 3) await new Promise((r) => setTimeout(r, 100));
  await conn.getAdmin().createTable(path, { columns: WORKLOAD_COLUMNS, properties: { 'bucket.num': '1', 'table.replication.factor': '3' } });
  const w = generateWorkload(100);
  const [chunk] = columnChunks(workloadColumns(w), 100, 100);
  const writer = await (await conn.getTable(path)).newAppend().createWriter();
  /** Issue and acknowledgement times of each write. */
  const writes: { issued: number; acked: number }[] = [];
  let writing = true;
  const loop = (async () => {
    while (writing) {
      const issued = now();
      await writer.appendColumns(chunk);
      await writer.flush();
      writes.push({ issued, acked: now() });
    }
  })();
  const out: number[] = [];
  try {
    for (let k = 0; k < kills; k++) {
      await fullIsr(conn, path);
      await new Promise((r) => setTimeout(r, 500));
      const leader = (await conn.getAdmin().listBuckets(path))[0].leader;
      const victim = c.tabletServer(leader);
      const at = now();
      if (kind === 'kill -9') await victim.kill();
      else void victim.stop();
      // The first write issued after the signal: the one in flight then may have been answered by the old leader.
      const after = () => writes.find((x) => x.issued > at);
      while (!after()) await new Promise((r) => setTimeout(r, 5));
      out.push(after()!.acked - at);
      while (victim.running) await new Promise((r) => setTimeout(r, 20));
      await c.restart(victim);
    }
  } finally {
    writing = false;
    await loop;
    await writer.close();
  }
  return out;
}

async function fullIsr(conn: Connection, path: TablePath): Promise<void> {
  for (;;) {
    const [b] = await conn.getAdmin().listBuckets(path);
    if (b.leader >= 0 && b.isr.length === 3) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}
