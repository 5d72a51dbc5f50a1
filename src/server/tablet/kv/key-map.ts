/**
 * KeyMap: a hash map keyed by encoded primary keys, compared by their bytes. A Map<string, V>
 * would need a string made of every key; this one hashes and compares the bytes in place.
 *
 * Open addressing with linear probing over a power-of-two table kept at most half full. A delete
 * shifts the entries after it back into the gap, so there are no tombstones. Keys are held, not
 * copied: a caller must not change a key's bytes while it is in the map.
 */
export class KeyMap<V> {
  private slotKeys: (Uint8Array | undefined)[];
  private slotValues: (V | undefined)[];
  private slotHashes: Int32Array;
  private mask: number;
  private count = 0;
  /** The most entries held since the map was last empty. */
  private peak = 0;

  /** `capacity`: the entries held without growing, and the least an emptied map shrinks back to. */
  constructor(private readonly capacity = 64) {
    const slots = slotsFor(capacity);
    this.slotKeys = new Array<Uint8Array | undefined>(slots).fill(undefined);
    this.slotValues = new Array<V | undefined>(slots).fill(undefined);
    this.slotHashes = new Int32Array(slots);
    this.mask = slots - 1;
  }

  get size(): number {
    return this.count;
  }

  get(key: Uint8Array): V | undefined {
    const slot = this.find(key, hashOf(key));
    return slot < 0 ? undefined : this.slotValues[slot];
  }

  set(key: Uint8Array, value: V): void {
    const hash = hashOf(key);
    const found = this.find(key, hash);
    if (found >= 0) {
      this.slotValues[found] = value;
      return;
    }
    if ((this.count + 1) * 2 > this.slotKeys.length) this.resize(this.slotKeys.length * 2);
    let slot = hash & this.mask;
    while (this.slotKeys[slot] !== undefined) slot = (slot + 1) & this.mask;
    this.slotKeys[slot] = key;
    this.slotValues[slot] = value;
    this.slotHashes[slot] = hash;
    if (++this.count > this.peak) this.peak = this.count;
  }

  delete(key: Uint8Array): boolean {
    const slot = this.find(key, hashOf(key));
    if (slot < 0) return false;
    this.remove(slot);
    return true;
  }

  /** Deletes `key` if it maps to `value` (the same value, not an equal one); whether it did. */
  deleteIfValue(key: Uint8Array, value: V): boolean {
    const slot = this.find(key, hashOf(key));
    if (slot < 0 || this.slotValues[slot] !== value) return false;
    this.remove(slot);
    return true;
  }

  private remove(slot: number): void {
    let gap = slot;
    const mask = this.mask;
    // Move back every entry of the run after the gap that may live there: one whose home slot
    // is not cyclically within (gap, next].
    for (let next = (gap + 1) & mask; this.slotKeys[next] !== undefined; next = (next + 1) & mask) {
      const home = this.slotHashes[next] & mask;
      const stays = gap < next ? home > gap && home <= next : home > gap || home <= next;
      if (stays) continue;
      this.slotKeys[gap] = this.slotKeys[next];
      this.slotValues[gap] = this.slotValues[next];
      this.slotHashes[gap] = this.slotHashes[next];
      gap = next;
    }
    this.slotKeys[gap] = undefined;
    this.slotValues[gap] = undefined;
    if (--this.count === 0) {
      // Emptied: keep the table the last run of use needed (a steady flow of writes empties and
      // refills it over and over), give back what an earlier burst grew it to.
      const slots = slotsFor(Math.max(this.capacity, this.peak));
      if (this.slotKeys.length > slots) this.resize(slots);
      this.peak = 0;
    }
  }

  /** Every value, in no particular order; the map must not change during the walk. */
  *values(): Generator<V> {
    for (let slot = 0; slot < this.slotKeys.length; slot++) if (this.slotKeys[slot] !== undefined) yield this.slotValues[slot]!;
  }

  private find(key: Uint8Array, hash: number): number {
    const mask = this.mask;
    for (let slot = hash & mask; ; slot = (slot + 1) & mask) {
      const k = this.slotKeys[slot];
      if (k === undefined) return -1;
      if (this.slotHashes[slot] === hash && sameBytes(k, key)) return slot;
    }
  }

  private resize(slots: number): void {
    const { slotKeys: keys, slotValues: values, slotHashes: hashes } = this;
    this.slotKeys = new Array<Uint8Array | undefined>(slots).fill(undefined);
    this.slotValues = new Array<V | undefined>(slots).fill(undefined);
    this.slotHashes = new Int32Array(slots);
    this.mask = slots - 1;
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (k === undefined) continue;
      let slot = hashes[i] & this.mask;
      while (this.slotKeys[slot] !== undefined) slot = (slot + 1) & this.mask;
      this.slotKeys[slot] = k;
      this.slotValues[slot] = values[i];
      this.slotHashes[slot] = hashes[i];
    }
  }
}

/** The power-of-two table size that keeps `capacity` entries at most half full. */
function slotsFor(capacity: number): number {
  let slots = 16;
  while (slots < capacity * 2) slots *= 2;
  return slots;
}

/** FNV-1a over the bytes, then murmur3's finalizer, so that the low bits (the slot) are well mixed. */
function hashOf(key: Uint8Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key[i], 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return h ^ (h >>> 16);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
