/**
 * The MetadataStore of a cluster, on ZooKeeper.
 *
 * The active coordinator is the only writer, so the store loads the tree under `<root>/metadata`
 * once at open and serves `get` and `children` from memory. A commit becomes one ZooKeeper multi-op
 * transaction whose writes and deletes carry the version of each znode as the store last saw it: a
 * change made by anyone else in between fails the whole commit with COMMIT_FAILED instead of being
 * overwritten. The cache takes a commit only once ZooKeeper has acknowledged it.
 *
 * Znodes (root = `zookeeper.path.root`, `/tributary` by default), Fluss's layout where ours has the
 * same shape:
 *
 *   <root>/metadata/databases/<db>                                  database registration
 *   <root>/metadata/databases/<db>/tables/<table>                   table registration
 *   <root>/metadata/databases/<db>/tables/<table>/schemas/<id>      schema
 *   <root>/metadata/databases/<db>/tables/<table>/partitions/<name> partition registration
 *   <root>/metadata/databases/<db>/tables/<table>/lake              lake snapshot registration (Fluss keeps
 *                                                                   it by table id under /tabletservers)
 *   <root>/metadata/table_seqid, partition_seqid, writer_id         counters table_id, partition_id, writer_id
 *   <root>/metadata/<name>_seqid                                    any other counter (tiering_epoch_seqid)
 *
 * Any store path `/a/b` is the znode `<root>/metadata/a/b`; its data is the value as JSON (UTF-8).
 * A znode with no data holds no value: it is a parent made for a deeper path, created in the same
 * transaction as that path and deleted in the one that removes the last value below it, so a parent
 * exists exactly while it has a value or a value below it. A counter's data is the JSON number of
 * the last value it handed out (Fluss stores a binary long); `nextId` is a compare-and-set on it.
 * Top-level names ending in `_seqid`, and `writer_id`, are counters, not store paths.
 *
 * Opened with a leader's epoch fence (coordinator-election.ts), every transaction also checks the
 * epoch znode's version, so a deposed leader's commits and allocations fail with COMMIT_FAILED.
 *
 * Failures: a commit whose request passes ZooKeeper's 1 MB packet limit (`jute.maxbuffer`) fails with
 * INVALID_ARGUMENT before it is sent; a lost connection fails with NETWORK_EXCEPTION (retriable), and
 * since the commit may then have been applied, the store reloads the tree before its next change; an
 * expired session is reported by the `sessionExpired` event, after which every change fails.
 */
import { EventEmitter } from 'node:events';
import { TributaryError } from '../../common/errors.js';
import type { MetadataOp, MetadataStore } from './metadata-store.js';
import { type EpochFence, type ZooKeeperOp, ZooKeeperConflict, type ZooKeeperSession } from './zookeeper-session.js';

/** ZooKeeper's default `jute.maxbuffer`: the largest request a server reads. */
export const ZOOKEEPER_MAX_REQUEST_BYTES = 0xfffff;
/** Bytes of a multi-op request besides paths and data: headers, ACL, flags and versions, generously. */
const REQUEST_OVERHEAD_BYTES = 64;
const OP_OVERHEAD_BYTES = 64;

/** Counters named as Fluss names its id znodes; any other counter `c` lives at `c_seqid`. */
const FLUSS_COUNTERS: Record<string, string> = { table_id: 'table_seqid', partition_id: 'partition_seqid', writer_id: 'writer_id' };
const counterZnodeName = (counter: string): string => FLUSS_COUNTERS[counter] ?? `${counter}_seqid`;
const isCounterZnodeName = (name: string): boolean => name.endsWith('_seqid') || name === 'writer_id';

interface CachedNode {
  /** The value's JSON, undefined for a parent with no value of its own. */
  json: string | undefined;
  value: unknown;
  version: number;
}

interface CachedCounter {
  last: number;
  version: number;
}

const depth = (p: string): number => p.split('/').length;

function checkPath(p: string): void {
  if (!/^(\/[^/]+)+$/.test(p)) throw new TributaryError('INVALID_ARGUMENT', `metadata path '${p}' must be absolute, without empty segments or a trailing slash`);
  const top = p.split('/')[1];
  if (isCounterZnodeName(top)) throw new TributaryError('INVALID_ARGUMENT', `metadata path '${p}' is taken by a counter's znode`);
}

function encode(p: string, value: unknown): string {
  const json = JSON.stringify(value) as string | undefined;
  if (json === undefined) throw new TributaryError('INVALID_ARGUMENT', `metadata at ${p} has no JSON value`);
  return json;
}

