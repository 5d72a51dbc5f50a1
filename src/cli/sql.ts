/**
 * `tributary sql`: the SQL shell. `-e` runs statements from the argument, `-f` from a file; with
 * neither, statements ending in `;` are read from stdin: at an interactive prompt when stdin is a
 * terminal (history kept in ~/.tributary_history), else as a script without prompts (psql-like:
 * `tributary sql < script.sql`, `… | tributary sql`), each statement run once its `;` is read.
 * Results print as an aligned table, one JSON object per row, or CSV; messages of statements
 * without rows go to stderr unless the format is `table`. A streaming query (EMIT CHANGES, or
 * every query with `--stream`) prints its result, then the results over the changes as they
 * arrive, until Ctrl-C, which ends that query only.
 *
 * A script (`-e`, `-f`, piped stdin) stops at its first failed statement and exits 1;
 * `--continue-on-error` runs the rest and still exits 1. The prompt reports errors and goes on.
 * A statement that runs past a second shows its progress on stderr when that is a terminal
 * (progress.ts), unless `--no-progress`.
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
import type { QueryResult } from '../query/duckdb/result.js';
import { SqlExecutor } from '../query/executor.js';
import type { ProgressEvent } from '../query/progress.js';
import { endsWithStatement, splitStatements } from '../query/sql/lexer.js';
import { ProgressLine } from './progress.js';

export interface SqlFlags {
  execute?: string;
  file?: string;
  format: ResultFormat;
  bootstrap: string;
  database?: string;
  /** Every query streams, as if it ended in EMIT CHANGES. */
  stream?: boolean;
  /** A script runs on after a failed statement (and still exits 1). */
  continueOnError?: boolean;
  /** commander's `--no-progress`: false turns the progress line off. */
  progress?: boolean;
}

/** What running statements needs besides the executor. */
interface Shell {
  flags: SqlFlags;
  progress: ProgressLine;
}

const HISTORY_FILE = path.join(os.homedir(), '.tributary_history');

export async function sql(flags: SqlFlags): Promise<number> {
  if (!['table', 'json', 'csv'].includes(flags.format)) {
    throw new TributaryError('INVALID_ARGUMENT', `--format must be table, json or csv, got '${flags.format}'`);
  }
  const conn = await Connection.create({ 'bootstrap.servers': flags.bootstrap });
  const duck = await DuckSession.create();
  const executor = new SqlExecutor(conn, duck, flags.database ?? DEFAULT_DATABASE);
  const shell: Shell = { flags, progress: new ProgressLine(process.stderr, { enabled: flags.progress !== false }) };
  try {
    if (flags.execute !== undefined || flags.file !== undefined) {
      const script = flags.execute ?? fs.readFileSync(flags.file!, 'utf8');
      return (await runScript(executor, script, shell, !flags.continueOnError)) ? 0 : 1;
    }
    if (!process.stdin.isTTY) return (await readScript(executor, shell)) ? 0 : 1;
    await repl(executor, shell);
    return 0;
  } finally {
    duck.close();
    await conn.close();
  }
}

/**
 * Runs each statement of a script; stops at the first error when `stopOnError`. Returns success.
 * `rl`: the prompt's reader, which sees Ctrl-C while a streaming query runs.
 */
async function runScript(executor: SqlExecutor, script: string, shell: Shell, stopOnError: boolean, rl?: readline.Interface): Promise<boolean> {
  const { format, stream } = shell.flags;
  const { progress } = shell;
  let ok = true;
  for (const statement of splitStatements(script)) {
    try {
      progress.start();
      // Only while the statement runs: a streaming query's changes print without a progress line.
      let running = true;
      const onProgress = (e: ProgressEvent): void => {
        if (running) progress.update(`${e.phase === 'read' ? 'reading' : 'writing'} ${e.table}`, e.rows, e.total);
      };
      const out = await executor.execute(statement.sql, statement, { stream: stream ?? false, onProgress }).finally(() => {
        running = false;
        progress.end();
      });
      if (out.result) process.stdout.write(withNewline(formatResult(out.result, format)));
      if (out.message) (format === 'table' ? process.stdout : process.stderr).write(`${out.message}\n`);
      if (out.changes) await printChanges(out.changes, format, rl);
    } catch (err) {
      ok = false;
      process.stderr.write(`${describeError(err)}\n`);
      if (stopOnError) break;
    }
  }
  return ok;
}

/** A script on stdin (not a terminal): each statement runs once its `;` is read, without prompts. */
async function readScript(executor: SqlExecutor, shell: Shell): Promise<boolean> {
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  let buffer = '';
  let ok = true;
  try {
    for await (const line of rl) {
      buffer += `${line}\n`;
      if (!endsWithStatement(buffer)) continue;
      ok = (await runScript(executor, buffer, shell, !shell.flags.continueOnError)) && ok;
      buffer = '';
      if (!ok && !shell.flags.continueOnError) return false;
    }
    // A last statement without its `;` runs too, as with -e.
    return (await runScript(executor, buffer, shell, !shell.flags.continueOnError)) && ok;
  } finally {
    rl.close();
  }
}

/** Prints a streaming query's results as they arrive, until Ctrl-C or SIGTERM. */
async function printChanges(changes: AsyncIterable<QueryResult>, format: ResultFormat, rl: readline.Interface | undefined): Promise<void> {
  const iterator = changes[Symbol.asyncIterator]();
  let stop!: () => void;
  const stopped = new Promise<undefined>((resolve) => (stop = () => resolve(undefined)));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // The prompt reads the terminal in raw mode: Ctrl-C reaches it, not the process.
  rl?.once('SIGINT', stop);
  rl?.resume();
  let pending: Promise<IteratorResult<QueryResult>> | undefined;
  try {
    for (;;) {
      pending = iterator.next();
      const next = await Promise.race([pending, stopped]);
      if (!next || next.done) break;
      pending = undefined;
      process.stdout.write(withNewline(formatResult(next.value, format)));
    }
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    rl?.off('SIGINT', stop);
    rl?.pause();
    await iterator.return?.();
    // The poll under way ends within its timeout.
    await pending?.catch(() => undefined);
  }
}

function withNewline(text: string): string {
  return text.length === 0 || text.endsWith('\n') ? text : `${text}\n`;
}

export function describeError(err: unknown): string {
  if (err instanceof TributaryError) return `ERROR ${err.errorName}: ${err.message}`;
  return `ERROR: ${err instanceof Error ? err.message : String(err)}`;
}

async function repl(executor: SqlExecutor, shell: Shell): Promise<void> {
  const history = fs.existsSync(HISTORY_FILE) ? fs.readFileSync(HISTORY_FILE, 'utf8').split('\n').filter(Boolean).reverse() : [];
  const rl = readline.createInterface({ input: process.stdin, output: process.stdout, history, historySize: 1000, terminal: true });
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
    if (endsWithStatement(buffer)) {
      rl.pause();
      await runScript(executor, buffer, shell, false, rl);
      buffer = '';
      rl.resume();
    }
    prompt();
  }
  rl.close();
}
