import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { PacedFileWriter } from './files.js';

test('a paced write keeps every byte in order across its sync points, whatever the chunk sizes', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tributary-paced-'));
  try {
    const file = path.join(dir, 'out');
    const chunks = [1, (1 << 20) - 1, 3 << 20, 7, (1 << 20) + 5, 0].map((n) => crypto.randomBytes(n));
    const fh = await fs.promises.open(file, 'w');
    try {
      const writer = new PacedFileWriter(fh);
      for (const c of chunks) await writer.write(c);
      await writer.write('tail');
    } finally {
      await fh.close();
    }
    assert.deepEqual(fs.readFileSync(file), Buffer.concat([...chunks, Buffer.from('tail')]));
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
