/**
 * The layering check. The folder map in docs/architecture.md is a table whose rows name a folder
 * and the folders its files may import ("may import"), and those its test files may import besides
 * ("its tests may also import"). This reads that table and every relative import of the tree, and
 * lists what breaks it:
 *
 * - a file importing a file of a row its own row does not name (a file belongs to the deepest row
 *   whose folder contains it; a test is a `*.test.ts` file or a file under a `fixtures/` folder);
 * - a file no row covers, a row whose folder holds no TypeScript file, a row naming a row the map
 *   does not have, a row allowed to import one below it, a cycle in the rows' "may import" graph;
 * - an import circle between files, anywhere.
 *
 * Imports are found with regular expressions, not the compiler: `import`/`export … from`
 * statements (also `import type`, also over several lines), side-effect imports and `import(…)`.
 * A row is named by its folder without `src/` and the trailing slash: `src/lake/iceberg/` is
 * `lake/iceberg`, `test/` is `test`. "everything" means every row above.
 */
import fs from 'node:fs';
import path from 'node:path';

export interface FolderRow {
  /** As the map writes it, with the trailing slash: `src/lake/iceberg/`. */
  folder: string;
  /** How the map's other rows name it: `lake/iceberg`. */
  name: string;
  /** Names of the rows its files may import ('everything': all rows above it). */
  mayImport: string[] | 'everything';
  /** Names of the rows its test files may import besides. */
  testsMayImport: string[];
}

/** A TypeScript file of the tree: its path from the repository root, with `/`, and its text. */
export interface SourceFile {
  path: string;
  text: string;
}

const backticked = (cell: string): string[] => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);
const cellsOf = (line: string): string[] => line.trim().replace(/^\||\|$/g, '').split('|').map((c) => c.trim());

