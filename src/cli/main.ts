#!/usr/bin/env node
/**
 * The `tributary` command: wiring only. `start` runs a node, `tiering` a lake tiering worker, `sql`
 * the SQL shell, `tail` follows a table, `lake` lake table maintenance.
 */
import './v8-options.js';
import { Command, Option } from 'commander';
import { SOFTWARE_VERSION } from '../rpc/version.js';
import { lakeCommand } from './lake.js';
import { parseSetting } from './settings.js';
import { describeError, sql } from './sql.js';
import { start } from './start.js';
import { tail } from './tail.js';
import { tiering } from './tiering.js';

const program = new Command('tributary').description('Streaming storage for real-time analytics, native to the lakehouse').version(SOFTWARE_VERSION);

program
  .command('start')
  .description('start an embedded server (coordinator + tablet server) with a local data directory')
  .option('--data-dir <dir>', 'data directory (data.dir)')
  .option('--host <host>', 'address to listen on', undefined)
  .option('--port <port>', 'RPC port; 0 picks a free one (bind.listeners)')
  .option('--http-port <port>', 'HTTP port; 0 picks a free one (http.port)')
  .option('--config <file>', "config file of 'key: value' lines")
  .option('--set <key=value>', 'set a server option (repeatable)', parseSetting, {})
  .option('--no-tiering', 'do not run the embedded lake tiering worker')
  .action(async (opts) => {
    await start(opts);
  });

program
  .command('tiering')
  .description('run a lake tiering worker: tiers lake-enabled tables into Iceberg until stopped')
  .option('--bootstrap <host:port>', 'server to connect to', '127.0.0.1:9123')
  .option('--threads <n>', 'worker threads converting Arrow to Parquet', '1')
  .option('--poll-interval <ms>', 'how often an idle worker asks for work', '1000')
  .action(async (opts) => {
    await tiering(opts);
  });

program
  .command('sql')
  .description('run SQL: interactively, with -e, or from a file with -f')
  .option('-e, --execute <statements>', 'statements to run, separated by ;')
  .option('-f, --file <file>', 'SQL script to run')
  .addOption(new Option('--format <format>', 'result format').choices(['table', 'json', 'csv']).default('table'))
  .option('--bootstrap <host:port>', 'server to connect to', '127.0.0.1:9123')
  .option('-d, --database <db>', 'database to start in')
  .option('--stream', 'run queries as streaming queries (as if they ended in EMIT CHANGES): print the result, then changes until Ctrl-C')
  .option('--set <key=value>', 'set a sql.* option, e.g. sql.query.timeout=30s (repeatable)', parseSetting, {})
  .action(async (opts) => {
    process.exitCode = await sql(opts);
  });

program
  .command('tail')
  .description('follow a table: print each record (change type, offset, row) as it arrives, until Ctrl-C')
  .argument('<table>', 'table to follow: table or database.table')
  .option('--from <where>', 'where each bucket starts: earliest, latest, an offset or a timestamp', 'latest')
  .addOption(new Option('--format <format>', 'line format').choices(['json', 'table']).default('table'))
  .option('--bootstrap <host:port>', 'server to connect to', '127.0.0.1:9123')
  .option('-d, --database <db>', 'database of an unqualified table name')
  .action(async (table: string, opts) => {
    await tail(table, opts);
  });

program.addCommand(lakeCommand());

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`${describeError(err)}\n`);
  process.exit(1);
});
