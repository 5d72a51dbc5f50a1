/**
 * A structure-aware fuzzer of the RPC APIs: requests are generated from the message descriptors
 * (protobuf-es reflection over the generated schemas), field by field, with edge values (missing
 * messages, empty and odd strings, huge and negative numbers, long lists, random bytes) and, as
 * often, values that reach deeper (the names and ids of real tables, record batches that are
 * well-formed or nearly so, table descriptors with one thing wrong). A small share of requests are
 * also mutated as bytes after encoding.
 *
 * The generator is deterministic for a seed (mulberry32), so a failure replays from the seed and
 * the request number it reports.
 */
import { create, toBinary, type DescField, type DescMessage } from '@bufbuild/protobuf';
import { ScalarType } from '@bufbuild/protobuf';
import { CompactedKeyEncoder } from '../../src/common/key-encoder.js';
import { CompactedRowEncoder, primaryKeyLayout } from '../../src/common/row-encoder.js';
import type { TableInfo } from '../../src/common/schema.js';
import { RowReader } from '../../src/common/values.js';
import { encodeArrowPayload } from '../../src/record/arrow-payload.js';
import { ColumnBatchBuilder } from '../../src/record/column-batch-builder.js';
import { buildKvBatch } from '../../src/record/kv-batch.js';
import { buildLogBatch } from '../../src/record/log-batch.js';
import type { Api } from '../../src/rpc/api-keys.js';

export type Random = () => number;

/** The tables the fuzzer aims at, as the server describes them. */
export interface FuzzTarget {
  info: TableInfo;
  partitionIds: bigint[];
  partitionNames: string[];
}

export interface FuzzWorld {
  databases: string[];
  targets: FuzzTarget[];
  /** Ids the fuzzer must never name (the tables whose data the run checks afterwards). */
  forbiddenIds: Set<bigint>;
}

const TYPES = ['INT', 'BIGINT', 'STRING', 'BOOLEAN', 'DOUBLE', 'DECIMAL(10, 2)', 'DECIMAL(99, 2)', 'TIMESTAMP(3)', 'TIMESTAMP(9)', 'DATE', 'BYTES', 'ARRAY<INT>', 'MAP<STRING, INT>', 'ROW<a INT>', 'CHAR(0)', 'VARCHAR(-1)', 'NOPE', '', 'INT(', ')'];
const OPTION_KEYS = ['table.log.ttl', 'bucket.num', 'bucket.key', 'table.merge-engine', 'table.datalake.enabled', 'table.auto-partition.enabled', 'table.auto-partition.time-unit', 'table.log.arrow.compression.type', 'no.such.option', ''];

export class RequestGenerator {
  constructor(
    private readonly rand: Random,
    private readonly world: FuzzWorld,
  ) {}

  int(n: number): number {
    return Math.floor(this.rand() * n);
  }

