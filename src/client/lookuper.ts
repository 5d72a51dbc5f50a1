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
 * request with a list of keys per bucket. Many keys issued at once go out in requests of
 * REQUEST_KEYS keys as soon as each is full, so the server answers the first while later keys are
 * still being issued, and the answers of one request are decoded while the server works on the next.
 *
 * Requests are encoded here, each key written once straight into its bucket's part of the request
 * (proto/tributary.proto, standard protobuf wire format: tag = field << 3 | wire type, 0 varint,
 * 2 length-delimited):
 *   LookupRequest, PrefixLookupRequest := 1 table_id (varint), 2 buckets_req (message, repeated)
 *   PbLookupReqForBucket               := 1 partition_id (varint, when partitioned), 2 bucket_id
 *                                         (varint), 3 keys (bytes, repeated)
 */
import { TributaryError, errorFromCode } from '../common/errors.js';
import type { TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { Connection } from './connection.js';
import { KvEncoding } from './kv-encoding.js';
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

const TAG_TABLE_ID = (1 << 3) | 0;
const TAG_BUCKETS_REQ = (2 << 3) | 2;
const TAG_PARTITION_ID = (1 << 3) | 0;
const TAG_BUCKET_ID = (2 << 3) | 0;
const TAG_KEY = (3 << 3) | 2;
/** Most bytes of a tag and a varint32 length. */
const KEY_FIELD_OVERHEAD = 6;

/** Writes a non-negative safe integer as a varint at `pos`; returns the end. */
function writeVarint(buf: Uint8Array, pos: number, value: number): number {
  while (value > 0x7f) {
    buf[pos++] = (value % 0x80) | 0x80;
    value = Math.floor(value / 0x80);
  }
  buf[pos++] = value;
  return pos;
}

function varintSize(value: number): number {
  let size = 1;
  for (; value > 0x7f; value = Math.floor(value / 0x80)) size++;
  return size;
}

/** The `keys` fields of one PbLookupReqForBucket, each key copied in as it is added. */
export class KeyFields {
  private buf = Buffer.allocUnsafe(1024);
  private used = 0;

  add(key: Uint8Array): void {
    if (this.used + KEY_FIELD_OVERHEAD + key.length > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.used + KEY_FIELD_OVERHEAD + key.length));
      this.buf.copy(grown, 0, 0, this.used);
      this.buf = grown;
    }
    this.buf[this.used] = TAG_KEY;
    const at = writeVarint(this.buf, this.used + 1, key.length);
    this.buf.set(key, at);
    this.used = at + key.length;
  }

  get bytes(): Uint8Array {
    return this.buf.subarray(0, this.used);
  }
}

/** A LookupRequest (or PrefixLookupRequest) as parts written one after the other. */
export function encodeLookupRequest(tableId: number, buckets: readonly { partitionId?: number; bucket: number; keys: KeyFields }[]): Uint8Array[] {
  // Tags and varints of the table id, then per bucket of its message head: at most 10 bytes each.
  const head = Buffer.allocUnsafe(11 + buckets.length * 33);
  head[0] = TAG_TABLE_ID;
  let pos = writeVarint(head, 1, tableId);
  const parts: Uint8Array[] = [];
  let start = 0;
  for (const b of buckets) {
    const keys = b.keys.bytes;
    const partition = b.partitionId === undefined ? 0 : 1 + varintSize(b.partitionId);
    head[pos++] = TAG_BUCKETS_REQ;
    pos = writeVarint(head, pos, partition + 1 + varintSize(b.bucket) + keys.length);
    if (b.partitionId !== undefined) {
      head[pos++] = TAG_PARTITION_ID;
      pos = writeVarint(head, pos, b.partitionId);
    }
    head[pos++] = TAG_BUCKET_ID;
    pos = writeVarint(head, pos, b.bucket);
    parts.push(head.subarray(start, pos), keys);
    start = pos;
  }
  if (start === 0) parts.push(head.subarray(0, pos));
  return parts;
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

  /** Sends the gathered keys as one request and settles their lookups when it is answered. */
  private send(): void {
    const entries = [...this.gathering.values()];
    this.gathering = new Map();
    this.gathered = 0;
    const body = encodeLookupRequest(this.table.tableId, entries);
    const fail = (err: unknown): void => entries.forEach((g) => g.waiters.forEach((w) => w.reject(err)));
    const failBucket = (g: BucketKeys, b: { errorCode?: number; errorMessage?: string }): void => {
      const err = errorFromCode(b.errorCode!, b.errorMessage ?? 'lookup failed');
      g.waiters.forEach((w) => w.reject(err));
    };
    this.conn
      .server()
      .then(async (rpc) => {
        if (this.prefixColumns) {
          const resp = await rpc.requestEncoded(ApiKeys.PrefixLookup, () => body);
          resp.bucketsResp.forEach((b, i) => {
            if (hasError(b)) failBucket(entries[i], b);
            else entries[i].waiters.forEach((w, j) => this.answerAll(w, b.valueLists[j]?.values ?? NOTHING));
          });
        } else {
          const resp = await rpc.requestEncoded(ApiKeys.Lookup, () => body);
          resp.bucketsResp.forEach((b, i) => {
            if (hasError(b)) failBucket(entries[i], b);
            else {
              const { waiters } = entries[i];
              for (let j = 0; j < waiters.length; j++) this.answer(waiters[j], b.values[j]?.values);
            }
          });
        }
      })
      .catch(fail);
  }
}
