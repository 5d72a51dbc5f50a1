import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { FileCache } from './file-cache.js';
import { LocalObjectStore } from './local-store.js';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'file-cache-'));
after(() => fs.rmSync(root, { recursive: true, force: true }));

test('the cache keeps files up to its size, least recently used out first, never a pinned one', async () => {
  const store = new LocalObjectStore();
  const source = (name: string): string => {
    const file = path.join(root, 'remote', name);
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, Buffer.alloc(100, name));
    return file;
  };
  const [a, b, c] = ['a', 'b', 'c'].map(source);
  fs.mkdirSync(path.join(root, 'cache', 'other'), { recursive: true });
  fs.writeFileSync(path.join(root, 'cache', 'left-over'), 'from an earlier process');
  const cache = new FileCache(path.join(root, 'cache'), 250);

  const held = await cache.pin(store, [a]);
  assert.equal(fs.readFileSync(held.path(a)!, 'utf8'), 'a'.repeat(100));
  assert.ok(!fs.existsSync(path.join(root, 'cache', 'left-over')) && fs.existsSync(path.join(root, 'cache', 'other')));
  (await cache.pin(store, [b])).release();
  (await cache.pin(store, [c])).release();
  // 300 bytes > 250: b, the least recently used unpinned file, goes; a is pinned.
  assert.equal(cache.size, 200);
  assert.ok(fs.existsSync(cache.pathOf(a)) && !fs.existsSync(cache.pathOf(b)) && fs.existsSync(cache.pathOf(c)));
  held.release();
  (await cache.pin(store, [b])).release();
  // a, unpinned now and least recently used, goes.
  assert.ok(!fs.existsSync(cache.pathOf(a)) && fs.existsSync(cache.pathOf(b)) && fs.existsSync(cache.pathOf(c)));
  await assert.rejects(cache.pin(store, [path.join(root, 'remote', 'missing')]), /no such object/);
});
