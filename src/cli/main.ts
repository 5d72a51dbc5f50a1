#!/usr/bin/env node
/**
 * The `tributary` command: wiring only. `start` runs a node, `coordinator-server` and
 * `tablet-server` the processes of a cluster, `tiering` a lake tiering worker, `sql` the SQL shell,
 * `tail` follows a table, `lake` lake table maintenance.
 */
import './v8-options.js';
import { Command, Option } from 'commander';
import { optionDefault } from '../common/config.js';
import { parseListener } from '../server/server.js';
import { SOFTWARE_VERSION } from '../rpc/version.js';
import { coordinatorServer, tabletServer } from './cluster-servers.js';
import { lakeCommand } from './lake.js';
import { parseSetting } from './settings.js';
import { describeError, sql } from './sql.js';
import { start } from './start.js';
import { tail } from './tail.js';
import { tiering } from './tiering.js';

const defaultListener = parseListener(optionDefault('bind.listeners'));

const program = new Command('tributary').description('Streaming storage for real-time analytics, native to the lakehouse').version(SOFTWARE_VERSION);

/** The flags every server command takes. Defaults are shown, not set: a flag left out must not override the config file or --set. */
function serverCommand(name: string, description: string): Command {
  return program
    .command(name)
    .description(description)
    .option('--data-dir <dir>', `data directory (data.dir, default: ${optionDefault('data.dir')})`)
    .option('--host <host>', `address to listen on (bind.listeners, default: ${defaultListener.host})`)
    .option('--port <port>', `RPC port; 0 picks a free one (bind.listeners, default: ${defaultListener.port})`)
    .option('--http-port <port>', `HTTP port; 0 picks a free one (http.port, default: ${optionDefault('http.port')})`)
    .option('--config <file>', "config file of 'key: value' lines").option('--set <key=value>', 'set a server option (repeatable)', parseSetting);
}

serverCommand('start', 'start an embedded server (coordinator + tablet server) with a local data directory')
  .option('--kafka-port <port>', 'also serve the Kafka protocol on this port (kafka.enabled, a KAFKA listener in bind.listeners)')
  .option('--no-tiering', 'do not run the embedded lake tiering worker')
  .action(async (opts) => {
    await start(opts);
  });

serverCommand('coordinator-server', 'start a coordinator of a cluster on ZooKeeper (zookeeper.address); one is active, others stand by').action(async (opts) => {
  await coordinatorServer(opts);
});

serverCommand('tablet-server', 'start a tablet server of a cluster on ZooKeeper (zookeeper.address, tablet-server.id); it serves HTTP only with --http-port or http.port')
  .option('--kafka-port <port>', 'also serve the Kafka protocol on this port (kafka.enabled, a KAFKA listener in bind.listeners)')
  .action(async (opts) => {
    await tabletServer(opts);
  });

program
  .command('tiering')
  .description('run a lake tiering worker: tiers lake-enabled tables into Iceberg until stopped')
  .option('--bootstrap <host:port>', 'server to connect to', '127.0.0.1:9123')
  .option('--threads <n>', 'worker threads converting Arrow to Parquet', '1')
  .option('--poll-interval <ms>', 'how often an idle worker asks for work', '1000')
  .option('--config <file>', "config file of 'key: value' lines: the s3.* and datalake.cache.* options")
  .option('--set <key=value>', 'set an s3.* or datalake.cache.* option, e.g. s3.endpoint=http://127.0.0.1:9000 (repeatable)', parseSetting)
  .action(async (opts) => {
    await tiering(opts);
  });

program
  .command('sql')
  .description('run SQL: with -e, from a file with -f, from stdin when it is piped, else interactively')
  .option('-e, --execute <statements>', 'statements to run, separated by ;')
  .option('-f, --file <file>', 'SQL script to run')
  .addOption(new Option('--format <format>', 'result format').choices(['table', 'json', 'csv']).default('table'))
  .option('--bootstrap <host:port>', 'server to connect to', '127.0.0.1:9123')
  .option('-d, --database <db>', 'database to start in')
  .option('--stream', 'run queries as streaming queries (as if they ended in EMIT CHANGES): print the result, then changes until Ctrl-C')
  .option('--continue-on-error', 'run the rest of a script after a failed statement (the exit code is still 1)')
  .option('--no-progress', 'no progress line for long statements (shown only when stderr is a terminal)')
  .option('--config <file>', "config file of 'key: value' lines: the sql.*, s3.* and datalake.cache.* options")
  .option('--set <key=value>', 'set a sql.*, s3.* or datalake.cache.* option, e.g. sql.query.timeout=30s (repeatable)', parseSetting, {})
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