  chance(p: number): boolean {
    return this.rand() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)];
  }

  target(): FuzzTarget | undefined {
    return this.world.targets.length === 0 ? undefined : this.pick(this.world.targets);
  }

  /** A whole request for `api`, as an init object for `create`. */
  request(api: Api): Record<string, unknown> {
    return this.message(api.request, 0);
  }

  /** The request encoded, sometimes with some bytes changed, dropped or cut off. */
  encode(api: Api, init: Record<string, unknown>): Uint8Array {
    const body = toBinary(api.request, create(api.request, init));
    if (!this.chance(0.05) || body.length === 0) return body;
    const bytes = Uint8Array.from(body);
    const how = this.int(3);
    if (how === 0) {
      for (let i = 0, n = 1 + this.int(4); i < n; i++) bytes[this.int(bytes.length)] = this.int(256);
      return bytes;
    }
    if (how === 1) return bytes.subarray(0, this.int(bytes.length));
    const at = this.int(bytes.length);
    return Uint8Array.from([...bytes.subarray(0, at), ...this.randomBytes(1 + this.int(8)), ...bytes.subarray(at)]);
  }

  private message(desc: DescMessage, depth: number): Record<string, unknown> {
    const out: Record<string, unknown> = {};
    for (const field of desc.fields) {
      // Proto3 fields are often left out entirely; optional and message fields then arrive absent.
      if (this.chance(0.2)) continue;
      const value = this.field(desc, field, depth);
      if (value !== undefined) out[field.localName] = value;
    }
    return out;
  }

  private field(desc: DescMessage, field: DescField, depth: number): unknown {
    switch (field.fieldKind) {
      case 'scalar':
        return this.scalar(desc, field.localName, field.scalar);
      case 'enum':
        return this.chance(0.5) ? this.pick(field.enum.values).number : this.edgeInt32();
      case 'message':
        return depth > 4 ? undefined : this.nested(field.message, depth + 1);
      case 'list': {
        const n = this.listLength();
        const items: unknown[] = [];
        for (let i = 0; i < n; i++) {
          if (field.listKind === 'scalar') items.push(this.scalar(desc, field.localName, field.scalar));
          else if (field.listKind === 'enum') items.push(this.edgeInt32());
          else if (depth <= 4) items.push(this.nested(field.message, depth + 1));
        }
        return items;
      }
      case 'map':
        return undefined; // the protocol has no maps
    }
  }

  /** A nested message; a table path mostly names a fuzzed table, so that requests get past it. */
  private nested(desc: DescMessage, depth: number): Record<string, unknown> {
    const t = this.target();
    if (desc.typeName === 'tributary.PbTablePath' && t && this.chance(0.7)) return { databaseName: t.info.path.database, tableName: t.info.path.table };
    return this.message(desc, depth);
  }

  private listLength(): number {
    const r = this.rand();
    if (r < 0.3) return 0;
    if (r < 0.85) return 1 + this.int(3);
    if (r < 0.97) return 4 + this.int(30);
    return 200 + this.int(800);
  }

  private scalar(desc: DescMessage, name: string, type: ScalarType): unknown {
    switch (type) {
      case ScalarType.STRING:
        return this.string(desc, name);
      case ScalarType.BYTES:
        return this.bytes(name);
      case ScalarType.BOOL:
        return this.chance(0.5);
      case ScalarType.INT64:
      case ScalarType.UINT64:
      case ScalarType.SINT64:
      case ScalarType.FIXED64:
      case ScalarType.SFIXED64:
        return this.int64(name);
      case ScalarType.DOUBLE:
      case ScalarType.FLOAT:
        return this.pick([0, -1, 1.5, Number.NaN, Infinity, -Infinity, 1e308]);
      default:
        return this.int32(name);
    }
  }

  edgeInt32(): number {
    return this.pick([0, 1, -1, 2, 3, 7, 255, 0x7fff, 0x8000, 0xffff, 2 ** 31 - 1, -(2 ** 31), 1000, -1000, this.int(2 ** 31) - 2 ** 30]);
  }

  private int32(name: string): number {
    const t = this.target();
    if (t && this.chance(0.5)) {
      if (name === 'bucketId') return this.int(t.info.bucketCount + 1);
      if (name === 'schemaId') return this.int(t.info.schemaId + 2);
      if (name === 'acks') return this.pick([0, 1, -1]);
      if (name === 'offsetType') return this.int(4);
      if (name === 'projectedFields' || name === 'targetColumns') return this.int(t.info.schema.columns.length + 1);
      if (name === 'limit' || name === 'maxFetchBytes' || name === 'maxBytes' || name === 'batchSizeBytes') return this.int(1 << 20);
      if (name === 'opType') return this.int(3);
    }
    return this.edgeInt32();
  }

  private int64(name: string): bigint {
    const t = this.target();
    if (t && this.chance(0.6)) {
      if (name === 'tableId') return BigInt(t.info.tableId);
      if (name === 'partitionId' || name === 'partitionsId') return t.partitionIds.length > 0 && this.chance(0.8) ? this.pick(t.partitionIds) : BigInt(this.int(5));
      if (name === 'fetchOffset' || name === 'logEndOffset') return BigInt(this.int(20) - 2);
      if (name === 'startTimestamp' || name === 'maxTimestamp') return BigInt(Date.now() - this.int(100_000));
    }
    let v = this.pick([0n, 1n, -1n, 2n, 3n, 100n, 2n ** 31n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), BigInt(this.int(1000))]);
    // The checked tables are out of bounds; any other id is fair game.
    if (this.world.forbiddenIds.has(v)) v = -7n;
    return v;
  }

  private string(desc: DescMessage, name: string): string {
    const t = this.target();
    if (this.chance(0.4)) {
      if (name === 'databaseName') return this.chance(0.7) ? this.pick(this.world.databases) : this.oddName();
      if (name === 'tableName' && t) return this.chance(0.8) ? t.info.path.table : this.oddName();
      if (name === 'tableJson') return this.tableJson();
      if (name === 'databaseJson') return this.json(0);
      if (name === 'configKey') return this.pick(OPTION_KEYS);
      if (name === 'configValue') return this.pick(['true', 'false', '1 d', '-1', '3', 'abc', '', 'DAY', 'zstd']);
      if (name === 'dataType') return this.pick(TYPES);
      if ((name === 'partitionName' || name === 'value') && t && t.partitionNames.length > 0) return this.pick(t.partitionNames);
      if (name === 'key' && t && t.info.partitionKeys.length > 0) return this.pick(t.info.partitionKeys);
      if (name === 'columnName' || name === 'key') return this.oddName();
    }
    void desc;
    return this.oddString();
  }

  private oddName(): string {
    return this.pick(['', 'x', 'a_b', '_', '1abc', 'with space', 'a/b', '..', 'tributary/tables/x', 'ü', 'x'.repeat(201), 'fuzz', 'log', 'pk', 'part', 'NULL', 'a.b']);
  }

  private oddString(): string {
    const r = this.int(6);
    if (r === 0) return '';
    if (r === 1) return 'x'.repeat(1 + this.int(10_000));
    if (r === 2) return String.fromCharCode(...Array.from({ length: 1 + this.int(20) }, () => this.int(0x10000)));
    if (r === 3) return this.json(0);
    return this.oddName();
  }

  json(depth: number): string {
    return JSON.stringify(this.jsonValue(depth));
  }

  private jsonValue(depth: number): unknown {
    const r = this.int(depth > 3 ? 5 : 8);
    if (r === 0) return null;
    if (r === 1) return this.edgeInt32();
    if (r === 2) return this.oddString().slice(0, 50);
    if (r === 3) return this.chance(0.5);
    if (r === 4) return this.pick([1.5, -0, 1e300]);
    if (r === 5) return Array.from({ length: this.int(4) }, () => this.jsonValue(depth + 1));
    return Object.fromEntries(Array.from({ length: this.int(4) }, () => [this.pick(['comment', 'columns', 'name', 'type', 'x', '']), this.jsonValue(depth + 1)]));
  }

  /** A table descriptor that is valid, or valid but for one part replaced by something else. */
  private tableJson(): string {
    if (this.chance(0.15)) return this.pick([this.json(0), '', '{', 'null', '[]', '{"columns": 5}', '{"columns": [null]}', '{"columns": [{}]}']);
    const descriptor: Record<string, unknown> = {
      columns: [
        { name: 'id', type: 'INT', nullable: false },
        { name: 'v', type: this.pick(['STRING', 'BIGINT', 'DOUBLE']) },
      ],
    };
    if (this.chance(0.3)) descriptor.primaryKey = ['id'];
    if (this.chance(0.2)) descriptor.partitionKeys = ['v'];
    if (this.chance(0.3)) descriptor.bucketCount = this.pick([1, 2, 0, -1, 1.5, 5000, '2']);
    if (this.chance(0.2)) descriptor.bucketKeys = this.pick([['id'], ['v'], ['nope'], [], 'id']);
    if (this.chance(0.2)) descriptor.properties = { [this.pick(OPTION_KEYS)]: this.pick(['true', '1 d', 'abc', '3']) };
    if (this.chance(0.1)) descriptor.comment = this.jsonValue(3);
    const broken = this.int(12);
    const columns = descriptor.columns as Record<string, unknown>[];
    if (broken === 0) delete columns[1].name;
    else if (broken === 1) columns[1].name = this.pick([5, null, '', {}, 'id', 'ID']);
    else if (broken === 2) columns[0].type = this.pick([5, null, {}, [], ...TYPES]);
    else if (broken === 3) columns.push(this.jsonValue(2) as Record<string, unknown>);
    else if (broken === 4) descriptor.primaryKey = this.pick(['id', 5, [5], [null], ['v', 'v'], {}]);
    else if (broken === 5) descriptor.partitionKeys = this.pick(['v', 5, [5], [null], {}]);
    else if (broken === 6) descriptor.properties = this.pick([[], 'x', 5, { a: 5 }, { 'table.log.ttl': null }]);
    else if (broken === 7) descriptor.columns = this.pick([[], {}, 'x', Array.from({ length: 2000 }, (_, i) => ({ name: `c${i}`, type: 'INT' }))]);
    else if (broken === 8) columns[1].nullable = this.pick(['yes', 0, null]);
    else if (broken === 9) columns[1].comment = this.pick([5, {}, 'a comment']);
    return JSON.stringify(descriptor);
  }

  private randomBytes(n: number): Uint8Array {
    return Uint8Array.from({ length: n }, () => this.int(256));
  }

  private bytes(name: string): Uint8Array {
    const t = this.target();
    if (name === 'records' && t && this.chance(0.7)) return this.records(t);
    if (name === 'keys' && t?.info.schema.primaryKey && this.chance(0.6)) return this.key(t.info);
    return this.randomBytes(this.pick([0, 1, 4, 16, 28, 56, 200, this.int(4096)]));
  }

  private rowValues(info: TableInfo): unknown[] {
    const reader = new RowReader(info.schema.columns);
    const row: Record<string, unknown> = {};
    for (const c of info.schema.columns) {
      const type = c.type.kind;
      if (type === 'INT') row[c.name] = this.int(1000);
      else if (type === 'BIGINT') row[c.name] = BigInt(this.int(1000));
      else if (type === 'DOUBLE') row[c.name] = this.rand();
      else if (type === 'STRING') row[c.name] = info.partitionKeys.includes(c.name) ? this.pick(['a', 'b', 'zz']) : 'v'.repeat(this.int(50));
      else row[c.name] = null;
    }
    return reader.read(row);
  }

  private key(info: TableInfo): Uint8Array {
    const layout = primaryKeyLayout(info.schema, info.bucketKeys, info.partitionKeys);
    return CompactedKeyEncoder.forColumns(info.schema, layout).encode(this.rowValues(info));
  }

  /** One or more batches for the table, well-formed or with a part wrong (schema id, count, CRC, payload). */
  private records(t: FuzzTarget): Uint8Array {
    const info = t.info;
    const rows = this.int(5);
    let batch: Buffer;
    if (info.schema.primaryKey) {
      const rowEncoder = new CompactedRowEncoder(info.schema.columns.map((c) => c.type));
      const records = Array.from({ length: rows }, () => {
        const values = this.rowValues(info);
        return { key: this.key(info), row: this.chance(0.8) ? rowEncoder.encode(values) : this.chance(0.5) ? null : this.randomBytes(1 + this.int(20)) };
      });
      batch = buildKvBatch({ schemaId: this.chance(0.9) ? info.schemaId : this.edgeInt32() & 0x7fff, records });
    } else {
      const builder = new ColumnBatchBuilder(info.schema);
      for (let i = 0; i < rows; i++) builder.appendInternalRow(this.rowValues(info));
      const payload = encodeArrowPayload(builder.build(), this.pick(['ZSTD', 'LZ4_FRAME', 'NONE'] as const));
      batch = buildLogBatch({
        schemaId: this.chance(0.9) ? info.schemaId : this.edgeInt32() & 0x7fff,
        appendOnly: this.chance(0.9),
        recordCount: this.chance(0.9) ? rows : this.edgeInt32(),
        payload: this.chance(0.85) ? payload : this.randomBytes(payload.length),
      });
    }
    const r = this.int(10);
    if (r === 0) batch[this.int(batch.length)] ^= 1 << this.int(8); // fails the CRC, or the length
    else if (r === 1) batch = batch.subarray(0, this.int(batch.length));
    else if (r === 2) batch = Buffer.concat([batch, batch]);
    return batch;
  }
}
