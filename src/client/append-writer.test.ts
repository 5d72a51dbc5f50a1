/**
 * The append writer against a real server: batches that reuse the builder and the payload memory of
 * earlier ones (small batches, several in flight) arrive whole, in order and unmixed; batches that
 * queue behind a bucket's request in flight leave together in its next one.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { useCluster } from '../../test/support/cluster.js';
import { logBatchesOf } from '../record/log-batch.js';
import { Connection, type Row } from './index.js';

const cluster = useCluster({ client: { 'client.writer.batch-size': '16kb', 'client.writer.batch-timeout': '5ms' } });

/** Log batches stored for bucket 0 of a table (the tablet server's directory layout). */
function storedBatches(table: string, tableId: number): number {
  const dir = path.join(cluster.server.dataDir, 'log', 'tributary', `${table}-${tableId}`, 'log-0');
  let batches = 0;
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.log'))) batches += [...logBatchesOf(fs.readFileSync(path.join(dir, file)))].length;
  return batches;
}

/** Chunk `k` of `n` rows from id `first` on: ASCII or other strings, nulls in some chunks. */
function chunk(k: number, first: number, n: number): { columns: Record<string, ArrayLike<unknown>>; rows: Row[] } {
  const id = new BigInt64Array(n);
  const x = new Float64Array(n);
  const name: (string | null)[] = [];
  const ok: (boolean | null)[] = [];
  const rows: Row[] = [];
  for (let i = 0; i < n; i++) {
    id[i] = BigInt(first + i);
    x[i] = (first + i) / 4;
    name.push(k % 4 === 3 && i % 7 === 0 ? null : k % 4 === 1 ? `ü-${k}-${i}` : `n-${k}-${i}`.repeat(1 + (i % 3)));
    ok.push(k % 2 === 1 && i % 5 === 0 ? null : i % 2 === 0);
    rows.push({ id: id[i], name: name[i], ok: ok[i], x: x[i] });
  }
  return { columns: { id, name, ok, x }, rows };
}

describe('AppendWriter', () => {
  for (const compression of ['NONE', 'ZSTD']) {
    it(`${compression}: batches that reuse earlier batches' memory arrive whole and in order`, async () => {
      const tablePath = { database: 'tributary', table: `reuse_${compression.toLowerCase()}` };
      await cluster.conn.getAdmin().createTable(tablePath, {
        columns: [
          { name: 'id', type: 'BIGINT', nullable: false },
          { name: 'name', type: 'STRING' },
          { name: 'ok', type: 'BOOLEAN' },
          { name: 'x', type: 'DOUBLE' },
        ],
        properties: { 'table.log.arrow.compression.type': compression },
      });
      const table = await cluster.conn.getTable(tablePath);
      const writer = await table.newAppend().createWriter();
      const expected: Row[] = [];
      for (let k = 0; k < 40; k++) {
        const { columns, rows } = chunk(k, expected.length, 200 + ((k * 37) % 300));
        await writer.appendColumns(columns);
        expected.push(...rows);
      }
      await writer.close();

      const scanner = table.newScan().createLogScanner();
      await scanner.subscribe(0, 'earliest');
      const got: Row[] = [];
      for (let i = 0; i < 200 && got.length < expected.length; i++) {
        for (const r of await scanner.poll(200)) got.push(r.row);
      }
      scanner.close();
      assert.deepEqual(got, expected);
      assert.ok(storedBatches(tablePath.table, table.info.tableId) >= 10, 'enough batches for memory to circulate');
    });
  }

  it('with one request in flight per bucket, the batches that queued behind it leave in one request', async () => {
    const tablePath = { database: 'tributary', table: 'one_in_flight' };
    await cluster.conn.getAdmin().createTable(tablePath, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'name', type: 'STRING' }] });
    // Batches of a few rows, closed by size faster than a request's round trip (which includes its fsync).
    const conn = await Connection.create({ 'bootstrap.servers': cluster.bootstrap, 'client.writer.batch-size': '256b', 'client.writer.max-inflight-requests-per-bucket': '1' });
    try {
      const table = await conn.getTable(tablePath);
      const requestsBefore = await produceRequests();
      const writer = await table.newAppend().createWriter();
      const rows = 5000;
      for (let i = 0; i < rows; i++) await writer.append({ id: BigInt(i), name: `row-${i}` });
      await writer.close();
      const requests = (await produceRequests()) - requestsBefore;
      const batches = storedBatches(tablePath.table, table.info.tableId);
      assert.ok(batches >= 100, `small batches: ${batches}`);
      // One batch per request would be `batches` requests.
      assert.ok(requests < batches / 2, `${requests} requests carried ${batches} batches`);

      const scanner = table.newScan().createLogScanner();
      await scanner.subscribe(0, 'earliest');
      const ids: bigint[] = [];
      for (let i = 0; i < 200 && ids.length < rows; i++) for (const r of await scanner.poll(200)) ids.push(r.row.id as bigint);
      scanner.close();
      assert.deepEqual(ids, Array.from({ length: rows }, (_, i) => BigInt(i)), 'every row once, in order');
    } finally {
      await conn.close();
    }
  });
});

/** ProduceLog requests the server has answered, from its metrics. */
async function produceRequests(): Promise<number> {
  const text = await (await fetch(`http://${cluster.server.http}/metrics`)).text();
  return Number(/^tributary_rpc_requests_total\{api="ProduceLog"\} (\S+)$/m.exec(text)?.[1] ?? 0);
}
