/**
 * `LogScanner`: reads the log of subscribed buckets as a stream of records.
 *
 *   const scanner = table.newScan().project(['id', 'amount']).createLogScanner();
 *   await scanner.subscribe(0, 'earliest');
 *   for await (const r of scanner) console.log(r.offset, r.row);
 *
 * The scanner keeps one FetchLog in flight per leader of the subscribed buckets (long poll: the
 * server holds it until `client.scanner.log.fetch.min-bytes` arrive or `…wait-max-time` passes); a
 * poll returns once one of them is answered (or its time is up) while the others go on. It checks
 * every batch's CRC, decodes the projected Arrow payload and advances the bucket's position. Positions
 * belong to the application: there are no consumer groups or committed offsets. While a server is
 * unreachable or a bucket's leader moves, polls return what the other buckets have (or nothing)
 * and the scanner asks again, at the new leader, until failures have lasted
 * `client.request-timeout`: then the poll rejects with the last error.
 *
 * Rows come in the scanner's schema (`schema`, `schemaId`), at first the table's when the scanner
 * was made: a batch written with another schema id (before or after an ADD COLUMN) is decoded with
 * that schema, fetched once, and its columns are matched by field id; columns it lacks read as null
 * (batch-evolution.ts). A scanner without a projection that meets a batch of a newer schema id
 * takes that schema as its own: the rows and batches it hands out from then on have the added
 * columns (null in rows written before them), so a reader started before an ALTER TABLE … ADD
 * COLUMN never drops the new values. A caller that prints columns compares `schemaId` after each
 * poll: every row and batch a poll returns is in the schema the scanner has after it. Such a
 * scanner reads the lake in the table's latest schema (the lake table has every column). A scanner
 * with a projection keeps its columns.
 *
 * Reading from the past: on a lake-enabled table, a subscription whose offset is below the log
 * start (retention deleted those segments once the lake held them) first reads the bucket's rows
 * from the lake snapshot the coordinator registered, from that offset up to the snapshot's end
 * offset for the bucket, then continues in the log there: no gap, no repeat, offsets kept
 * (lake-backfill.ts). `earliest` then means the earliest row in lake or log, and a timestamp
 * before the log start reads the lake from its first row committed at or after it. A
 * primary-key table's lake holds state, not history: its rows come as +I, one per key.
 * `Scan.logOnly()` turns this off: such offsets then fail with LOG_OFFSET_OUT_OF_RANGE_EXCEPTION.
 */
import type * as arrow from 'apache-arrow';
import { type ChangeType, changeTypeOf } from '../common/change-type.js';
import { asTributaryError, TributaryError } from '../common/errors.js';
import type { Schema, TableInfo } from '../common/schema.js';
import type { Row } from '../common/values.js';
import { decodeArrowPayload, recordBatchRows } from '../record/arrow-payload.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { type BatchLayout, batchLayout, evolvedBatch, inReaderSchema } from '../record/batch-evolution.js';
import { splitChangelogPayload } from '../record/changelog.js';
import { logBatchPayload, readLogBatchHeader, splitLogBatches } from '../record/log-batch.js';
import { ApiKeys } from '../rpc/api-keys.js';
import type { PbFetchLogRespForBucket } from '../rpc/gen/tributary_pb.js';
import { Admin, type OffsetSpec } from './admin.js';
import type { ConnectionCore } from './connection-core.js';
import { LakeBackfill, type LakePart } from './lake-backfill.js';
import { type Outcome, outcomeError, retriableAtLeader, retryBackoffMs } from './leader-requests.js';
import type { ScanBatch } from './scan-batch.js';

export interface ScanRecord {
  bucket: number;
  /** Partition name, for partitioned tables. */
  partition?: string;
  offset: bigint;
  /** Commit timestamp of the record's batch, ms since epoch (server append time). */
  timestamp: number;
  changeType: ChangeType;
  row: Row;
}

/** A bucket to subscribe to: its number, or partition name and number for partitioned tables. */
export type BucketRef = number | { partition: string; bucket: number };

interface Subscription {
  bucket: number;
  partition?: { name: string; id: number };
  offset: bigint;
  /**
   * On lake-enabled tables, how an `earliest` or timestamp subscription started while `offset`
   * stands in for it, until the log first answers: where to go when neither lake nor log holds it.
   */
  start?: OffsetSpec;
  /** A timestamp subscription that starts in the lake: the lake part starts at its first row committed at or after it. */
  startTimestampMs?: number;
  /** The lake rows read before the log, from `offset` up to `lake.endOffset`. */
  lake?: LakePart;
  /** The bucket's high watermark, as the last fetch that reached it reported it. */
  highWatermark?: bigint;
}