export class ZooKeeperMetadataStore extends EventEmitter<{ sessionExpired: [] }> implements MetadataStore {
  private nodes = new Map<string, CachedNode>();
  private readonly counters = new Map<string, CachedCounter>();
  /** Set when a change's outcome is unknown (the connection dropped before the answer). */
  private stale = false;
  /** Changes run one at a time, each on the tree the previous one left. */
  private writing: Promise<void> = Promise.resolve();
  private readonly onExpired = (): void => void this.emit('sessionExpired');

  private constructor(
    private readonly session: ZooKeeperSession,
    /** `<root>/metadata`: the znode of store path `/`. */
    private readonly base: string,
    private readonly fence: EpochFence | undefined,
  ) {
    super();
    session.on('expired', this.onExpired);
  }

  /**
   * Opens the store under `root` on a connected session (which the caller keeps and closes), loading
   * the tree; with `fence`, every change also checks that no newer leader has been elected.
   */
  static async open(session: ZooKeeperSession, root: string, fence?: EpochFence): Promise<ZooKeeperMetadataStore> {
    const store = new ZooKeeperMetadataStore(session, `${root}/metadata`, fence);
    try {
      await session.ensure([root, store.base]);
      store.nodes = await store.load();
      return store;
    } catch (err) {
      await store.close();
      throw err;
    }
  }

  get<T>(p: string): T | undefined {
    return this.nodes.get(p)?.value as T | undefined;
  }

  children(p: string): string[] {
    const prefix = p.endsWith('/') ? p : `${p}/`;
    const names = new Set<string>();
    for (const [key, node] of this.nodes) {
      if (node.json !== undefined && key.startsWith(prefix)) names.add(key.slice(prefix.length).split('/')[0]);
    }
    return [...names].sort();
  }

  commit(ops: MetadataOp[]): Promise<void> {
    return this.serially(async () => {
      const target = this.apply(ops);
      const { request, bytes } = this.diff(target, new Set(ops.filter((o) => o.op === 'put').map((o) => o.path)));
      if (bytes > ZOOKEEPER_MAX_REQUEST_BYTES) {
        const sized = request.map((op) => ({ path: this.storePath(op.path), size: 'data' in op ? op.data.length : 0 }));
        const largest = sized.reduce((a, b) => (b.size > a.size ? b : a));
        throw new TributaryError(
          'INVALID_ARGUMENT',
          `a metadata commit of about ${bytes} bytes does not fit ZooKeeper's request limit of ${ZOOKEEPER_MAX_REQUEST_BYTES} bytes (jute.maxbuffer); its largest value is ${largest.path} (${largest.size} bytes)`,
        );
      }
      if (request.length === 0) return;
      try {
        await this.session.multi(this.fenced(request));
      } catch (err) {
        throw this.failed(err, 'commit');
      }
      const nodes = new Map(this.nodes);
      for (const op of request) {
        const p = this.storePath(op.path);
        if (op.type === 'delete') nodes.delete(p);
        else if (op.type === 'create') nodes.set(p, this.cached(target.get(p), 0));
        else if (op.type === 'set') nodes.set(p, this.cached(target.get(p), op.version + 1));
      }
      this.nodes = nodes;
    });
  }

  nextId(counter: string, count = 1): Promise<number> {
    return this.serially(async () => {
      const znode = `${this.base}/${counterZnodeName(counter)}`;
      for (;;) {
        try {
          const current = this.counters.get(counter) ?? (await this.readCounter(znode));
          const last = (current?.last ?? -1) + count;
          const data = Buffer.from(JSON.stringify(last));
          await this.session.multi(this.fenced([current ? { type: 'set', path: znode, data, version: current.version } : { type: 'create', path: znode, data }]));
          this.counters.set(counter, { last, version: current ? current.version + 1 : 0 });
          return last - count + 1;
        } catch (err) {
          // Another store took values first (or the answer was lost): read the counter again.
          this.counters.delete(counter);
          if (!(err instanceof ZooKeeperConflict) || err.path === this.fence?.znode) throw this.failed(err, `allocate from counter '${counter}'`);
        }
      }
    });
  }

  async close(): Promise<void> {
    await this.writing;
    this.session.off('expired', this.onExpired);
  }

