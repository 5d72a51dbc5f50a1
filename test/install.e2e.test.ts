/**
 * The package as another project gets it: packed with `npm pack`, installed from the tarball into a
 * scratch project, its server started from the installed command, and there the client imported by
 * the package name (type checked against the packed `.d.ts`), the README's quick start, the
 * programs of docs/client.md and the iceberg-js example of docs/http.md (with the version the page
 * says to install) run as the pages show them.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { Connection } from '../src/client/index.js';
import { atServer, type CodeBlock, codeBlocks, ROOT } from './support/doc-blocks.js';
import { TestCluster } from './support/cluster.js';
import { distIsCurrent, type ServerProcess, tempDir } from './support/server-process.js';
import { waitTiered } from './support/tiering-rounds.js';

const run = promisify(execFile);
const NAME = (JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { name: string }).name;
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
/** Without the variables `npm test` sets for its script, which would steer the npm run inside. */
const ENV = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('npm_')));

let project: string;
/** The tarball's directory. */
let packs: string;
/** The installed package's command. */
let cli: string;
let server: ServerProcess;
/** A second server, whose `tributary.orders` is a lake table (the README's is not). */
let lake: ServerProcess;
/** One cluster per server, each running the installed command; the programs connect on their own. */
const clusters: TestCluster[] = [];

