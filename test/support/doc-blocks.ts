/**
 * The fenced code blocks of the project's doc pages, so that tests run the examples as the pages
 * show them: a change to an example is a change to what is tested.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface CodeBlock {
  /** The info string after the opening fence (`ts`, `sh`, `sql`, …). */
  lang: string;
  text: string;
  /** Where it is, `docs/client.md:24` (its opening fence), for messages. */
  where: string;
  /** The page's line number of the block's first line. */
  line: number;
}

/** The blocks of `doc` (a path from the repository root) in page order, of one language if given. */
export function codeBlocks(doc: string, lang?: string): CodeBlock[] {
  const lines = fs.readFileSync(path.join(ROOT, doc), 'utf8').split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length && !lines[i].startsWith('```'); i++) body.push(lines[i]);
    if (lang === undefined || open[1] === lang) blocks.push({ lang: open[1], text: body.join('\n') + '\n', where: `${doc}:${start + 1}`, line: start + 2 });
  }
  return blocks;
}

/** The examples talk to a server at the default addresses; tests point them at theirs (ephemeral ports). */
export function atServer(text: string, server: { bootstrap: string; http: string }): string {
  return text.replaceAll('127.0.0.1:9123', server.bootstrap).replaceAll('127.0.0.1:9124', server.http);
}
