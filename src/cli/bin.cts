#!/usr/bin/env node
/**
 * The installed `tributary` command. libuv sizes its thread pool, which runs every file read,
 * write and fsync, when it is first used, and loading ES modules already uses it: only this
 * CommonJS entry runs early enough to size it. Four threads (libuv's default) are few for a node
 * whose appends fsync beside checkpoints, snapshots and lake files: with four background fsync
 * writers, appends waited for a free thread (bench:latency p50 7.8-8.6 ms with four, 5.0-6.9 ms
 * with sixteen). A value the operator sets is kept.
 *
 * A server command also needs its V8 flags (node-flags.cts) from the start: when they are
 * missing, the process replaces itself (execve: the same pid, so signals and `kill -9` reach the
 * node) with one started with them. Nodes without `process.execve` (before 22.15) run without.
 */
import { gcFlags, SERVER_COMMANDS, missingFlags } from './node-flags.cjs';

process.env.UV_THREADPOOL_SIZE ??= '16';
if (SERVER_COMMANDS.includes(process.argv[2])) {
  let missing: string[] = [];
  try {
    missing = missingFlags(gcFlags());
  } catch (err) {
    console.error(`tributary: ${(err as Error).message}`);
    process.exit(2);
  }
  const execve = (process as { execve?: (file: string, args: string[]) => never }).execve;
  if (missing.length > 0 && execve) execve(process.execPath, [process.execPath, ...process.execArgv, ...missing, __filename, ...process.argv.slice(2)]);
}
void import('./main.js');
