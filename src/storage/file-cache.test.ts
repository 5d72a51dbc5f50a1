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

test('a part of a file is built once and kept by its name, and serves the parts it covers; a whole copy the cache holds serves any part', async () => {
  const store = new LocalObjectStore();
  const file = path.join(root, 'remote', 'parted');
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, 'the whole file');
  const cache = new FileCache(path.join(root, 'parts'), 1000);
  let built = 0;
  const plan = async () => async (to: string): Promise<number> => {
    built++;
    fs.writeFileSync(to, 'a part');
    return 6;
  };
  const none = (): boolean => false;
  const part = await cache.pinPart(store, file, 'p1', none, plan);
  assert.equal(fs.readFileSync(part.path(file)!, 'utf8'), 'a part');
  part.release();
  (await cache.pinPart(store, file, 'p1', none, plan)).release();
  assert.equal(built, 1, 'kept by its name');
  // p1 covers p1a: its copy serves; p1b, covered by nothing held, is built.
  const covered = await cache.pinPart(store, file, 'p1a', (held) => held === 'p1', plan);
  assert.equal(cache.pathOf(`${file}#p1`), covered.path(file));
  covered.release();
  (await cache.pinPart(store, file, 'p1b', (held) => held === 'p9', plan)).release();
  assert.equal(built, 2);
  // A plan that makes no part gets the whole file, which then serves every part.
  const whole = await cache.pinPart(store, file, 'p2', none, async () => undefined);
  assert.equal(fs.readFileSync(whole.path(file)!, 'utf8'), 'the whole file');
  whole.release();
  const other = await cache.pinPart(store, file, 'p3', none, plan);
  assert.equal(fs.readFileSync(other.path(file)!, 'utf8'), 'the whole file');
  other.release();
  assert.equal(built, 2);
});
