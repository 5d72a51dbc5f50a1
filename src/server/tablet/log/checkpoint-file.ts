/**
 * Text checkpoint files of a bucket dir (`recovery-point-checkpoint`, `leader-epoch-checkpoint`),
 * in Kafka's layout so that operators recognise them:
 *
 *   <version>\n        0
 *   <count>\n
 *   <entry>\n          × count; an entry is decimal integers separated by one space
 *
 * Files are replaced atomically (temp file, fsync, rename, fsync of the dir).
 */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from '../../../common/errors.js';
import { writeFileAtomic } from '../../../common/files.js';
import { storageError } from './storage-error.js';

const VERSION = 0;

export async function writeCheckpoint(dir: string, name: string, entries: readonly (readonly bigint[])[]): Promise<void> {
  const lines = [String(VERSION), String(entries.length), ...entries.map((e) => e.join(' '))];
  await writeFileAtomic(dir, name, `${lines.join('\n')}\n`);
}

/**
 * The entries of a checkpoint file, each with `fields` integers; undefined when the file does not
 * exist. A malformed file is an error, which callers report before rebuilding from the log.
 */
export async function readCheckpoint(dir: string, name: string, fields: number): Promise<bigint[][] | undefined> {
  const file = path.join(dir, name);
  let text: string;
  try {
    text = await fs.promises.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw storageError(`cannot read ${file}`, err);
  }
  const malformed = () => new TributaryError('LOG_STORAGE_EXCEPTION', `malformed checkpoint file ${file}`);
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines[0] !== String(VERSION) || !/^\d+$/.test(lines[1] ?? '') || lines.length !== 2 + Number(lines[1])) throw malformed();
  return lines.slice(2).map((line) => {
    const parts = line.split(' ');
    if (parts.length !== fields || !parts.every((p) => /^-?\d+$/.test(p))) throw malformed();
    return parts.map((p) => BigInt(p));
  });
}