/** Runs a command in the scratch project (or `cwd`); resolves with its output, rejects naming it. */
async function sh(file: string, args: string[], cwd = project): Promise<string> {
  try {
    return (await run(file, args, { cwd, env: ENV, maxBuffer: 64 << 20 })).stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${file} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

before(async () => {
  // `npm install` and `npm ci` build dist/ (prepare); build again only after a source changed.
  if (!distIsCurrent()) await sh('npm', ['run', 'build'], ROOT);
  packs = tempDir('pack');
  const [packed] = JSON.parse(await sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', packs], ROOT)) as { filename: string; files: { path: string }[] }[];
  const files = packed.files.map((f) => f.path);
  for (const f of ['package.json', 'README.md', 'dist/cli/bin.cjs', 'dist/cli/main.js', 'dist/client/index.js', 'dist/client/index.d.ts', 'dist/lake/iceberg/data-file-worker.js']) {
    assert.ok(files.includes(f), `the package holds ${f}`);
  }
  assert.deepEqual(files.filter((f) => /\.test\.|\.map$|^src\//.test(f)), [], 'no tests, source maps or sources');

  project = tempDir('project');
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  // The version of iceberg-js that docs/http.md says to install.
  const iceberg = /npm install (iceberg-js@\S+?)`/.exec(fs.readFileSync(path.join(ROOT, 'docs', 'http.md'), 'utf8'));
  assert.ok(iceberg, 'docs/http.md says which iceberg-js to install');
  await sh('npm', ['install', path.join(packs, packed.filename), iceberg[1], '--prefer-offline', '--no-audit', '--no-fund']);
  cli = path.join(project, 'node_modules', NAME, 'dist', 'cli', 'bin.cjs');
  clusters.push(new TestCluster({ cli, client: false }), new TestCluster({ cli, client: false }));
  for (const c of clusters) await c.start();
  [server, lake] = clusters.map((c) => c.server);
  await compile({
    smoke: SMOKE,
    readme: atServer(readmeProgram().text, server),
    ...Object.fromEntries(clientPrograms().map((b, i) => [`client${i}`, atServer(b.text, server)])),
    // The example leaves its results in variables; printing them is added.
    iceberg: `${atServer(icebergProgram().text, lake)}console.log(JSON.stringify({ identifiers, location: result?.['metadata-location'] }));\n`,
  });
});

after(async () => {
  for (const c of clusters) await c.stop();
  for (const dir of [packs, project]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Writes TypeScript programs into the project and compiles them there, type checked against the installed packages. */
async function compile(programs: Record<string, string>): Promise<void> {
  for (const [name, text] of Object.entries(programs)) fs.writeFileSync(path.join(project, `${name}.ts`), text);
  const tsconfig = {
    compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, skipLibCheck: true, types: ['node'], typeRoots: [path.join(ROOT, 'node_modules', '@types')] },
    files: Object.keys(programs).map((n) => `${n}.ts`),
  };
  fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify(tsconfig));
  await sh(process.execPath, [TSC, '-p', 'tsconfig.json']);
}

/** A doc's programs: its TypeScript blocks that import something, so that they run on their own. */
function programs(doc: string): CodeBlock[] {
  return codeBlocks(doc, 'ts').filter((b) => /^import /m.test(b.text));
}

function readmeProgram(): CodeBlock {
  const [program] = programs('README.md');
  assert.ok(program, 'the README has a TypeScript program');
  return program;
}

function clientPrograms(): CodeBlock[] {
  const blocks = programs('docs/client.md');
  assert.ok(blocks.length >= 3, 'the import line, the log table and the primary-key table examples');
  return blocks;
}

function icebergProgram(): CodeBlock {
  const [program] = programs('docs/http.md').filter((b) => b.text.includes("from 'iceberg-js'"));
  assert.ok(program, 'docs/http.md has the iceberg-js example');
  return program;
}

const SMOKE = `import { Connection, type Row } from '${NAME}/client';
const conn = await Connection.create({ 'bootstrap.servers': process.argv[2] });
const path = { database: 'tributary', table: 'smoke' };
await conn.getAdmin().createTable(path, { columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'name', type: 'STRING' }], bucketCount: 1 });
const table = await conn.getTable(path);
const writer = await table.newAppend().createWriter();
await writer.append({ id: 1n, name: 'ann' });
await writer.close();
const scanner = table.newScan().createLogScanner();
await scanner.subscribe(0, 'earliest');
const rows: Row[] = (await scanner.poll(10_000)).map((r) => r.row);
console.log(JSON.stringify(rows, (_, v) => (typeof v === 'bigint' ? \`\${v}n\` : v)));
scanner.close();
await conn.close();
`;

test('the client imports by the package name, typed, and writes and reads a row on a real server', async () => {
  assert.equal((await sh(process.execPath, ['smoke.js', server.bootstrap])).trim(), '[{"id":"1n","name":"ann"}]');
});

test("the README's quick start: the SQL shell, then the TypeScript client", { timeout: 120_000 }, async () => {
  const [shell] = codeBlocks('README.md', 'sh').filter((b) => b.text.includes(' sql -e '));
  assert.ok(shell, 'the README runs the SQL shell');
  // The shell's default server is 127.0.0.1:9123; this one listens on an ephemeral port.
  const out = await sh('bash', ['-c', shell.text.replace(' sql -e ', ` sql --bootstrap ${server.bootstrap} -e `)], ROOT);
  assert.match(out, /20240101\D+1\D+12\.50/, `${shell.where} prints the sum of each day`);
  assert.match(out, /20240102\D+1\D+7\.25/);

  const client = readmeProgram();
  // The program follows the table until stopped: it is stopped once the new row is printed.
  const child = spawn(process.execPath, ['readme.js'], { cwd: project, env: ENV });
  const printed = await output(child, /id: 3n, amount: '99\.90'/);
  assert.match(printed, /0n \{ id: 3n, amount: '99\.90' \}/, `${client.where} prints the row it appended`);
});

/** Collects a child's stdout until `until` matches (then kills it) or it exits. */
function output(child: ChildProcess, until: RegExp): Promise<string> {
  let out = '';
  let err = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (until.test(out)) {
        child.kill();
        resolve(out);
      }
    });
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.once('exit', (code) => (until.test(out) ? resolve(out) : reject(new Error(`exited with ${code} before printing ${until}: ${out}\n${err}`))));
  });
}

test('the programs of docs/client.md compile and run', { timeout: 120_000 }, async () => {
  for (const [i, b] of clientPrograms().entries()) {
    const child = spawn(process.execPath, [`client${i}.js`], { cwd: project, env: ENV });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    assert.equal(code, 0, `${b.where} exits cleanly: ${stderr}`);
  }
});

test("docs/http.md's iceberg-js example lists and loads a lake table", { timeout: 120_000 }, async () => {
  // The example reads tributary.orders from the catalog: a lake table with a round in the lake.
  const conn = await Connection.create({ 'bootstrap.servers': lake.bootstrap });
  try {
    const admin = conn.getAdmin();
    const orders = { database: 'tributary', table: 'orders' };
    await admin.createTable(orders, {
      columns: [{ name: 'id', type: 'BIGINT', nullable: false }, { name: 'customer', type: 'STRING' }],
      properties: { 'table.datalake.enabled': 'true', 'table.datalake.freshness': '1s' },
    });
    const writer = await (await conn.getTable(orders)).newAppend().createWriter();
    await writer.append({ id: 1n, customer: 'ann' });
    await writer.close();
    await waitTiered(conn, orders);

    const example = icebergProgram();
    const out = JSON.parse(await sh(process.execPath, ['iceberg.js'])) as { identifiers: unknown; location: string };
    assert.deepEqual(out.identifiers, [{ namespace: ['tributary'], name: 'orders' }], `${example.where} lists the lake table`);
    assert.match(out.location, /\/lake\/tributary\/orders\/metadata\/v\d+\.metadata\.json$/, 'and loads its metadata');
  } finally {
    await conn.close();
  }
});