/** The rows of the table under the `## Folder map` heading. */
export function parseFolderMap(markdown: string): FolderRow[] {
  const lines = markdown.split('\n');
  const heading = lines.findIndex((l) => /^##\s+Folder map\s*$/.test(l));
  if (heading < 0) throw new Error('the document has no "## Folder map" section');
  const start = lines.findIndex((l, i) => i > heading && l.startsWith('|'));
  if (start < 0) throw new Error('the Folder map section has no table');
  let end = start;
  while (end < lines.length && lines[end].startsWith('|')) end++;
  const [header, , ...body] = lines.slice(start, end).map(cellsOf);
  const column = (title: RegExp): number => {
    const i = header.findIndex((c) => title.test(c));
    if (i < 0) throw new Error(`the Folder map table has no column matching ${title}`);
    return i;
  };
  const folderAt = column(/^folder$/i);
  const mayImportAt = column(/^may import$/i);
  const testsAt = column(/tests may also import/i);
  return body.map((cells) => {
    const folder = backticked(cells[folderAt] ?? '')[0];
    if (!folder?.endsWith('/')) throw new Error(`Folder map row '${cells.join(' | ')}' does not start with a folder in backticks, ending in /`);
    const mayImport = cells[mayImportAt] ?? '';
    return {
      folder,
      name: folder.replace(/^src\//, '').replace(/\/$/, ''),
      mayImport: /\beverything\b/.test(mayImport.replace(/`[^`]*`/g, '')) ? 'everything' : backticked(mayImport),
      testsMayImport: backticked(cells[testsAt] ?? ''),
    };
  });
}

export interface Import {
  /** The imported file, from the repository root (`.js` specifiers read as the `.ts` file). */
  target: string;
  /** 1-based line of the statement's first line. */
  line: number;
}

const IMPORT_PATTERNS = [
  // import … from '…', export … from '…': only names, braces, commas and `*`/`type`/`as` between.
  /^[ \t]*(?:import|export)\b[\w$\s{},*]*?\bfrom\s*(['"])(\.\.?\/[^'"]*)\1/gm,
  /^[ \t]*import\s*(['"])(\.\.?\/[^'"]*)\1/gm,
  /\bimport\(\s*(['"])(\.\.?\/[^'"]*)\1\s*\)/g,
];

/** The relative imports of a file. */
export function importsOf(file: SourceFile): Import[] {
  const lineStarts = [0];
  for (let i = file.text.indexOf('\n'); i >= 0; i = file.text.indexOf('\n', i + 1)) lineStarts.push(i + 1);
  const lineAt = (index: number): number => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (lineStarts[mid] <= index) lo = mid;
      else hi = mid - 1;
    }
    return lo + 1;
  };
  const found: Import[] = [];
  for (const pattern of IMPORT_PATTERNS) {
    for (const m of file.text.matchAll(pattern)) {
      if (insideString(file.text, m.index)) continue;
      const target = path.posix.join(path.posix.dirname(file.path), m[2]).replace(/\.js$/, '.ts');
      found.push({ target, line: lineAt(m.index + m[0].length - m[0].trimStart().length) });
    }
  }
  return found.sort((a, b) => a.line - b.line);
}

/** Whether an unclosed quote comes before `index` on its line: an `import(…)` there is text, not code. */
function insideString(text: string, index: number): boolean {
  const before = text.slice(text.lastIndexOf('\n', index) + 1, index);
  return ["'", '"', '`'].some((quote) => before.split(quote).length % 2 === 0);
}

const isTest = (file: string): boolean => file.endsWith('.test.ts') || /(^|\/)fixtures\//.test(file);

/** Everything that breaks the map in these files, one line each, as a reader would want to be told. */
export function layeringProblems(rows: FolderRow[], files: SourceFile[]): string[] {
  const problems: string[] = [];
  const byName = new Map<string, FolderRow>();
  for (const row of rows) {
    if (byName.has(row.name)) problems.push(`the folder map has two rows for ${row.folder}`);
    byName.set(row.name, row);
  }
  const position = new Map(rows.map((r, i) => [r.name, i]));
  const allowed = new Map<FolderRow, string[]>(rows.map((r, i) => [r, r.mayImport === 'everything' ? rows.slice(0, i).map((a) => a.name) : r.mayImport]));

  // The map itself.
  for (const [row, names] of allowed) {
    for (const name of [...names, ...row.testsMayImport]) {
      if (!byName.has(name)) problems.push(`folder map row ${row.folder} names \`${name}\`, which is no row of the map`);
    }
    for (const name of names) {
      if (position.get(name)! > position.get(row.name)!) problems.push(`folder map row ${row.folder} may import \`${name}\`, a row below it: dependencies point up the table`);
    }
    if (!files.some((f) => f.path.startsWith(row.folder))) problems.push(`folder map row ${row.folder} names a folder that does not exist (it holds no .ts file)`);
  }
  const graph = new Map([...allowed].map(([row, names]) => [row.name, names.filter((n) => byName.has(n))]));
  for (const cycle of circles(graph)) problems.push(`the folder map's "may import" graph has a cycle: ${[...cycle, cycle[0]].join(' -> ')}`);

  // The files against it.
  const rowOf = (file: string): FolderRow | undefined =>
    rows.filter((r) => file.startsWith(r.folder)).reduce<FolderRow | undefined>((deepest, r) => (!deepest || r.folder.length > deepest.folder.length ? r : deepest), undefined);
  const known = new Set(files.map((f) => f.path));
  const imports = new Map<string, Map<string, number>>();
  for (const file of files) {
    const row = rowOf(file.path);
    if (!row) {
      problems.push(`${file.path}: no row of the folder map covers ${path.posix.dirname(file.path)}/`);
      continue;
    }
    const names = isTest(file.path) ? [...allowed.get(row)!, ...row.testsMayImport] : allowed.get(row)!;
    const edges = new Map<string, number>();
    imports.set(file.path, edges);
    for (const { target, line } of importsOf(file)) {
      if (known.has(target) && !edges.has(target)) edges.set(target, line);
      const to = rowOf(target);
      if (to === row || (to && names.includes(to.name))) continue;
      const rule = to ? `${row.folder} may import ${describe(row, allowed.get(row)!)}${isTest(file.path) && row.testsMayImport.length > 0 ? ` (its tests also ${list(row.testsMayImport)})` : ''}` : 'no row of the folder map covers it';
      problems.push(`${file.path}:${line} imports ${target}${to ? ` (row ${to.folder})` : ''}, but ${rule}`);
    }
  }
  for (const circle of circles(new Map([...imports].map(([f, edges]) => [f, [...edges.keys()]])))) {
    const steps = circle.map((f, i) => `${f}:${imports.get(f)!.get(circle[(i + 1) % circle.length])}`);
    problems.push(`import circle: ${steps.join(' -> ')} -> ${circle[0]}`);
  }
  return problems;
}

const list = (names: string[]): string => names.map((n) => `\`${n}\``).join(', ');
const describe = (row: FolderRow, names: string[]): string =>
  row.mayImport === 'everything' ? 'everything above it' : names.length === 0 ? 'nothing of ours' : `only ${list(names)}`;

/**
 * One circle through each strongly connected set of nodes (Tarjan's algorithm), as a list of
 * nodes each pointing to the next and the last to the first.
 */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const members = new Set<string>();
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      members.add(w);
    } while (w !== v);
    if (members.size > 1 || graph.get(v)?.includes(v)) found.push(pathBack(graph, v, members));
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The shortest way from `start` back to itself within `members` (breadth first). */
function pathBack(graph: Map<string, string[]>, start: string, members: Set<string>): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const w of graph.get(queue[i]) ?? []) {
      if (!members.has(w) || cameFrom.has(w)) continue;
      cameFrom.set(w, queue[i]);
      if (w === start) {
        const way = [];
        for (let v = cameFrom.get(start)!; v !== start; v = cameFrom.get(v)!) way.unshift(v);
        return [start, ...way];
      }
      queue.push(w);
    }
  }
  throw new Error(`no circle through ${start}`);
}

/** Every .ts file under these folders of the repository at `root`. */
export function readSources(root: string, folders: string[]): SourceFile[] {
  const files: SourceFile[] = [];
  const walk = (dir: string): void => {
    for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory() && entry.name !== 'node_modules') walk(rel);
      else if (entry.isFile() && entry.name.endsWith('.ts')) files.push({ path: rel, text: fs.readFileSync(path.join(root, rel), 'utf8') });
    }
  };
  for (const folder of folders) walk(folder);
  return files.sort((a, b) => a.path.localeCompare(b.path));
}
