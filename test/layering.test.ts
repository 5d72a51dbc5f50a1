// The folder map of docs/architecture.md holds for every TypeScript file of the repository, and the
// check (test/support/layering.ts) fails on a tree that breaks it.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { test } from 'node:test';
import { type FolderRow, importsOf, layeringProblems, parseFolderMap, readSources, type SourceFile } from './support/layering.js';

const root = new URL('..', import.meta.url).pathname;

test('every import of src, test, bench and scripts follows the folder map, and no import circle exists', () => {
  const rows = parseFolderMap(fs.readFileSync(`${root}docs/architecture.md`, 'utf8'));
  const tops = [...new Set(['src', ...rows.map((r) => r.folder.split('/')[0])])];
  const files = readSources(root, tops);
  assert.ok(files.length > 200, `only ${files.length} files found`);
  const problems = layeringProblems(rows, files);
  assert.equal(problems.length, 0, `the tree breaks the folder map of docs/architecture.md:\n${problems.join('\n')}`);
});

/** A small map in the document's own form, so these tests also go through the parser. */
function map(rows: [folder: string, mayImport: string, testsMayImport?: string][]): FolderRow[] {
  return parseFolderMap(
    [
      '## Folder map',
      '',
      '| folder | owns | may import | its tests may also import |',
      '|---|---|---|---|',
      ...rows.map(([folder, mayImport, tests = '']) => `| \`${folder}\` | things | ${mayImport} | ${tests} |`),
      '',
    ].join('\n'),
  );
}

const layers = map([
  ['src/common/', 'nothing of ours'],
  ['src/server/', '`common`', '`test`'],
  ['test/', 'everything above'],
]);
const file = (p: string, text = ''): SourceFile => ({ path: p, text });
const support = [file('src/common/c.ts'), file('src/server/y.ts'), file('test/support/z.ts')];

test('an import of a folder the row does not name fails, with file, line, imported file and rule', () => {
  const problems = layeringProblems(layers, [...support, file('src/common/x.ts', "// the wrong way\nimport { y } from '../server/y.js';\n")]);
  assert.deepEqual(problems, ['src/common/x.ts:2 imports src/server/y.ts (row src/server/), but src/common/ may import nothing of ours']);
});

test('import type, export … from, multi-line, side-effect and dynamic imports all count', () => {
  const text = [
    "import type { A } from '../server/y.js';", // 1
    'import {', // 2
    '  b,',
    '  type C,',
    "} from '../server/y.js';",
    "export { d } from '../server/y.js';", // 6
    "export * from '../server/y.js';", // 7
    "import '../server/y.js';", // 8
    "const e = await import('../server/y.js');", // 9
    "const f = 'import g from \"../server/y.js\"';", // 10: in a string, not an import
    "export const h = { from: '../server/y.js' };", // 11: not an import either
  ].join('\n');
  assert.deepEqual(
    importsOf(file('src/common/x.ts', text)).map((i) => `${i.line} ${i.target}`),
    [1, 2, 6, 7, 8, 9].map((line) => `${line} src/server/y.ts`),
  );
  assert.equal(layeringProblems(layers, [...support, file('src/common/x.ts', text)]).length, 6);
});

test('tests may import what their row lets its tests import, and nothing else of it', () => {
  const uses = "import { z } from '../../test/support/z.js';\n";
  const fixture = file('src/server/fixtures/f.ts', "import { z } from '../../../test/support/z.js';\n");
  assert.deepEqual(layeringProblems(layers, [...support, file('src/server/y.test.ts', uses), fixture]), []);
  assert.deepEqual(layeringProblems(layers, [...support, file('src/server/w.ts', uses)]), [
    'src/server/w.ts:1 imports test/support/z.ts (row test/), but src/server/ may import only `common`',
  ]);
});

test('a file in a folder without a row, a row without a folder and a row naming an unknown row fail', () => {
  const rows = map([
    ['src/common/', 'nothing of ours'],
    ['src/gone/', '`common`, `nowhere`'],
  ]);
  assert.deepEqual(layeringProblems(rows, [file('src/common/a.ts'), file('src/http/b.ts')]), [
    'folder map row src/gone/ names `nowhere`, which is no row of the map',
    'folder map row src/gone/ names a folder that does not exist (it holds no .ts file)',
    'src/http/b.ts: no row of the folder map covers src/http/',
  ]);
});

test('a cycle in the map fails, and so does a row allowed to import one below it', () => {
  const rows = map([
    ['src/common/', '`record`'],
    ['src/record/', '`common`'],
  ]);
  assert.deepEqual(layeringProblems(rows, [file('src/common/a.ts'), file('src/record/b.ts')]), [
    'folder map row src/common/ may import `record`, a row below it: dependencies point up the table',
    'the folder map\'s "may import" graph has a cycle: common -> record -> common',
  ]);
});

test('an import circle fails, inside one folder too, naming each import of it', () => {
  const problems = layeringProblems(layers, [
    ...support,
    file('src/server/a.ts', "import { b } from './b.js';\n"),
    file('src/server/b.ts', "\nimport type { C } from './c.js';\n"),
    file('src/server/c.ts', "import { a } from './a.js';\n"),
    file('test/t.ts', "import { a } from '../src/server/a.js';\n"),
  ]);
  assert.deepEqual(problems, ['import circle: src/server/a.ts:1 -> src/server/b.ts:2 -> src/server/c.ts:1 -> src/server/a.ts']);
});

test('a file belongs to the deepest row containing it', () => {
  const rows = map([
    ['src/lake/', 'nothing of ours'],
    ['src/lake/iceberg/', '`lake`'],
  ]);
  assert.deepEqual(
    layeringProblems(rows, [file('src/lake/format.ts', "import { t } from './iceberg/t.js';\n"), file('src/lake/iceberg/t.ts', "import type { F } from '../format.js';\n")]),
    ['src/lake/format.ts:1 imports src/lake/iceberg/t.ts (row src/lake/iceberg/), but src/lake/ may import nothing of ours', 'import circle: src/lake/format.ts:1 -> src/lake/iceberg/t.ts:1 -> src/lake/format.ts'],
  );
});

// A benchmark's producer child answers on its stdout; a module that loads node:test makes every
// process that loads it print a test report there at exit.
test('nothing a benchmark loads loads the test runner', () => {
  const files = new Map(readSources(root, ['src', 'test', 'bench']).map((f) => [f.path, f]));
  const via = new Map<string, string>();
  const queue = [...files.keys()].filter((p) => p.startsWith('bench/') && !p.endsWith('.test.ts'));
  for (const p of queue) via.set(p, '');
  const loadsRunner: string[] = [];
  for (const p of queue) {
    const source = files.get(p)!;
    if (/^import\b(?!\s+type\b)[^;]*['"]node:test['"]/m.test(source.text)) loadsRunner.push(p);
    for (const { target } of importsOf(source)) {
      if (via.has(target) || !files.has(target)) continue;
      via.set(target, p);
      queue.push(target);
    }
  }
  const chain = (p: string): string => (via.get(p) ? `${chain(via.get(p)!)} → ${p}` : p);
  assert.deepEqual(loadsRunner.map(chain), []);
});
