/**
 * The append writer against a real server: batches that reuse the builder and the payload memory of
 * earlier ones (small batches, several in flight) arrive whole, in order and unmixed.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { describe, it } from 'node:test';
import { useCluster } from '../../test/support/cluster.js';
import { logBatchesOf } from '../record/log-batch.js';
import type { Row } from './index.js';

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
});
