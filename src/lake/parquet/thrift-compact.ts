/**
 * Thrift's compact protocol, as Parquet's footer uses it: a struct decodes to a tree of its fields
 * (id, wire type, value) in the order they came, and encodes back the same, so a reader may change
 * the fields it knows and pass on those it does not (newer format versions add fields).
 *
 *   field header  one byte: id delta (1..15) << 4 | type; delta 0: the type, then the id as a
 *                 zigzag varint. A struct ends with a 0 byte (STOP).
 *   bool field    the type itself says the value (1 true, 2 false)
 *   i8            one byte; i16, i32, i64 zigzag varints; double 8 bytes little-endian
 *   binary        varint length, bytes (strings too)
 *   list, set     one byte: size (< 15) << 4 | element type; size 15: a varint size follows.
 *                 Bool elements are a byte each (1 true)
 *   map           varint size; if not 0, one byte: key type << 4 | value type; then the pairs
 */
import { TributaryError } from '../../common/errors.js';

export const enum TType {
  BOOL_TRUE = 1,
  BOOL_FALSE = 2,
  I8 = 3,
  I16 = 4,
  I32 = 5,
  I64 = 6,
  DOUBLE = 7,
  BINARY = 8,
  LIST = 9,
  SET = 10,
  MAP = 11,
  STRUCT = 12,
}

export type TValue = boolean | number | bigint | Uint8Array | TList | TMap | TStruct;

export interface TList {
  elementType: TType;
  items: TValue[];
}

export interface TMap {
  keyType: TType;
  valueType: TType;
  entries: [TValue, TValue][];
}

export interface TField {
  id: number;
  /** The wire type; BOOL_TRUE stands for both bool types. */
  type: TType;
  value: TValue;
}

export interface TStruct {
  fields: TField[];
}

/** Nesting deeper than this is taken as a corrupt footer, not followed. */
const MAX_DEPTH = 64;

function corrupt(what: string): never {
  throw new TributaryError('CORRUPT_MESSAGE', `corrupt Thrift compact data: ${what}`);
}

/** Decodes the struct at `offset` of `bytes`; `end` is where it stopped. */
export function decodeStruct(bytes: Uint8Array, offset = 0): { struct: TStruct; end: number } {
  const reader = new Reader(bytes, offset);
  const struct = reader.struct(0);
  return { struct, end: reader.pos };
}

export function encodeStruct(struct: TStruct): Uint8Array {
  const writer = new Writer();
  writer.struct(struct);
  return writer.bytes();
}

/** The value of field `id`, if present. */
export function fieldOf(struct: TStruct, id: number): TValue | undefined {
  return struct.fields.find((f) => f.id === id)?.value;
}

/** Sets field `id` (kept in id order when new). */
export function setField(struct: TStruct, id: number, type: TType, value: TValue): void {
  const at = struct.fields.findIndex((f) => f.id === id);
  if (at >= 0) struct.fields[at] = { id, type, value };
  else {
    const before = struct.fields.findIndex((f) => f.id > id);
    struct.fields.splice(before < 0 ? struct.fields.length : before, 0, { id, type, value });
  }
}

export function removeField(struct: TStruct, ...ids: number[]): void {
  struct.fields = struct.fields.filter((f) => !ids.includes(f.id));
}

class Reader {
  constructor(
    private readonly bytes: Uint8Array,
    public pos: number,
  ) {}

  private byte(): number {
    if (this.pos >= this.bytes.length) corrupt('it ends early');
    return this.bytes[this.pos++];
  }

