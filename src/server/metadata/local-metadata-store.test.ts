import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { LocalMetadataStore } from './local-metadata-store.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

function tempDir(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'metadata-store-'));
  dirs.push(dir);
  return dir;
}

test('concurrent counter allocations get distinct values, and every one survives a reopen', async () => {
  const dir = tempDir();
  const store = await LocalMetadataStore.open(dir);
  const ids = await Promise.all(Array.from({ length: 20 }, () => store.nextId('writer_id')));
  assert.deepEqual([...ids].sort((a, b) => a - b), Array.from({ length: 20 }, (_, i) => i));
  const reopened = await LocalMetadataStore.open(dir);
  assert.equal(await reopened.nextId('writer_id'), 20);
});

test('commits racing counter allocations lose neither', async () => {
  const dir = tempDir();
  const store = await LocalMetadataStore.open(dir);
  const work: Promise<unknown>[] = [];
  for (let i = 0; i < 10; i++) {
    work.push(store.nextId('epoch'));
    work.push(store.commit([{ op: 'put', path: `/t/${i}`, value: { i } }]));
  }
  await Promise.all(work);
  const reopened = await LocalMetadataStore.open(dir);
  assert.deepEqual(reopened.children('/t').length, 10);
  assert.equal(await reopened.nextId('epoch'), 10, 'no allocated value is handed out again after a restart');
});

test('a failed change does not block the ones after it', async () => {
  const dir = tempDir();
  const store = await LocalMetadataStore.open(dir);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  await assert.rejects(store.commit([{ op: 'put', path: '/bad', value: cyclic }]));
  await store.commit([{ op: 'put', path: '/good', value: 1 }]);
  assert.equal(store.get('/bad'), undefined);
  assert.equal((await LocalMetadataStore.open(dir)).get('/good'), 1);
});
