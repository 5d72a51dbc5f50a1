/**
 * `tributary sql`: the SQL shell. `-e` runs statements from the argument, `-f` from a file; with
 * neither, statements ending in `;` are read from stdin: at an interactive prompt when stdin is a
 * terminal (history kept in ~/.tributary_history), else as a script without prompts (psql-like:
 * `tributary sql < script.sql`, `… | tributary sql`), each statement run once its `;` is read.
 * Results print as an aligned table, one JSON object per row, or CSV; messages of statements
 * without rows go to stderr unless the format is `table`. A query prints its rows as DuckDB
 * produces them, so a result of any size goes through; a statement stops after
 * `sql.query.timeout` (QUERY_TIMEOUT), and Ctrl-C cancels it (QUERY_CANCELLED) rather than the
 * shell. `--set` gives the `sql.*` options (docs/operations.md, "Limits"). A streaming query
 * (EMIT CHANGES, or every query with `--stream`) prints its result, then the results over the
 * changes as they arrive, until Ctrl-C, which ends that query only.
 *
 * A script (`-e`, `-f`, piped stdin) stops at its first failed statement and exits 1;
 * `--continue-on-error` runs the rest and still exits 1. The prompt reports errors and goes on.
 * A statement that runs past a second shows its progress on stderr when that is a terminal
 * (progress.ts), unless `--no-progress`.
 */
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { Connection } from '../client/connection.js';
import { Options } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import { DEFAULT_DATABASE } from '../common/schema.js';
import { DuckSession } from '../query/duckdb/session.js';
import { formatResult, formatRows, type ResultFormat } from '../query/duckdb/format.js';
import type { QueryResult } from '../query/duckdb/result.js';
import { SqlExecutor } from '../query/executor.js';
import type { ProgressEvent } from '../query/progress.js';
import { sqlLimits } from '../query/sql-limits.js';
import { endsWithStatement, splitStatements } from '../query/sql/lexer.js';
import { ProgressLine } from './progress.js';
import { commandSettings, type SettingFlags } from './settings.js';

