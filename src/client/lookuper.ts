/**
 * `Lookuper`: point lookups (by primary key) and prefix lookups (by bucket key) on a primary-key
 * table, reading the committed state.
 *
 *   const lookuper = table.newLookup().createLookuper();
 *   const row = await lookuper.lookup({ id: 1n });           // the row, or null
 *   const byUser = table.newLookup().lookupBy(['user_id']).createLookuper();
 *   const rows = await byUser.lookupAll({ user_id: 7n });     // every row with that bucket key
 *
 * Lookups are batched: the keys issued in the same tick go out as one Lookup (or PrefixLookup)
 * request per leader of their buckets, with a list of keys per bucket (retried at a new leader,
 * leader-requests.ts). Many keys issued at once go out in requests of
 * REQUEST_KEYS keys as soon as each is full, so the server answers the first while later keys are
 * still being issued, and the answers of one request are decoded while the server works on the next.
 *
 * Requests and Lookup responses are encoded by hand (src/rpc/lookup-messages.ts): each key is
 * written once straight into its bucket's part of the request, and each value of a response is
 * read in place and decoded into its row.
 */
import { ErrorCodes, TributaryError, errorFromCode } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { decodeLookupResponse, encodeLookupRequest, KeyFields } from '../rpc/lookup-messages.js';
import type { ConnectionCore } from './connection-core.js';
import { KvEncoding } from './kv-encoding.js';
import { requestLeaders } from './leader-requests.js';
import { hasError } from './responses.js';

/** The keys of one bucket in the request being gathered, and who waits for each. */
interface BucketKeys {
  partitionId: number | undefined;
  bucket: number;
  keys: KeyFields;
  waiters: Waiter[];
}

interface Waiter {
  resolve: (result: Row | null | Row[]) => void;
  reject: (err: unknown) => void;
}

/** Keys per request: small enough that client and server overlap, large enough to share a round trip. */
const REQUEST_KEYS = 256;
const NOTHING: readonly Uint8Array[] = [];

export class Lookuper {
  private readonly encoding: KvEncoding;
  /** The request being gathered, by bucket (and partition). */
  private gathering = new Map<number | string, BucketKeys>();
  private gathered = 0;
  private scheduled = false;
  private readonly prefixColumns?: Set<string>;

  constructor(
    private readonly conn: ConnectionCore,
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
  lookup(key: Row): Promise<Row | null> {
    if (this.prefixColumns) return Promise.reject(new TributaryError('INVALID_ARGUMENT', 'this lookuper looks up by prefix: use lookupAll()'));
    return this.enqueue(key) as Promise<Row | null>;
  }

  /** Prefix lookup: every row whose bucket key (and partition) equal `prefix`. */
  lookupAll(prefix: Row): Promise<Row[]> {
    if (!this.prefixColumns) return Promise.reject(new TributaryError('INVALID_ARGUMENT', 'this lookuper looks up by primary key: use lookup()'));
    return this.enqueue(prefix) as Promise<Row[]>;
  }

  /** Encodes the key of `row` and queues it. */
  private enqueue(row: Row): Promise<Row | null | Row[]> {
    let values: unknown[];
    try {
      values = this.prefixColumns ? this.encoding.internalRow(row, this.prefixColumns) : this.encoding.keyRow(row);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = { resolve, reject };
      if (!this.encoding.partitions) {
        this.add(undefined, values, waiter);
        return;
      }
      this.conn.metadata.partition(this.table, this.encoding.partitions.nameOf(values)).then((p) => {
        // No such partition: nothing is stored under this key.
        if (p) this.add(p.partitionId, values, waiter);
        else if (this.prefixColumns) waiter.resolve([]);
        else waiter.resolve(null);
      }, reject);
    });
  }

  /** Settles a prefix lookup with the values found. */
  private answerAll(waiter: Waiter, values: readonly Uint8Array[]): void {
    this.encoding.decodeValues(values).then(waiter.resolve, waiter.reject);
  }

  /** Settles a point lookup with the value found: decoded at once, unless its schema must be fetched first. */
  private answer(waiter: Waiter, value: Uint8Array | undefined): void {
    if (value === undefined) waiter.resolve(null);
    else if (this.encoding.decodesNow(value)) waiter.resolve(this.encoding.decodeValue(value));
    else this.encoding.decodeValues([value]).then((rows) => waiter.resolve(rows[0]), waiter.reject);
  }

  private add(partitionId: number | undefined, values: unknown[], waiter: Waiter): void {
    let key: Uint8Array;
    let bucket: number;
    if (this.prefixColumns) {
      key = this.encoding.bucketKeyEncoder.encodeView(values);
      bucket = this.encoding.assigner.bucketOf(values);
    } else {
      key = this.encoding.keyEncoder.encodeView(values);
      bucket = this.encoding.bucketOfKey(values, key);
    }
    const target = partitionId === undefined ? bucket : `${partitionId}/${bucket}`;
    let g = this.gathering.get(target);
    if (!g) {
      g = { partitionId, bucket, keys: new KeyFields(), waiters: [] };
      this.gathering.set(target, g);
    }
    g.keys.add(key);
    g.waiters.push(waiter);
    if (++this.gathered >= REQUEST_KEYS) this.send();
    else if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        if (this.gathered > 0) this.send();
      });
    }
  }

  /** Sends the gathered keys, one request per leader of their buckets, and settles their lookups when answered. */
  private send(): void {
    const entries = [...this.gathering.values()];
    this.gathering = new Map();
    this.gathered = 0;
    const fail = (err: unknown): void => entries.forEach((g) => g.waiters.forEach((w) => w.reject(err)));
    const failBucket = (g: BucketKeys, b: { errorCode?: number; errorMessage?: string }): void => {
      const err = errorFromCode(b.errorCode!, b.errorMessage ?? 'lookup failed');
      g.waiters.forEach((w) => w.reject(err));
    };
    const tableId = this.table.tableId;
    if (this.prefixColumns) {
      requestLeaders(this.conn, this.table, entries, async (rpc, group) => (await rpc.requestEncoded(ApiKeys.PrefixLookup, () => encodeLookupRequest(tableId, group))).bucketsResp)
        .then((answers) =>
          answers.forEach((b, i) => {
            if (hasError(b)) failBucket(entries[i], b);
            else entries[i].waiters.forEach((w, j) => this.answerAll(w, b.valueLists[j]?.values ?? NOTHING));
          }),
        )
        .catch(fail);
      return;
    }
    requestLeaders(this.conn, this.table, entries, async (rpc, group) => decodeLookupResponse(await rpc.requestRaw(ApiKeys.Lookup, () => encodeLookupRequest(tableId, group))))
      .then((answers) =>
        answers.forEach((b, i) => {
          const { waiters } = entries[i];
          if (hasError(b)) failBucket(entries[i], b);
          else if (b.values.length !== waiters.length) failBucket(entries[i], { errorCode: ErrorCodes.CORRUPT_MESSAGE, errorMessage: `a Lookup response holds ${b.values.length} values for ${waiters.length} keys` });
          else for (let j = 0; j < waiters.length; j++) this.answer(waiters[j], b.values[j]);
        }),
      )
      .catch(fail);
  }
}
