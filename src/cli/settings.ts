/**
 * Settings from the command line: a flat `key: value` config file (the form of Fluss's
 * server.yaml; `#` starts a comment) overlaid by `--set key=value` pairs and the shortcut flags.
 * Servers take every server option; the other commands (`tiering`, `lake`, `sql`) take the object
 * storage options (`s3.*`, `datalake.cache.*`) and their own, read by `commandSettings`, the one
 * place that sets their object storage.
 */
import fs from 'node:fs';
import { TributaryError } from '../common/errors.js';
import { configureObjectStorageFrom, isObjectStorageOption, processCacheDir } from '../storage/stores.js';

/** The flags that carry settings. */
export interface SettingFlags {
  config?: string;
  set?: Record<string, string>;
}

/**
 * The settings of a command that is not a server: its config file overlaid by `--set`. Each key
 * must be an object storage option or one `accepts` takes (`takes` says which, for the error);
 * the object storage options configure this process's object storage.
 */
export function commandSettings(flags: SettingFlags, command: string, accepts: (key: string) => boolean = () => false, takes = ''): Record<string, string> {
  const settings = { ...(flags.config ? readConfigFile(flags.config) : {}), ...(flags.set ?? {}) };
  const other = Object.keys(settings).find((k) => !isObjectStorageOption(k) && !accepts(k));
  if (other !== undefined) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `${command} takes the s3.* and datalake.cache.* options${takes ? ` and ${takes}` : ''}, got '${other}'`);
  configureObjectStorageFrom(settings, processCacheDir());
  return settings;
}

export function readConfigFile(file: string): Record<string, string> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new TributaryError('INVALID_CONFIG_EXCEPTION', `cannot read config file '${file}': ${(err as Error).message}`);
  }
  const out: Record<string, string> = {};
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/(^|\s)#.*$/, '').trim();
    if (!line) return;
    const m = /^([A-Za-z0-9_.-]+)\s*:\s*(.*)$/.exec(line);
    if (!m) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `${file}:${i + 1}: expected 'key: value', got '${raw.trim()}'`);
    out[m[1]] = m[2].replace(/^(['"])(.*)\1$/, '$2');
  });
  return out;
}

export function parseSetting(pair: string, acc: Record<string, string> = {}): Record<string, string> {
  const i = pair.indexOf('=');
  if (i <= 0) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `--set expects key=value, got '${pair}'`);
  acc[pair.slice(0, i).trim()] = pair.slice(i + 1).trim();
  return acc;
}
