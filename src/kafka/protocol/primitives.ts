/**
 * The primitive types of the Kafka protocol (all integers big-endian, as the protocol guide
 * defines them):
 *
 *   int8 int16 int32 int64 uint16   fixed width, two's complement (uint16 unsigned)
 *   float64                         IEEE 754 double
 *   bool                            int8, 0 = false
 *   varint varlong                  zig-zag, 7 bits a byte, low bits first (records only)
 *   unsigned varint                 7 bits a byte, low bits first (lengths in flexible versions)
 *   uuid                            16 bytes
 *   string                          int16 length, UTF-8 bytes; nullable: length -1 = null
 *   compact string                  unsigned varint length + 1, bytes; nullable: 0 = null
 *   bytes                           int32 length, bytes; nullable: -1 = null
 *   compact bytes                   unsigned varint length + 1, bytes; nullable: 0 = null
 *   array                           int32 count, elements; nullable: -1 = null
 *   compact array                   unsigned varint count + 1, elements; nullable: 0 = null
 *   tagged fields                   unsigned varint count, then per field: unsigned varint tag,
 *                                   unsigned varint size, size bytes (tags ascending)
 *
 * A Reader throws KafkaDecodeError on any read past its end or any length that cannot be right,
 * so a truncated or fuzzed frame fails as one error the listener answers, never as a crash.
 */

/** A frame that does not follow the grammar: answered with CORRUPT_MESSAGE (or the API's error). */
export class KafkaDecodeError extends Error {
  override readonly name = 'KafkaDecodeError';
}

const textDecoder = new TextDecoder('utf-8', { fatal: false });

/** The values of the one-byte varlongs, by their byte: no BigInt made for a small timestamp delta. */
const ONE_BYTE_VARLONGS: readonly bigint[] = Array.from({ length: 0x80 }, (_, b) => BigInt(b % 2 === 0 ? b / 2 : -(b + 1) / 2));

export class Reader {
  pos: number;

  constructor(
    readonly buf: Buffer,
    pos = 0,
    readonly end = buf.length,
  ) {
    this.pos = pos;
  }

  get remaining(): number {
    return this.end - this.pos;
  }

  private need(n: number): number {
    if (n < 0 || this.pos + n > this.end) throw new KafkaDecodeError(`needs ${n} bytes at position ${this.pos}, ${this.end - this.pos} left`);
    const at = this.pos;
    this.pos += n;
    return at;
  }

  int8(): number {
    return this.buf.readInt8(this.need(1));
  }
  int16(): number {
    return this.buf.readInt16BE(this.need(2));
  }
  uint16(): number {
    return this.buf.readUInt16BE(this.need(2));
  }
  int32(): number {
    return this.buf.readInt32BE(this.need(4));
  }
  uint32(): number {
    return this.buf.readUInt32BE(this.need(4));
  }
  int64(): bigint {
    return this.buf.readBigInt64BE(this.need(8));
  }
  float64(): number {
    return this.buf.readDoubleBE(this.need(8));
  }
  bool(): boolean {
    return this.int8() !== 0;
  }

  uvarint(): number {
    // Bytes read in place, without need() per byte: record lengths and deltas are read per record.
    const buf = this.buf;
    let pos = this.pos;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 5; i++) {
      if (pos >= this.end) throw new KafkaDecodeError(`varint cut off at position ${pos}`);
      const b = buf[pos++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (value > 0xffffffff) throw new KafkaDecodeError('unsigned varint out of range');
        this.pos = pos;
        return value;
      }
      scale *= 0x80;
    }
    throw new KafkaDecodeError('unsigned varint longer than 5 bytes');
  }

  varint(): number {
    const u = this.uvarint();
    return u % 2 === 0 ? u / 2 : -(u + 1) / 2;
  }

  varlong(): bigint {
    const first = this.buf[this.pos];
    if (first < 0x80 && this.pos < this.end) {
      this.pos++;
      return ONE_BYTE_VARLONGS[first];
    }
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      const b = this.buf[this.need(1)];
      value |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return (value >> 1n) ^ -(value & 1n);
    }
    throw new KafkaDecodeError('varlong longer than 10 bytes');
  }

  uuid(): Buffer {
    return this.raw(16);
  }

  /** Moves past `n` bytes; returns where they start. */
  skip(n: number): number {
    return this.need(n);
  }

  /** `n` bytes as a view of the frame (no copy). */
  raw(n: number): Buffer {
    const at = this.need(n);
    return this.buf.subarray(at, at + n);
  }

  private text(n: number): string {
    const at = this.need(n);
    return textDecoder.decode(this.buf.subarray(at, at + n));
  }

  string(): string {
    const s = this.nullableString();
    if (s === null) throw new KafkaDecodeError('null where a string is required');
    return s;
  }
  nullableString(): string | null {
    const n = this.int16();
    return n === -1 ? null : this.text(checkLength(n));
  }
  compactString(): string {
    const s = this.compactNullableString();
    if (s === null) throw new KafkaDecodeError('null where a compact string is required');
    return s;
  }
  compactNullableString(): string | null {
    const n = this.uvarint();
    return n === 0 ? null : this.text(n - 1);
  }

  bytes(): Buffer {
    const b = this.nullableBytes();
    if (b === null) throw new KafkaDecodeError('null where bytes are required');
    return b;
  }
  nullableBytes(): Buffer | null {
    const n = this.int32();
    return n === -1 ? null : this.raw(checkLength(n));
  }
  compactBytes(): Buffer {
    const b = this.compactNullableBytes();
    if (b === null) throw new KafkaDecodeError('null where compact bytes are required');
    return b;
  }
  compactNullableBytes(): Buffer | null {
    const n = this.uvarint();
    return n === 0 ? null : this.raw(n - 1);
  }

  /** An array count, or -1 for null; a count no frame this size could hold is refused before anything is allocated. */
  arrayLength(compact: boolean): number {
    const n = compact ? this.uvarint() - 1 : this.int32();
    if (n < -1) throw new KafkaDecodeError(`negative array length ${n}`);
    if (n > this.remaining) throw new KafkaDecodeError(`array of ${n} elements in ${this.remaining} bytes`);
    return n;
  }

  /** Tagged fields: `read` is called for each known tag with a reader over its bytes; unknown tags are skipped. */
  taggedFields(read?: (tag: number, field: Reader) => void): void {
    const count = this.uvarint();
    let last = -1;
    for (let i = 0; i < count; i++) {
      const tag = this.uvarint();
      if (tag <= last) throw new KafkaDecodeError(`tagged field ${tag} after tag ${last}`);
      last = tag;
      const size = this.uvarint();
      const at = this.need(size);
      read?.(tag, new Reader(this.buf, at, at + size));
    }
  }
}

