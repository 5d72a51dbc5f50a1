/**
 * A crash-safe MetadataStore for one node: the whole metadata tree in one JSON file.
 *
 * File `metadata.json`: `{"version": 1, "nodes": {"<path>": <value>, ...}, "counters": {"<name>": n}}`.
 * Every commit writes a new file next to it, fsyncs it, renames it over the old one and fsyncs the
 * directory, so a crash leaves either the old or the new tree, never a mix. Metadata is small
 * (databases, tables, schemas, partitions), so rewriting it whole keeps the format trivial to inspect.
 */
import fs from 'node:fs';
import path from 'node:path';
import { TributaryError } from '../../common/errors.js';
import { writeFileAtomic } from '../../common/files.js';
import type { MetadataOp, MetadataStore } from './metadata-store.js';

interface MetadataFile {
  version: 1;
  nodes: Record<string, unknown>;
  counters: Record<string, number>;
}

const FILE = 'metadata.json';

export class LocalMetadataStore implements MetadataStore {
  private nodes: Map<string, unknown>;
  private counters: Map<string, number>;
  /** Changes are applied and written one at a time, in order. */
  private writing: Promise<void> = Promise.resolve();

  private constructor(private readonly dir: string, file: MetadataFile) {
    this.nodes = new Map(Object.entries(file.nodes));
    this.counters = new Map(Object.entries(file.counters));
  }

  static async open(dir: string): Promise<LocalMetadataStore> {
    await fs.promises.mkdir(dir, { recursive: true });
    const file = path.join(dir, FILE);
    // A leftover temp file is an interrupted commit that never became visible: drop it.
    await fs.promises.rm(`${file}.tmp`, { force: true });
    let content: MetadataFile = { version: 1, nodes: {}, counters: {} };
    try {
      content = JSON.parse(await fs.promises.readFile(file, 'utf8')) as MetadataFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new TributaryError('STORAGE_EXCEPTION', `cannot read metadata file ${file}: ${(err as Error).message}`);
      }
    }
    return new LocalMetadataStore(dir, content);
  }

  get<T>(p: string): T | undefined {
    return this.nodes.get(p) as T | undefined;
  }

  children(p: string): string[] {
    const prefix = p.endsWith('/') ? p : `${p}/`;
    const names = new Set<string>();
    for (const key of this.nodes.keys()) {
      if (key.startsWith(prefix)) names.add(key.slice(prefix.length).split('/')[0]);
    }
    return [...names].sort();
  }

  commit(ops: MetadataOp[]): Promise<void> {
    return this.serially(async () => {
      const nodes = new Map(this.nodes);
      for (const o of ops) {
        if (o.op === 'put') nodes.set(o.path, o.value);
        else {
          nodes.delete(o.path);
          if (o.recursive) for (const key of [...nodes.keys()]) if (key.startsWith(`${o.path}/`)) nodes.delete(key);
        }
      }
      await this.persist(nodes, this.counters);
      this.nodes = nodes;
    });
  }

  nextId(counter: string, count = 1): Promise<number> {
    return this.serially(async () => {
      const counters = new Map(this.counters);
      const id = (counters.get(counter) ?? -1) + 1;
      // The counter holds the last value handed out.
      counters.set(counter, id + count - 1);
      await this.persist(this.nodes, counters);
      this.counters = counters;
      return id;
    });
  }

  async close(): Promise<void> {
    await this.writing;
  }

  /**
   * Runs changes one at a time: each starts from the state the previous one left and writes the
   * whole tree, so no change is built on a state another is still writing (which would drop that
   * change from the file, or hand out one counter value twice).
   */
  private serially<T>(change: () => Promise<T>): Promise<T> {
    const run = this.writing.then(change);
    this.writing = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private persist(nodes: Map<string, unknown>, counters: Map<string, number>): Promise<void> {
    const body: MetadataFile = { version: 1, nodes: Object.fromEntries(nodes), counters: Object.fromEntries(counters) };
    return writeFileAtomic(this.dir, FILE, JSON.stringify(body));
  }
}
