/**
 * `tributary lake`: maintenance of one lake table, run on the Iceberg warehouse directly (no
 * server needed). The warehouse is `--warehouse` (a directory or s3://, reached with the s3.*
 * options of `--set` and `--config`), else the `lake` directory of `--data-dir` as a node with that
 * data directory and no datalake.iceberg.warehouse has it:
 *
 *   expire-snapshots  drops old snapshots (never the current one) and the files only they reached
 *   remove-orphans    deletes files under the table location that no metadata references
 *   compact           rewrites each partition's data files into one without the deleted rows
 *
 * A long compaction shows the rows it has rewritten on stderr when that is a terminal (progress.ts).
 * Text output is one line per item (`expired snapshot <id>`, `deleted <file>`, `compacted
 * <partition> …`) and a summary line; `--format json` prints one JSON object instead. Snapshot ids
 * are written as strings in JSON: they exceed JavaScript's exact integers.
 */
import { Command, Option } from 'commander';
import { lakeWarehouse, optionDefault, Options, parseDuration } from '../common/config.js';
import { TributaryError } from '../common/errors.js';
import type { TablePath } from '../common/schema.js';
import { lakeFormat } from '../lake/formats/index.js';
import type { LakeStorage } from '../lake/lake-format.js';
import { DuckSession } from '../query/duckdb/session.js';
import { ProgressLine } from './progress.js';
import { commandSettings, parseSetting, type SettingFlags } from './settings.js';

interface LakeFlags extends SettingFlags {
  warehouse?: string;
  dataDir?: string;
  table: string;
  format: 'text' | 'json';
  olderThan?: string;
  retainLast?: string;
  /** commander's `--no-progress`. */
  progress?: boolean;
}

/** The `lake` command and its subcommands. */
export function lakeCommand(): Command {
  const lake = new Command('lake').description('maintain a lake table of an Iceberg warehouse: snapshot expiry, orphan-file removal, compaction');
  const target = (cmd: Command): Command =>
    cmd
      .option('--warehouse <location>', 'the Iceberg warehouse: a directory or s3://bucket/prefix (datalake.iceberg.warehouse, default: <data-dir>/lake)')
      .option('--data-dir <dir>', `the data directory of the node whose lake it is, when --warehouse is not given (data.dir, default: ${optionDefault('data.dir')})`)
      .requiredOption('--table <db.table>', 'the lake table')
      .addOption(new Option('--format <format>', 'output format').choices(['text', 'json']).default('text'))
      .option('--no-progress', 'no progress line for a long compaction (shown only when stderr is a terminal)')
      .option('--config <file>', "config file of 'key: value' lines: the s3.* and datalake.cache.* options")
      .option('--set <key=value>', 'set an s3.* or datalake.cache.* option, e.g. s3.endpoint=http://127.0.0.1:9000 (repeatable)', parseSetting);

  target(lake.command('expire-snapshots').description('expire old snapshots and delete the files only they reached'))
    .option('--older-than <duration>', 'snapshots older than this may expire (default: the table property history.expire.max-snapshot-age-ms, else 5d)')
    .option('--retain-last <n>', 'snapshots of each branch kept whatever their age (default: history.expire.min-snapshots-to-keep, else 1)')
    .action(async (flags: LakeFlags) => {
      const { lake, path } = open(flags);
      const result = await lake.expireSnapshots(path, {
        ...(flags.olderThan !== undefined ? { olderThanMs: Date.now() - duration(flags.olderThan) } : {}),
        ...(flags.retainLast !== undefined ? { retainLast: positiveInt(flags.retainLast, '--retain-last') } : {}),
      });
      const ids = result.expiredSnapshotIds.map(String);
      print(flags, { expired_snapshots: ids, deleted_files: result.deletedFiles }, [
        ...ids.map((id) => `expired snapshot ${id}`),
        ...result.deletedFiles.map((f) => `deleted ${f}`),
        `expired ${ids.length} snapshots, deleted ${result.deletedFiles.length} files`,
      ]);
    });

  target(lake.command('remove-orphans').description('delete files under the table location that no metadata references'))
    .option('--older-than <duration>', 'only files older than this (default 3d: younger ones may belong to a commit in flight)')
    .action(async (flags: LakeFlags) => {
      const { lake, path } = open(flags);
      const result = await lake.removeOrphanFiles(path, flags.olderThan !== undefined ? { olderThanMs: Date.now() - duration(flags.olderThan) } : {});
      print(flags, { deleted_files: result.deletedFiles }, [...result.deletedFiles.map((f) => `deleted ${f}`), `deleted ${result.deletedFiles.length} orphan files`]);
    });

  target(lake.command('compact').description("rewrite each partition's data files into one, without deleted rows and delete files")).action(async (flags: LakeFlags) => {
    const { lake, path } = open(flags);
    const progress = new ProgressLine(process.stderr, { enabled: flags.progress !== false });
    const result = await lake.compact(path, () => DuckSession.create(), { onProgress: (rows) => progress.update(`compacting ${flags.table}`, rows) }).finally(() => progress.end());
    const partitions = (result?.partitions ?? []).map((p) => ({
      partition: p.name,
      removed_data_files: p.removedDataFiles,
      removed_delete_files: p.removedDeleteFiles,
      added_file: p.added?.path ?? null,
      records: p.added?.recordCount ?? 0,
    }));
    print(flags, { snapshot_id: result ? String(result.snapshotId) : null, partitions }, [
      ...partitions.map(
        (p) =>
          `compacted ${p.partition || '(unpartitioned)'}: ${p.removed_data_files} data files and ${p.removed_delete_files} delete files -> ` +
          (p.added_file === null ? 'no rows left' : `${p.added_file} (${p.records} records)`),
      ),
      result ? `compacted ${partitions.length} partitions in snapshot ${result.snapshotId}` : 'nothing to compact',
    ]);
  });
  return lake;
}

function open(flags: LakeFlags): { lake: LakeStorage; path: TablePath } {
  const dot = flags.table.indexOf('.');
  if (dot <= 0 || dot === flags.table.length - 1) throw new TributaryError('INVALID_ARGUMENT', `--table must be <database>.<table>, got '${flags.table}'`);
  commandSettings(flags, 'tributary lake');
  const options = new Options('server', { ...(flags.warehouse ? { 'datalake.iceberg.warehouse': flags.warehouse } : {}), ...(flags.dataDir ? { 'data.dir': flags.dataDir } : {}) });
  return { lake: lakeFormat(options.string('datalake.format')!).open(lakeWarehouse(options)), path: { database: flags.table.slice(0, dot), table: flags.table.slice(dot + 1) } };
}

function duration(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined) throw new TributaryError('INVALID_ARGUMENT', `--older-than: '${text}' is not a duration such as '30min', '12h', '7d'`);
  return ms;
}

function positiveInt(text: string, flag: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || n < 1) throw new TributaryError('INVALID_ARGUMENT', `${flag} must be a positive integer, got '${text}'`);
  return n;
}

function print(flags: LakeFlags, json: object, lines: string[]): void {
  process.stdout.write(flags.format === 'json' ? `${JSON.stringify(json)}\n` : `${lines.join('\n')}\n`);
}