function checkLength(n: number): number {
  if (n < 0) throw new KafkaDecodeError(`negative length ${n}`);
  return n;
}

/** A growable big-endian buffer. `finish()` returns the bytes written (a view, no copy). */
export class Writer {
  private buf: Buffer;
  pos = 0;

  constructor(initial = 256) {
    this.buf = Buffer.allocUnsafe(initial);
  }

  private room(n: number): number {
    if (this.pos + n > this.buf.length) {
      const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n));
      this.buf.copy(next, 0, 0, this.pos);
      this.buf = next;
    }
    const at = this.pos;
    this.pos += n;
    return at;
  }

  int8(v: number): this {
    const at = this.room(1);
    this.buf.writeInt8(v, at);
    return this;
  }
  int16(v: number): this {
    const at = this.room(2);
    this.buf.writeInt16BE(v, at);
    return this;
  }
  uint16(v: number): this {
    const at = this.room(2);
    this.buf.writeUInt16BE(v, at);
    return this;
  }
  int32(v: number): this {
    const at = this.room(4);
    this.buf.writeInt32BE(v, at);
    return this;
  }
  uint32(v: number): this {
    const at = this.room(4);
    this.buf.writeUInt32BE(v >>> 0, at);
    return this;
  }
  int64(v: bigint): this {
    const at = this.room(8);
    this.buf.writeBigInt64BE(v, at);
    return this;
  }
  float64(v: number): this {
    const at = this.room(8);
    this.buf.writeDoubleBE(v, at);
    return this;
  }
  bool(v: boolean): this {
    return this.int8(v ? 1 : 0);
  }

  uvarint(v: number): this {
    if (v < 0 || v > 0xffffffff || !Number.isInteger(v)) throw new RangeError(`unsigned varint ${v} out of range`);
    while (v >= 0x80) {
      {
      const at = this.room(1);
      this.buf[at] = (v % 0x80) | 0x80;
    }
      v = Math.floor(v / 0x80);
    }
    {
      const at = this.room(1);
      this.buf[at] = v;
    }
    return this;
  }

  varint(v: number): this {
    return this.uvarint(v >= 0 ? v * 2 : -v * 2 - 1);
  }

  varlong(v: bigint): this {
    let u = BigInt.asUintN(64, (v << 1n) ^ (v >> 63n));
    while (u >= 0x80n) {
      {
      const at = this.room(1);
      this.buf[at] = Number(u & 0x7fn) | 0x80;
    }
      u >>= 7n;
    }
    {
      const at = this.room(1);
      this.buf[at] = Number(u);
    }
    return this;
  }

  raw(bytes: Uint8Array): this {
    const at = this.room(bytes.length);
    this.buf.set(bytes, at);
    return this;
  }

  uuid(v: Uint8Array): this {
    if (v.length !== 16) throw new RangeError(`uuid of ${v.length} bytes`);
    return this.raw(v);
  }

  nullableString(v: string | null): this {
    if (v === null) return this.int16(-1);
    const bytes = Buffer.from(v, 'utf8');
    return this.int16(bytes.length).raw(bytes);
  }
  compactNullableString(v: string | null): this {
    if (v === null) return this.uvarint(0);
    const bytes = Buffer.from(v, 'utf8');
    return this.uvarint(bytes.length + 1).raw(bytes);
  }
  nullableBytes(v: Uint8Array | null): this {
    if (v === null) return this.int32(-1);
    return this.int32(v.length).raw(v);
  }
  compactNullableBytes(v: Uint8Array | null): this {
    if (v === null) return this.uvarint(0);
    return this.uvarint(v.length + 1).raw(v);
  }
  arrayLength(n: number | null, compact: boolean): this {
    if (compact) return this.uvarint(n === null ? 0 : n + 1);
    return this.int32(n === null ? -1 : n);
  }

  /** Tagged fields, given as tag → encoded bytes, written in ascending tag order. */
  taggedFields(fields: readonly (readonly [number, Uint8Array])[] = []): this {
    const sorted = [...fields].sort((a, b) => a[0] - b[0]);
    this.uvarint(sorted.length);
    for (const [tag, bytes] of sorted) this.uvarint(tag).uvarint(bytes.length).raw(bytes);
    return this;
  }

  /** Overwrites 4 bytes at `at` (a length or CRC written once what follows is known). */
  patchInt32(at: number, v: number): void {
    this.buf.writeInt32BE(v, at);
  }
  patchUint32(at: number, v: number): void {
    this.buf.writeUInt32BE(v >>> 0, at);
  }

  /** The bytes written so far. */
  finish(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}