/** How positions() and highWatermarks() name a bucket: `<partition>/<bucket>` or `<bucket>`. */
export const bucketLabel = (partition: string | undefined, bucket: number): string => (partition !== undefined ? `${partition}/${bucket}` : String(bucket));

export class LogScanner implements AsyncIterable<ScanRecord> {
  private readonly subscriptions = new Map<string, Subscription>();
  private buffered: ScanBatch[] = [];
  /** Rows of the head batch of `buffered` already handed out by `poll`. */
  private headRows?: { next: number };
  private projectedSchema: Schema;
  /** The table's schema id the rows handed out are in (see the header). */
  private readerSchemaId: number;
  /** The Arrow schema of the rows handed out: the projection of the scanner's schema. */
  private decodeSchema: arrow.Schema;
  /** How batches of each schema id decode, once that schema is known. */
  private readonly layouts = new Map<number, BatchLayout>();
  /** Reads offsets below the log start from the lake; absent for tables without a lake and log-only scanners. */
  private readonly lake?: LakeBackfill;
  private closed = false;
  /** Since when fetches fail with retriable errors, and how many times in a row. */
  private failing?: { since: number; attempts: number };
  /** FetchLogs in flight, at most one per leader, and the subscriptions they ask for. */
  private readonly fetches = new Map<number, Promise<void>>();
  private readonly fetching = new Set<Subscription>();
  /** The answers of fetches, read one after the other. */
  private reading: Promise<void> = Promise.resolve();
  /** What reading an answer failed with since the last poll looked: a retriable error (a bucket's leader moved) or one that ends the scan. */
  private fetchFailure?: { err: TributaryError; retriable: boolean };

  constructor(
    private readonly conn: ConnectionCore,
    private readonly table: TableInfo,
    private readonly projection: number[] | undefined,
    options: { logOnly?: boolean } = {},
  ) {
    const columns = projection ? projection.map((i) => table.schema.columns[i]) : table.schema.columns;
    this.projectedSchema = { columns, highestFieldId: table.schema.highestFieldId };
    this.readerSchemaId = table.schemaId;
    this.decodeSchema = toArrowSchema(table.schema, projection);
    this.layouts.set(table.schemaId, { decodeSchema: this.decodeSchema });
    if (!options.logOnly && LakeBackfill.enabledFor(table)) this.lake = new LakeBackfill(new Admin(conn), table, () => this.decodeSchema);
  }

  /** The columns of the rows (and batches) the scanner hands out now: its projection of `schemaId`. */
  get schema(): Schema {
    return this.projectedSchema;
  }

  /** The schema id of the table the scanner reads in: newer after it met an ADD COLUMN, unless projected. */
  get schemaId(): number {
    return this.readerSchemaId;
  }

