import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { test } from 'node:test';

test("a process's own lake cache directory is removed when the process exits", () => {
  // A real process fills its cache directory and exits on its own.
  const script = [
    `import fs from 'node:fs';`,
    `import { processCacheDir } from ${JSON.stringify(new URL('./stores.ts', import.meta.url).href)};`,
    `const dir = processCacheDir();`,
    `fs.mkdirSync(dir + '/lake/db', { recursive: true });`,
    `fs.writeFileSync(dir + '/lake/db/file.parquet', 'x');`,
    `console.log(dir);`,
  ].join('\n');
  const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(child.status, 0, child.stderr);
  const dir = child.stdout.trim();
  assert.match(dir, /tributary-lake-cache-\d+$/);
  assert.equal(fs.existsSync(dir), false, `${dir} is left behind`);
});