  /** The store paths and their JSON (undefined for parents) after `ops`, with the semantics of the local store. */
  private apply(ops: MetadataOp[]): Map<string, string | undefined> {
    const values = new Map<string, string>();
    for (const [p, node] of this.nodes) if (node.json !== undefined) values.set(p, node.json);
    for (const o of ops) {
      checkPath(o.path);
      if (o.op === 'put') values.set(o.path, encode(o.path, o.value));
      else {
        values.delete(o.path);
        if (o.recursive) for (const key of [...values.keys()]) if (key.startsWith(`${o.path}/`)) values.delete(key);
      }
    }
    const target = new Map<string, string | undefined>(values);
    for (const p of values.keys()) {
      for (let parent = p.slice(0, p.lastIndexOf('/')); parent !== ''; parent = parent.slice(0, parent.lastIndexOf('/'))) {
        if (!target.has(parent)) target.set(parent, undefined);
      }
    }
    return target;
  }

  /**
   * The transaction taking the cached tree to `target`: deletes deepest first, creates shallowest
   * first, writes of changed or `put` nodes; each delete and write with the cached version.
   */
  private diff(target: Map<string, string | undefined>, put: Set<string>): { request: ZooKeeperOp[]; bytes: number } {
    const deletes: ZooKeeperOp[] = [];
    const creates: ZooKeeperOp[] = [];
    const sets: ZooKeeperOp[] = [];
    for (const [p, node] of this.nodes) {
      if (!target.has(p)) deletes.push({ type: 'delete', path: this.znode(p), version: node.version });
    }
    for (const [p, json] of target) {
      const data = Buffer.from(json ?? '');
      const node = this.nodes.get(p);
      if (!node) creates.push({ type: 'create', path: this.znode(p), data });
      else if (node.json !== json || put.has(p)) sets.push({ type: 'set', path: this.znode(p), data, version: node.version });
    }
    deletes.sort((a, b) => depth(b.path) - depth(a.path));
    creates.sort((a, b) => depth(a.path) - depth(b.path));
    const request = [...deletes, ...creates, ...sets];
    let bytes = REQUEST_OVERHEAD_BYTES;
    for (const op of request) bytes += OP_OVERHEAD_BYTES + Buffer.byteLength(op.path) + ('data' in op ? op.data.length : 0);
    return { request, bytes };
  }

  private async load(): Promise<Map<string, CachedNode>> {
    const nodes = new Map<string, CachedNode>();
    const walk = async (p: string): Promise<void> => {
      const names = await this.session.children(this.znode(p));
      await Promise.all(
        names
          .filter((name) => p !== '/' || !isCounterZnodeName(name))
          .map(async (name) => {
            const child = p === '/' ? `/${name}` : `${p}/${name}`;
            const znode = await this.session.get(this.znode(child));
            if (!znode) return;
            nodes.set(child, this.cached(znode.data.length === 0 ? undefined : znode.data.toString('utf8'), znode.version));
            await walk(child);
          }),
      );
    };
    await walk('/');
    return nodes;
  }

  private async readCounter(znode: string): Promise<CachedCounter | undefined> {
    const node = await this.session.get(znode);
    return node && { last: JSON.parse(node.data.toString('utf8')) as number, version: node.version };
  }

  private fenced(request: ZooKeeperOp[]): ZooKeeperOp[] {
    return this.fence ? [{ type: 'check', path: this.fence.znode, version: this.fence.version }, ...request] : request;
  }

  /** Maps a failed request to the error the caller sees; a conflict means another writer changed the tree. */
  private failed(err: unknown, what: string): Error {
    if (err instanceof ZooKeeperConflict && err.path === this.fence?.znode) {
      return new TributaryError('COMMIT_FAILED', `cannot ${what}: a newer leader has been elected (${err.path} moved past version ${this.fence.version}); nothing of it was applied`, {
        cause: err,
      });
    }
    if (err instanceof ZooKeeperConflict) {
      return new TributaryError(
        'COMMIT_FAILED',
        `cannot ${what}: ${this.storePath(err.path)} was changed by another writer (ZooKeeper ${err.code} at ${err.path}); nothing of it was applied`,
        { cause: err },
      );
    }
    if (err instanceof TributaryError && err.errorName === 'NETWORK_EXCEPTION') this.stale = true;
    return err as Error;
  }

  private serially<T>(change: () => Promise<T>): Promise<T> {
    const run = this.writing.then(async () => {
      if (this.stale) {
        this.nodes = await this.load();
        this.counters.clear();
        this.stale = false;
      }
      return change();
    });
    this.writing = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private cached(json: string | undefined, version: number): CachedNode {
    return { json, value: json === undefined ? undefined : JSON.parse(json), version };
  }

  private znode(p: string): string {
    return p === '/' ? this.base : `${this.base}${p}`;
  }

  private storePath(znode: string): string {
    return znode.startsWith(`${this.base}/`) ? znode.slice(this.base.length) : znode;
  }
}
