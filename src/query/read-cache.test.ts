import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as arrow from 'apache-arrow';
import { DuckSession } from './duckdb/session.js';
import { ReadCache } from './read-cache.js';

test('the read cache keeps 16 tails, dropping the least recently used one with its tables', async () => {
  const duck = await DuckSession.create();
  try {
    const cache = new ReadCache(duck);
    const schema = new arrow.Schema([new arrow.Field('x', new arrow.Int32(), false)]);
    const tables: string[] = [];
    for (let i = 0; i < 17; i++) {
      const table = cache.tailTableName('tails', `db.t${i}`);
      tables.push(table);
      await duck.loadArrowTable(table, schema, []);
      await cache.keepTail(`key${i}`, { tables: [table], tableId: 1, schemaId: 1, snapshotId: 1n, ranges: [], ends: new Map() });
      if (i === 15) assert.ok(cache.tail('key0'), 'key0 used again: key1 is now the oldest');
    }
    const names = (await duck.run("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'tails' ORDER BY table_name")).rows.map((r) => `tails.${r[0]}`);
    assert.deepEqual(names, tables.filter((_, i) => i !== 1).sort());
    assert.equal(cache.tail('key1'), undefined);
    await cache.forgetTail('key0');
    assert.equal(cache.tail('key0'), undefined);
    assert.equal((await duck.run(`SELECT count(*) FROM duckdb_tables() WHERE table_name = '${tables[0].slice('tails.'.length)}'`)).rows[0][0], 0n);
  } finally {
    duck.close();
  }
});
