/**
 * `tributary sql`: the SQL shell. `-e` runs statements from the argument, `-f` from a file, and
 * otherwise an interactive prompt reads statements ending in `;` (history kept in
 * ~/.tributary_history). Results print as an aligned table, one JSON object per row, or CSV;
 * messages of statements without rows go to stderr unless the format is `table`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { Connection } from '../client/connection.js';
import { TributaryError } from '../common/errors.js';
import { DEFAULT_DATABASE } from '../common/schema.js';
import { DuckSession } from '../query/duckdb/session.js';
import { formatResult, type ResultFormat } from '../query/duckdb/format.js';
import { SqlExecutor } from '../query/executor.js';
import { splitStatements } from '../query/sql/lexer.js';

export interface SqlFlags {
  execute?: string;
  file?: string;
  format: ResultFormat;
  bootstrap: string;
  database?: string;
}

const HISTORY_FILE = path.join(os.homedir(), '.tributary_history');

export async function sql(flags: SqlFlags): Promise<number> {
  if (!['table', 'json', 'csv'].includes(flags.format)) {
    throw new TributaryError('INVALID_ARGUMENT', `--format must be table, json or csv, got '${flags.format}'`);
  }
  const conn = await Connection.create({ 'bootstrap.servers': flags.bootstrap });
  const duck = await DuckSession.create();
  const executor = new SqlExecutor(conn, duck, flags.database ?? DEFAULT_DATABASE);
  try {
    if (flags.execute !== undefined || flags.file !== undefined) {
      const script = flags.execute ?? fs.readFileSync(flags.file!, 'utf8');
      return (await runScript(executor, script, flags.format, true)) ? 0 : 1;
    }
    await repl(executor, flags.format);
    return 0;
  } finally {
    duck.close();
    await conn.close();
  }
}

/** Runs each statement of a script; stops at the first error when `stopOnError`. Returns success. */
async function runScript(executor: SqlExecutor, script: string, format: ResultFormat, stopOnError: boolean): Promise<boolean> {
  let ok = true;
  for (const statement of splitStatements(script)) {
    try {
      const out = await executor.execute(statement.sql, statement);
      if (out.result) process.stdout.write(withNewline(formatResult(out.result, format)));
      if (out.message) (format === 'table' ? process.stdout : process.stderr).write(`${out.message}\n`);
    } catch (err) {
      ok = false;
      process.stderr.write(`${describeError(err)}\n`);
      if (stopOnError) break;
    }
  }
  return ok;
}

function withNewline(text: string): string {
  return text.length === 0 || text.endsWith('\n') ? text : `${text}\n`;
}

export function describeError(err: unknown): string {
  if (err instanceof TributaryError) return `ERROR ${err.errorName}: ${err.message}`;
  return `ERROR: ${err instanceof Error ? err.message : String(err)}`;
}

async function repl(executor: SqlExecutor, format: ResultFormat): Promise<void> {
  const history = fs.existsSync(HISTORY_FILE) ? fs.readFileSync(HISTORY_FILE, 'utf8').split('\n').filter(Boolean).reverse() : [];
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout, history, historySize: 1000, terminal: process.stdin.isTTY });
  rl.on('history', (h: string[]) => {
    fs.writeFile(HISTORY_FILE, [...h].reverse().join('\n') + '\n', () => undefined);
  });
  const prompt = (): void => {
    rl.setPrompt(buffer.trim() ? '      -> ' : `tributary:${executor.database}> `);
    rl.prompt();
  };
  let buffer = '';
  prompt();
  for await (const line of rl) {
    buffer += `${line}\n`;
    const trimmed = buffer.trim();
    if (trimmed === 'quit' || trimmed === 'exit' || trimmed === '\\q') break;
    if (trimmed.endsWith(';')) {
      rl.pause();
      await runScript(executor, buffer, format, false);
      buffer = '';
      rl.resume();
    }
    prompt();
  }
  rl.close();
}
