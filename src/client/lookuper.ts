/**
 * `Lookuper`: point lookups (by primary key) and prefix lookups (by bucket key) on a primary-key
 * table, reading the committed state.
 *
 *   const lookuper = table.newLookup().createLookuper();
 *   const row = await lookuper.lookup({ id: 1n });           // the row, or null
 *   const byUser = table.newLookup().lookupBy(['user_id']).createLookuper();
 *   const rows = await byUser.lookupAll({ user_id: 7n });     // every row with that bucket key
 *
 * Lookups issued in the same tick are batched: one Lookup (or PrefixLookup) request per server with
 * a list of keys per bucket.
 */
import { TributaryError, errorFromCode } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { Connection } from './connection.js';
import { KvEncoding } from './kv-encoding.js';
import { hasError } from './responses.js';

interface Pending {
  partitionId: number | undefined;
  bucket: number;
  key: Uint8Array;
  resolve: (values: Uint8Array[]) => void;
  reject: (err: unknown) => void;
}

const MAX_KEYS_PER_REQUEST = 4096;

export class Lookuper {
  private readonly encoding: KvEncoding;
  private queue: Pending[] = [];
  private scheduled = false;
  private readonly prefixColumns?: Set<string>;

  constructor(
    private readonly conn: Connection,
    private readonly table: TableInfo,
    /** Columns of a prefix lookup: the bucket key (plus partition keys); undefined for point lookups. */
    prefix?: string[],
  ) {
    this.encoding = new KvEncoding(table, conn.metadata);
    if (prefix) {
      const expected = new Set([...table.bucketKeys, ...table.partitionKeys]);
      if (prefix.length !== expected.size || !prefix.every((c) => expected.has(c))) {
        throw new TributaryError(
          'INVALID_ARGUMENT',
          `prefix lookups go by the bucket key plus partition keys (${[...expected].join(', ')}), got (${prefix.join(', ')})`,
        );
      }
      this.prefixColumns = expected;
    }
  }

  /** Point lookup: the row of a primary key or null. Prefix lookup: use `lookupAll`. */
  async lookup(key: Row): Promise<Row | null> {
    if (this.prefixColumns) throw new TributaryError('INVALID_ARGUMENT', 'this lookuper looks up by prefix: use lookupAll()');
    const values = await this.enqueue(key);
    return values.length > 0 ? (await this.encoding.decodeValues(values))[0] : null;
  }

  /** Prefix lookup: every row whose bucket key (and partition) equal `prefix`. */
  async lookupAll(prefix: Row): Promise<Row[]> {
    if (!this.prefixColumns) throw new TributaryError('INVALID_ARGUMENT', 'this lookuper looks up by primary key: use lookup()');
    return this.encoding.decodeValues(await this.enqueue(prefix));
  }

  private async enqueue(row: Row): Promise<Uint8Array[]> {
    const values = this.prefixColumns ? this.encoding.internalRow(row, this.prefixColumns) : this.encoding.keyRow(row);
    let partitionId: number | undefined;
    if (this.encoding.partitions) {
      const p = await this.conn.metadata.partition(this.table, this.encoding.partitions.nameOf(values));
      if (!p) return []; // no such partition: nothing stored under this key
      partitionId = p.partitionId;
    }
    const bucket = this.encoding.assigner.bucketOf(values);
    const key = this.prefixColumns ? this.encoding.bucketKeyEncoder.encode(values) : this.encoding.keyEncoder.encode(values);
    return new Promise((resolve, reject) => {
      this.queue.push({ partitionId, bucket, key, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.send());
      }
    });
  }

  private send(): void {
    this.scheduled = false;
    const pending = this.queue.splice(0, MAX_KEYS_PER_REQUEST);
    if (this.queue.length > 0) {
      this.scheduled = true;
      setImmediate(() => this.send());
    }
    const groups = new Map<string, Pending[]>();
    for (const p of pending) {
      const k = `${p.partitionId ?? '-'}/${p.bucket}`;
      const g = groups.get(k);
      if (g) g.push(p);
      else groups.set(k, [p]);
    }
    const entries = [...groups.values()];
    const bucketsReq = entries.map((g) => ({
      ...(g[0].partitionId !== undefined ? { partitionId: BigInt(g[0].partitionId) } : {}),
      bucketId: g[0].bucket,
      keys: g.map((p) => p.key),
    }));
    const tableId = BigInt(this.table.tableId);
    const fail = (err: unknown): void => pending.forEach((p) => p.reject(err));
    this.conn
      .server()
      .then(async (rpc) => {
        if (this.prefixColumns) {
          const resp = await rpc.request(ApiKeys.PrefixLookup, { tableId, bucketsReq });
          resp.bucketsResp.forEach((b, i) => {
            if (hasError(b)) entries[i].forEach((p) => p.reject(errorFromCode(b.errorCode!, b.errorMessage ?? 'lookup failed')));
            else entries[i].forEach((p, j) => p.resolve(b.valueLists[j]?.values ?? []));
          });
        } else {
          const resp = await rpc.request(ApiKeys.Lookup, { tableId, bucketsReq });
          resp.bucketsResp.forEach((b, i) => {
            if (hasError(b)) entries[i].forEach((p) => p.reject(errorFromCode(b.errorCode!, b.errorMessage ?? 'lookup failed')));
            else entries[i].forEach((p, j) => p.resolve(b.values[j]?.values ? [b.values[j].values!] : []));
          });
        }
      })
      .catch(fail);
  }
}
