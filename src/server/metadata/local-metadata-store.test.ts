import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after } from 'node:test';
import { metadataStoreContract } from './fixtures/metadata-store-contract.js';
import { LocalMetadataStore } from './local-metadata-store.js';

const dirs: string[] = [];
after(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

metadataStoreContract(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'metadata-store-'));
  dirs.push(dir);
  return { open: () => LocalMetadataStore.open(dir) };
});
