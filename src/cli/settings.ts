/**
 * Server settings from the command line: a flat `key: value` config file (the form of Fluss's
 * server.yaml; `#` starts a comment) overlaid by `--set key=value` pairs and the shortcut flags.
 */
import fs from 'node:fs';
import { TributaryError } from '../common/errors.js';

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