export interface SqlFlags extends SettingFlags {
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

/** A shell's statements: its DuckDB session, how long each may run, and how their progress shows. */
interface Shell {
  executor: SqlExecutor;
  duck: DuckSession;
  timeoutMs: number;
  flags: SqlFlags;
  progress: ProgressLine;
}

const HISTORY_FILE = path.join(os.homedir(), '.tributary_history');

export async function sql(flags: SqlFlags): Promise<number> {
  if (!['table', 'json', 'csv'].includes(flags.format)) {
    throw new TributaryError('INVALID_ARGUMENT', `--format must be table, json or csv, got '${flags.format}'`);
  }
  const settings = commandSettings(flags, 'tributary sql', (k) => k.startsWith('sql.'), 'the sql.* options');
  const limits = sqlLimits(new Options('server', Object.fromEntries(Object.entries(settings).filter(([k]) => k.startsWith('sql.')))), path.join(os.tmpdir(), 'tributary-sql'));
  const conn = await Connection.create({ 'bootstrap.servers': flags.bootstrap });
  const duck = await DuckSession.create(limits.session);
  const shell: Shell = {
    executor: new SqlExecutor(conn, duck, flags.database ?? DEFAULT_DATABASE),
    duck,
    timeoutMs: limits.timeoutMs,
    flags,
    progress: new ProgressLine(process.stderr, { enabled: flags.progress !== false }),
  };
  try {
    if (flags.execute !== undefined || flags.file !== undefined) {
      const script = flags.execute ?? fs.readFileSync(flags.file!, 'utf8');
      return (await runScript(shell, script, !flags.continueOnError)) ? 0 : 1;
    }
    if (!process.stdin.isTTY) return (await readScript(shell)) ? 0 : 1;
    await repl(shell);
    return 0;
  } finally {
    duck.close();
    await shell.executor.close();
    await conn.close();
  }
}

/**
 * Runs each statement of a script; stops at the first error when `stopOnError`. Returns success.
 * `rl`: the prompt's reader, which sees Ctrl-C while a streaming query runs.
 */
async function runScript(shell: Shell, script: string, stopOnError: boolean, rl?: readline.Interface): Promise<boolean> {
  const { format, stream } = shell.flags;
  const { executor, duck, progress } = shell;
  let ok = true;
  for (const statement of splitStatements(script)) {
    const stopInterrupts = onInterrupt(rl, ['SIGINT'], () => duck.cancel('Ctrl-C'));
    try {
      progress.start();
      // Only while the statement runs: a streaming query's changes print without a progress line.
      let running = true;
      const onProgress = (e: ProgressEvent): void => {
        if (running) progress.update(`${e.phase === 'read' ? 'reading' : 'writing'} ${e.table}`, e.rows, e.total);
      };
      const out = await duck.bounded(shell.timeoutMs, async () => {
        const out = await executor
          .execute(statement.sql, statement, { stream: stream ?? false, streamRows: true, onProgress })
          .finally(() => {
            running = false;
            progress.end();
          });
        if (out.result) await write(withNewline(formatResult(out.result, format)));
        if (out.rows) for await (const text of formatRows(out.rows, format)) await write(text);
        return out;
      });
      stopInterrupts();
      if (out.message) (format === 'table' ? process.stdout : process.stderr).write(`${out.message}\n`);
      if (out.changes) await printChanges(out.changes, format, rl);
    } catch (err) {
      ok = false;
      process.stderr.write(`${describeError(err)}\n`);
      if (stopOnError) break;
    } finally {
      stopInterrupts();
    }
  }
  return ok;
}

/** A script on stdin (not a terminal): each statement runs once its `;` is read, without prompts. */
async function readScript(shell: Shell): Promise<boolean> {
  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  let buffer = '';
  let ok = true;
  try {
    for await (const line of rl) {
      buffer += `${line}\n`;
      if (!endsWithStatement(buffer)) continue;
      ok = (await runScript(shell, buffer, !shell.flags.continueOnError)) && ok;
      buffer = '';
      if (!ok && !shell.flags.continueOnError) return false;
    }
    // A last statement without its `;` runs too, as with -e.
    return (await runScript(shell, buffer, !shell.flags.continueOnError)) && ok;
  } finally {
    rl.close();
  }
}

/** Writes to stdout, waiting while its buffer is full. */
async function write(text: string): Promise<void> {
  if (!process.stdout.write(text)) await once(process.stdout, 'drain');
}

/**
 * Calls `handler` on Ctrl-C and the other `signals` until the returned function is called (again
 * and again is fine). The prompt reads the terminal in raw mode: Ctrl-C reaches it, not the process.
 */
function onInterrupt(rl: readline.Interface | undefined, signals: NodeJS.Signals[], handler: () => void): () => void {
  for (const signal of signals) process.on(signal, handler);
  rl?.on('SIGINT', handler);
  rl?.resume();
  let done = false;
  return () => {
    if (done) return;
    done = true;
    for (const signal of signals) process.off(signal, handler);
    rl?.off('SIGINT', handler);
    rl?.pause();
  };
}

/** Prints a streaming query's results as they arrive, until Ctrl-C or SIGTERM. */
async function printChanges(changes: AsyncIterable<QueryResult>, format: ResultFormat, rl: readline.Interface | undefined): Promise<void> {
  const iterator = changes[Symbol.asyncIterator]();
  let stop!: () => void;
  const stopped = new Promise<undefined>((resolve) => (stop = () => resolve(undefined)));
  const stopInterrupts = onInterrupt(rl, ['SIGINT', 'SIGTERM'], stop);
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
    stopInterrupts();
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

async function repl(shell: Shell): Promise<void> {
  const { executor } = shell;
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
      await runScript(shell, buffer, false, rl);
      buffer = '';
      rl.resume();
    }
    prompt();
  }
  rl.close();
}