  private varint(): bigint {
    let result = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const b = this.byte();
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
    }
    return corrupt('a varint is too long');
  }

  private zigzag(): bigint {
    const n = this.varint();
    return (n >> 1n) ^ -(n & 1n);
  }

  private size(): number {
    const n = this.varint();
    if (n > BigInt(this.bytes.length - this.pos)) corrupt('a length runs past the end');
    return Number(n);
  }

  struct(depth: number): TStruct {
    if (depth > MAX_DEPTH) corrupt('it nests too deep');
    const fields: TField[] = [];
    let id = 0;
    for (;;) {
      const header = this.byte();
      if (header === 0) return { fields };
      const type = header & 0x0f;
      const delta = header >> 4;
      id = delta === 0 ? Number(this.zigzag()) : id + delta;
      if (type === TType.BOOL_TRUE || type === TType.BOOL_FALSE) fields.push({ id, type: TType.BOOL_TRUE, value: type === TType.BOOL_TRUE });
      else fields.push({ id, type, value: this.value(type, depth) });
    }
  }

  private value(type: number, depth: number): TValue {
    switch (type) {
      case TType.BOOL_TRUE:
      case TType.BOOL_FALSE:
        return this.byte() === 1;
      case TType.I8:
        return (this.byte() << 24) >> 24;
      case TType.I16:
      case TType.I32:
        return Number(this.zigzag());
      case TType.I64:
        return this.zigzag();
      case TType.DOUBLE: {
        if (this.pos + 8 > this.bytes.length) corrupt('it ends early');
        const v = new DataView(this.bytes.buffer, this.bytes.byteOffset + this.pos, 8).getFloat64(0, true);
        this.pos += 8;
        return v;
      }
      case TType.BINARY: {
        const n = this.size();
        const v = this.bytes.slice(this.pos, this.pos + n);
        this.pos += n;
        return v;
      }
      case TType.LIST:
      case TType.SET: {
        const header = this.byte();
        const count = header >> 4 === 15 ? this.size() : header >> 4;
        const elementType = (header & 0x0f) as TType;
        const items: TValue[] = [];
        for (let i = 0; i < count; i++) items.push(this.value(elementType, depth + 1));
        return { elementType, items };
      }
      case TType.MAP: {
        const count = this.size();
        if (count === 0) return { keyType: TType.BINARY, valueType: TType.BINARY, entries: [] };
        const types = this.byte();
        const keyType = (types >> 4) as TType;
        const valueType = (types & 0x0f) as TType;
        const entries: [TValue, TValue][] = [];
        for (let i = 0; i < count; i++) entries.push([this.value(keyType, depth + 1), this.value(valueType, depth + 1)]);
        return { keyType, valueType, entries };
      }
      case TType.STRUCT:
        return this.struct(depth + 1);
      default:
        return corrupt(`unknown type ${type}`);
    }
  }
}

class Writer {
  private buf = new Uint8Array(1024);
  private pos = 0;

  bytes(): Uint8Array {
    return this.buf.slice(0, this.pos);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    grown.set(this.buf.subarray(0, this.pos));
    this.buf = grown;
  }

  private byte(b: number): void {
    this.ensure(1);
    this.buf[this.pos++] = b & 0xff;
  }

  private varint(n: bigint): void {
    let v = BigInt.asUintN(64, n);
    while (v >= 0x80n) {
      this.byte(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.byte(Number(v));
  }

  private zigzag(n: bigint): void {
    this.varint(BigInt.asUintN(64, (n << 1n) ^ (n >> 63n)));
  }

  struct(struct: TStruct): void {
    let last = 0;
    for (const f of struct.fields) {
      const type = f.type === TType.BOOL_TRUE || f.type === TType.BOOL_FALSE ? (f.value ? TType.BOOL_TRUE : TType.BOOL_FALSE) : f.type;
      const delta = f.id - last;
      if (delta > 0 && delta <= 15) this.byte((delta << 4) | type);
      else {
        this.byte(type);
        this.zigzag(BigInt(f.id));
      }
      last = f.id;
      if (f.type !== TType.BOOL_TRUE && f.type !== TType.BOOL_FALSE) this.value(f.type, f.value);
    }
    this.byte(0);
  }

  private value(type: TType, v: TValue): void {
    switch (type) {
      case TType.BOOL_TRUE:
      case TType.BOOL_FALSE:
        return this.byte(v ? 1 : 2);
      case TType.I8:
        return this.byte(v as number);
      case TType.I16:
      case TType.I32:
        return this.zigzag(BigInt(v as number));
      case TType.I64:
        return this.zigzag(v as bigint);
      case TType.DOUBLE: {
        this.ensure(8);
        new DataView(this.buf.buffer, this.pos, 8).setFloat64(0, v as number, true);
        this.pos += 8;
        return;
      }
      case TType.BINARY: {
        const b = v as Uint8Array;
        this.varint(BigInt(b.length));
        this.ensure(b.length);
        this.buf.set(b, this.pos);
        this.pos += b.length;
        return;
      }
      case TType.LIST:
      case TType.SET: {
        const list = v as TList;
        if (list.items.length < 15) this.byte((list.items.length << 4) | list.elementType);
        else {
          this.byte(0xf0 | list.elementType);
          this.varint(BigInt(list.items.length));
        }
        for (const item of list.items) this.value(list.elementType, item);
        return;
      }
      case TType.MAP: {
        const map = v as TMap;
        this.varint(BigInt(map.entries.length));
        if (map.entries.length === 0) return;
        this.byte((map.keyType << 4) | map.valueType);
        for (const [k, x] of map.entries) {
          this.value(map.keyType, k);
          this.value(map.valueType, x);
        }
        return;
      }
      case TType.STRUCT:
        return this.struct(v as TStruct);
    }
  }
}
