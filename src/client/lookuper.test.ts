/**
 * The lookuper against a real server: many keys at once (more than one request, every bucket,
 * partitions, keys that hold no row, the same key twice) and lookups kept in flight, each answer
 * issuing the next, all answered with exactly their own rows.
 */
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { useCluster } from '../../test/support/cluster.js';
import type { Row } from './index.js';

const cluster = useCluster({ client: { 'client.writer.batch-timeout': '2ms' } });

const ROWS = 3000;
/** Ids 1..ROWS hold rows, except every 7th, deleted after it was written; the rows of a partition differ. */
const rowOf = (id: number, dt: string): Row | null => (id >= 1 && id <= ROWS && id % 7 !== 0 ? { id: BigInt(id), dt, name: `${dt}-${'n'.repeat(id % 40)}-${id}`, score: id % 5 === 0 ? null : id * 3 } : null);

describe('Lookuper', () => {
  const path = { database: 'tributary', table: 'lookups' };
  const partitions = ['20240101', '20240102'];

  before(async () => {
    await cluster.conn.getAdmin().createTable(path, {
      columns: [
        { name: 'id', type: 'BIGINT', nullable: false },
        { name: 'dt', type: 'STRING', nullable: false },
        { name: 'name', type: 'STRING' },
        { name: 'score', type: 'INT' },
      ],
      primaryKey: ['id', 'dt'],
      partitionKeys: ['dt'],
      properties: { 'bucket.num': '3' },
    });
    const writer = await (await cluster.conn.getTable(path)).newUpsert().createWriter();
    for (const dt of partitions) {
      for (let id = 1; id <= ROWS; id++) await writer.upsert({ id: BigInt(id), dt, name: 'first', score: 0 });
      for (let id = 1; id <= ROWS; id++) {
        if (id % 7 === 0) await writer.delete({ id: BigInt(id), dt });
        else await writer.upsert(rowOf(id, dt)!);
      }
    }
    await writer.flush();
    await writer.close();
  });

  /** Keys over every bucket and both partitions, some holding no row (0, past the end, deleted, no such partition), some twice. */
  function keys(n: number): { id: number; dt: string }[] {
    return Array.from({ length: n }, (_, i) => ({ id: (i * 7919) % (ROWS + 40), dt: i % 11 === 0 ? '20991231' : partitions[i % 2] }));
  }

  it('answers many keys issued at once, across requests, buckets and partitions, each with its own row', async () => {
    const lookuper = (await cluster.conn.getTable(path)).newLookup().createLookuper();
    const asked = keys(2500);
    const found = await Promise.all(asked.map((k) => lookuper.lookup({ id: BigInt(k.id), dt: k.dt })));
    assert.deepEqual(found, asked.map((k) => (partitions.includes(k.dt) ? rowOf(k.id, k.dt) : null)));
    assert.ok(found.filter((r) => r === null).length > 300);
  });

  it('answers lookups kept in flight, each answer issuing the next, each with its own row', async () => {
    const lookuper = (await cluster.conn.getTable(path)).newLookup().createLookuper();
    const asked = keys(4000);
    const found = new Array<Row | null | undefined>(asked.length);
    await new Promise<void>((resolve, reject) => {
      let next = 0;
      let answered = 0;
      const issue = (): void => {
        const i = next++;
        lookuper.lookup({ id: BigInt(asked[i].id), dt: asked[i].dt }).then((row) => {
          found[i] = row;
          if (++answered === asked.length) resolve();
          else if (next < asked.length) issue();
        }, reject);
      };
      for (let w = 0; w < 100; w++) issue();
    });
    assert.deepEqual(found, asked.map((k) => (partitions.includes(k.dt) ? rowOf(k.id, k.dt) : null)));
  });
});