  /** Starts reading `ref` from an offset, or from the earliest/latest offset, or from a timestamp. */
  async subscribe(ref: BucketRef, from: bigint | OffsetSpec = 'earliest'): Promise<void> {
    const bucket = typeof ref === 'number' ? ref : ref.bucket;
    if (!Number.isInteger(bucket) || bucket < 0 || bucket >= this.table.bucketCount) {
      throw new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `bucket ${bucket} does not exist: the table has ${this.table.bucketCount} bucket(s)`);
    }
    let partition: Subscription['partition'];
    if (this.table.partitionKeys.length > 0) {
      if (typeof ref === 'number') throw new TributaryError('PARTITION_NOT_EXISTS', 'the table is partitioned: subscribe to { partition, bucket }');
      const p = await this.conn.metadata.partition(this.table, ref.partition, true);
      if (!p) throw new TributaryError('PARTITION_NOT_EXISTS', `partition '${ref.partition}' does not exist`);
      partition = { name: p.partitionName, id: p.partitionId };
    } else if (typeof ref !== 'number') {
      throw new TributaryError('TABLE_NOT_PARTITIONED_EXCEPTION', 'the table is not partitioned: subscribe to a bucket number');
    }
    const sub: Subscription = { bucket, ...(partition ? { partition } : {}), offset: 0n };
    if (typeof from === 'bigint') sub.offset = from;
    else if (!this.lake || from === 'latest') sub.offset = await this.resolveOffset(bucket, partition?.name, from);
    else if (from === 'earliest') sub.start = from; // offset 0: below the log start, the lake answers
    else {
      // A time before the log start: read the lake from its first row committed at or after it.
      const [at, logStart] = await Promise.all([this.resolveOffset(bucket, partition?.name, from), this.resolveOffset(bucket, partition?.name, 'earliest')]);
      if (at > logStart || logStart === 0n) sub.offset = at;
      else Object.assign(sub, { start: from, startTimestampMs: from.timestamp instanceof Date ? from.timestamp.getTime() : from.timestamp });
    }
    this.subscriptions.set(key(partition?.id, bucket), sub);
  }

  unsubscribe(ref: BucketRef): void {
    const bucket = typeof ref === 'number' ? ref : ref.bucket;
    const sub = [...this.subscriptions.entries()].find(([, s]) => s.bucket === bucket && (typeof ref === 'number' || s.partition?.name === ref.partition));
    if (sub) this.subscriptions.delete(sub[0]);
    const keep = (r: ScanBatch): boolean => !(r.bucket === bucket && (typeof ref === 'number' || r.partition === ref.partition));
    if (this.buffered.length > 0 && !keep(this.buffered[0])) this.headRows = undefined;
    this.buffered = this.buffered.filter(keep);
  }

  /**
   * The offset of the next record `poll` will return, per subscribed bucket (`<partition>/<bucket>`
   * or `<bucket>`): where to subscribe again to resume without a gap or a repeat.
   */
  positions(): Map<string, bigint> {
    const next = new Map<string, bigint>();
    for (const s of this.subscriptions.values()) next.set(bucketLabel(s.partition?.name, s.bucket), s.offset);
    this.buffered.forEach((b, i) => {
      const k = bucketLabel(b.partition, b.bucket);
      const first = b.baseOffset + BigInt(i === 0 && this.headRows ? this.headRows.next : 0);
      const current = next.get(k);
      if (current !== undefined && first < current) next.set(k, first);
    });
    return next;
  }

  /**
   * Each subscribed bucket's high watermark as the last fetch that reached it reported it, named as
   * in positions(); a bucket not fetched from since it was subscribed is missing.
   */
  highWatermarks(): Map<string, bigint> {
    const out = new Map<string, bigint>();
    for (const s of this.subscriptions.values()) if (s.highWatermark !== undefined) out.set(bucketLabel(s.partition?.name, s.bucket), s.highWatermark);
    return out;
  }

  /** Records that arrived within `timeoutMs`, at most `client.scanner.log.max-poll-records`. */
  async poll(timeoutMs: number): Promise<ScanRecord[]> {
    const max = this.conn.options.int('client.scanner.log.max-poll-records');
    if (this.buffered.length === 0) await this.fill(timeoutMs);
    const out: ScanRecord[] = [];
    while (out.length < max && this.buffered.length > 0) {
      const head = this.buffered[0];
      const from = this.headRows?.next ?? 0;
      const to = Math.min(head.batch.numRows, from + max - out.length);
      // Only the rows handed out now become objects, so that they can die young.
      const rows = recordBatchRows(head.batch, this.projectedSchema, from, to);
      const { bucket, partition, baseOffset, timestamp, changeTypes } = head;
      for (let i = from; i < to; i++) {
        const offset = baseOffset + BigInt(i);
        const changeType = changeTypes ? changeTypeOf(changeTypes[i])! : '+A';
        const row = rows[i - from];
        out.push(partition !== undefined ? { bucket, partition, offset, timestamp, changeType, row } : { bucket, offset, timestamp, changeType, row });
      }
      if (to >= head.batch.numRows) {
        this.buffered.shift();
        this.headRows = undefined;
      } else {
        this.headRows = { next: to };
      }
    }
    return out;
  }

  /** Decoded batches that arrived within `timeoutMs`, without turning them into rows. */
  async pollBatches(timeoutMs: number): Promise<ScanBatch[]> {
    if (this.buffered.length === 0) await this.fill(timeoutMs);
    if (this.headRows) {
      // poll() handed out part of the head batch: keep only its remaining rows.
      const head = this.buffered[0];
      const from = this.headRows.next;
      this.buffered[0] = {
        ...head,
        baseOffset: head.baseOffset + BigInt(from),
        batch: head.batch.slice(from),
        ...(head.changeTypes ? { changeTypes: head.changeTypes.subarray(from) } : {}),
      };
      this.headRows = undefined;
    }
    return this.buffered.splice(0);
  }

  private async fill(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + Math.max(0, timeoutMs);
    while (this.buffered.length === 0 && !this.closed && this.subscriptions.size > 0) {
      const remaining = deadline - Date.now();
      let failure: TributaryError | undefined;
      try {
        await this.readLake();
        const wait = this.buffered.length > 0 ? 0 : Math.max(0, Math.min(remaining, this.conn.options.durationMs('client.scanner.log.fetch.wait-max-time')));
        if ([...this.subscriptions.values()].some((s) => !s.lake)) failure = await this.fetch(wait, deadline);
      } catch (err) {
        if (!(err instanceof TributaryError) || !err.retriable) throw err;
        failure = err;
      }
      if (failure) await this.backOff(failure, deadline);
      else this.failing = undefined;
      if (Date.now() >= deadline) break;
    }
  }

  /**
   * After a retriable failure (a server down, a bucket's leader moving): a pause before the next
   * fetch, within the poll's time; `err` is thrown once failures have lasted `client.request-timeout`.
   */
  private async backOff(err: TributaryError, deadline: number): Promise<void> {
    const now = Date.now();
    this.failing ??= { since: now, attempts: 0 };
    if (now - this.failing.since >= this.conn.options.durationMs('client.request-timeout')) throw err;
    if (this.buffered.length > 0) return;
    await new Promise((r) => setTimeout(r, Math.min(retryBackoffMs(++this.failing!.attempts), Math.max(deadline - now, 0))));
  }

  async *[Symbol.asyncIterator](): AsyncIterator<ScanRecord> {
    while (!this.closed) {
      for (const r of await this.poll(1000)) yield r;
    }
  }

  close(): void {
    this.closed = true;
  }

  private async resolveOffset(bucket: number, partition: string | undefined, spec: OffsetSpec): Promise<bigint> {
    const offsets = await new Admin(this.conn).listOffsets(this.table.path, [bucket], spec, partition);
    return offsets.get(bucket)!;
  }

  /**
   * Buffers the next lake rows of a subscription reading the lake (one file group, so that memory
   * holds one at a time); one that reaches its end goes on in the log.
   */
  private async readLake(): Promise<void> {
    for (const sub of [...this.subscriptions.values()]) {
      if (this.buffered.length > 0) return;
      if (!sub.lake) continue;
      const part = sub.lake;
      const batches = await part.next();
      if (this.subscriptions.get(key(sub.partition?.id, sub.bucket)) !== sub || sub.lake !== part) continue; // unsubscribed meanwhile
      if (!batches) {
        sub.offset = part.endOffset;
        delete sub.lake;
        continue;
      }
      for (const b of batches) this.buffered.push({ ...b, batch: inReaderSchema(b.batch, this.decodeSchema) });
      const last = batches[batches.length - 1];
      sub.offset = last.baseOffset + BigInt(last.batch.numRows);
    }
  }

  /**
   * A subscription's offset is below the log start: its lake part reads from there, else an
   * `earliest` or timestamp subscription goes to where the log starts now; else the offset is gone.
   */
  private async enterLake(sub: Subscription, outOfRange: Error): Promise<void> {
    // The lake has every column the table has, whatever schema id its rows were written with:
    // a scanner without a projection reads it in the table's latest schema.
    if (this.lake && this.projection === undefined) {
      const latest = await new Admin(this.conn).getTableSchema(this.table.path);
      if (latest.schemaId > this.readerSchemaId) await this.adoptSchema(latest.schemaId, latest.schema);
    }
    const part = await this.lake?.open(sub, sub.offset, sub.startTimestampMs);
    delete sub.startTimestampMs;
    if (part) {
      sub.lake = part;
    } else if (sub.start) {
      sub.offset = await this.resolveOffset(sub.bucket, sub.partition?.name, sub.start);
      delete sub.start;
    } else {
      throw outOfRange;
    }
  }

  /**
   * Sends a FetchLog to each leader of subscribed buckets that has none in flight, and waits until
   * one of the fetches in flight has been answered and read, or the poll's time is up: a leader
   * whose buckets have no new records does not hold up the others, its long poll goes on into the
   * next poll. Returns the error of a bucket whose leader must be found again (its position stays;
   * the next fetch asks the new leader), if any; throws one that ends the scan.
   */
  private async fetch(maxWaitMs: number, deadline: number): Promise<TributaryError | undefined> {
    const idle = [...this.subscriptions.values()].filter((sub) => !sub.lake && !this.fetching.has(sub));
    const leaders = await Promise.all(idle.map((sub) => this.conn.metadata.leaderOf(this.table, sub.partition?.id, sub.bucket).catch(asTributaryError)));
    const byLeader = new Map<number, Subscription[]>();
    let stale: TributaryError | undefined;
    for (const [i, leader] of leaders.entries()) {
      if (leader instanceof TributaryError) {
        if (!(await retriableAtLeader(this.conn, this.table, leader))) throw leader;
        stale = leader;
        continue;
      }
      // A leader with a fetch in flight: its buckets wait for that one to be answered.
      if (!this.fetches.has(leader)) byLeader.set(leader, [...(byLeader.get(leader) ?? []), idle[i]]);
    }
    for (const [leader, subs] of byLeader) this.startFetch(leader, subs, maxWaitMs);
    const inFlight = [...this.fetches.values()];
    if (inFlight.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      const remaining = deadline - Date.now();
      // A poll without time left still waits for the answer of what it sent (with no wait at the server).
      const timeUp = remaining > 0 ? [new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining)))] : [];
      await Promise.race([...inFlight, ...timeUp]);
      clearTimeout(timer);
    }
    const answered = this.fetchFailure;
    this.fetchFailure = undefined;
    if (answered && !answered.retriable) throw answered.err;
    return answered?.err ?? stale;
  }

  /** One FetchLog to tablet server `leader` for `subs`; its answer is read in turn with the others (readFetched). */
  private startFetch(leader: number, subs: Subscription[], maxWaitMs: number): void {
    const options = this.conn.options;
    for (const sub of subs) this.fetching.add(sub);
    const fetched = (async (): Promise<void> => {
      let outcomes: Outcome<PbFetchLogRespForBucket>[];
      try {
        const resp = await (await this.conn.tabletServer(leader)).request(ApiKeys.FetchLog, {
          followerServerId: -1,
          maxBytes: options.bytes('client.scanner.log.fetch.max-bytes'),
          minBytes: options.bytes('client.scanner.log.fetch.min-bytes'),
          maxWaitMs,
          tablesReq: [
            {
              tableId: BigInt(this.table.tableId),
              projectionPushdownEnabled: this.projection !== undefined,
              projectedFields: this.projection ?? [],
              bucketsReq: subs.map((sub) => ({
                ...(sub.partition ? { partitionId: BigInt(sub.partition.id) } : {}),
                bucketId: sub.bucket,
                fetchOffset: sub.offset,
                maxFetchBytes: options.bytes('client.scanner.log.fetch.max-bytes-for-bucket'),
              })),
            },
          ],
        });
        const answers = new Map((resp.tablesResp[0]?.bucketsResp ?? []).map((b) => [key(b.partitionId === undefined ? undefined : Number(b.partitionId), b.bucketId), b]));
        outcomes = subs.map((sub) => answers.get(key(sub.partition?.id, sub.bucket)) ?? new TributaryError('UNKNOWN_TABLE_OR_BUCKET_EXCEPTION', `no answer for bucket ${sub.bucket}`));
      } catch (err) {
        outcomes = subs.map(() => asTributaryError(err));
      }
      // Answers are read one at a time, in the order they come: a schema change must not interleave.
      const read = this.reading.then(() => this.readFetched(subs, outcomes));
      this.reading = read.catch(() => undefined);
      try {
        await read;
      } catch (err) {
        const e = asTributaryError(err);
        // An error that ends the scan wins over one that a retry gets past.
        if (!this.fetchFailure || (this.fetchFailure.retriable && !e.retriable)) this.fetchFailure = { err: e, retriable: e.retriable };
      }
    })().finally(() => {
      this.fetches.delete(leader);
      for (const sub of subs) this.fetching.delete(sub);
    });
    this.fetches.set(leader, fetched);
  }

  /** Reads a fetch's answers: records into `buffered`, positions forward; an error of a bucket whose leader moved is kept for the poll. */
  private async readFetched(subs: Subscription[], outcomes: Outcome<PbFetchLogRespForBucket>[]): Promise<void> {
    const fetched: { sub: Subscription; batches: Buffer[] }[] = [];
    const belowLogStart: { sub: Subscription; err: Error }[] = [];
    for (const [i, outcome] of outcomes.entries()) {
      const sub = subs[i];
      if (this.subscriptions.get(key(sub.partition?.id, sub.bucket)) !== sub) continue; // unsubscribed meanwhile
      const err = outcomeError(outcome, 'fetch');
      if (err && this.lake && err.errorName === 'LOG_OFFSET_OUT_OF_RANGE_EXCEPTION') {
        belowLogStart.push({ sub, err });
        continue;
      }
      if (err) {
        if (!(await retriableAtLeader(this.conn, this.table, err))) throw err;
        this.fetchFailure ??= { err, retriable: true };
        continue;
      }
      const b = outcome as PbFetchLogRespForBucket;
      delete sub.start;
      sub.highWatermark = b.highWatermark;
      if (b.records.length > 0) fetched.push({ sub, batches: splitLogBatches(Buffer.from(b.records.buffer, b.records.byteOffset, b.records.byteLength)) });
    }
    const schemaIds = new Set<number>();
    for (const { batches } of fetched) {
      for (const batch of batches) {
        const header = readLogBatchHeader(batch);
        if (header.recordCount > 0) schemaIds.add(header.schemaId);
      }
    }
    const newest = Math.max(...schemaIds);
    if (this.projection === undefined && newest > this.readerSchemaId) await this.adoptSchema(newest);
    for (const schemaId of schemaIds) if (!this.layouts.has(schemaId)) await this.learnSchema(schemaId);
    for (const { sub, batches } of fetched) {
      if (this.subscriptions.get(key(sub.partition?.id, sub.bucket)) === sub) this.decode(sub, batches);
    }
    for (const { sub, err } of belowLogStart) {
      if (this.subscriptions.get(key(sub.partition?.id, sub.bucket)) === sub) await this.enterLake(sub, err);
    }
  }

  /**
   * Takes the table's schema `schemaId` as the scanner's own (see the header): batches of every
   * schema id decode into it from now on, and the batches already buffered are shown in it.
   */
  private async adoptSchema(schemaId: number, known?: Schema): Promise<void> {
    const schema = known ?? (await this.conn.metadata.schema(this.table, schemaId));
    this.projectedSchema = schema;
    this.readerSchemaId = schemaId;
    this.decodeSchema = toArrowSchema(schema);
    this.layouts.clear();
    this.layouts.set(schemaId, { decodeSchema: this.decodeSchema });
    this.buffered = this.buffered.map((b) => ({ ...b, batch: inReaderSchema(b.batch, this.decodeSchema) }));
  }

  /** Makes the layout of batches of `schemaId` known, fetching the schema the first time. */
  private async learnSchema(schemaId: number): Promise<void> {
    const writer = await this.conn.metadata.schema(this.table, schemaId);
    this.layouts.set(schemaId, batchLayout(writer, this.projectedSchema.columns, this.projection !== undefined));
  }

  private decode(sub: Subscription, batches: Buffer[]): void {
    for (const batch of batches) {
      const header = readLogBatchHeader(batch);
      const lastOffset = header.baseOffset + BigInt(header.lastOffsetDelta);
      if (lastOffset < sub.offset) continue;
      let payload: Uint8Array = logBatchPayload(batch);
      let changeTypes: Uint8Array | undefined;
      if (!header.appendOnly) ({ changeTypes, arrow: payload } = splitChangelogPayload(payload, header.recordCount));
      if (header.recordCount === 0) {
        // An empty changelog batch: a write that changed nothing still moved the offsets.
        sub.offset = lastOffset + 1n;
        continue;
      }
      const layout = this.layouts.get(header.schemaId)!;
      let decoded = decodeArrowPayload(layout.decodeSchema, payload);
      if (layout.sources) decoded = evolvedBatch(decoded, this.decodeSchema, layout.sources);
      let baseOffset = header.baseOffset;
      if (baseOffset < sub.offset) {
        // The subscription starts inside this batch.
        const skip = Number(sub.offset - baseOffset);
        decoded = decoded.slice(skip);
        changeTypes = changeTypes?.subarray(skip);
        baseOffset = sub.offset;
      }
      this.buffered.push({
        bucket: sub.bucket,
        ...(sub.partition ? { partition: sub.partition.name } : {}),
        baseOffset,
        timestamp: Number(header.commitTimestamp),
        batch: decoded,
        ...(changeTypes ? { changeTypes } : {}),
      });
      sub.offset = lastOffset + 1n;
    }
  }
}

function key(partitionId: number | undefined, bucket: number): string {
  return `${partitionId ?? '-'}/${bucket}`;
}
