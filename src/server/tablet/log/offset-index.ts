/**
 * OffsetIndex: the `.index` file of a segment, a sparse map from offset to file position.
 *
 * Grammar: a sequence of 8-byte entries, little-endian, both fields strictly increasing:
 *   RelativeOffset i32  base offset of a batch minus the segment's base offset
 *   Position       i32  byte position of that batch in the segment's `.log`
 *
 * One entry is added per `log.index.interval-size` bytes of log, so a lookup finds the floor entry
 * and scans at most that many bytes of batch headers forward.
 */
import { IndexFile } from './index-file.js';

export class OffsetIndex extends IndexFile {
  static readonly ENTRY_SIZE = 8;

  constructor(path: string) {
    super(path, OffsetIndex.ENTRY_SIZE);
  }

  protected encodeEntry(buf: Buffer, at: number, relativeOffset: number, position: number): void {
    buf.writeInt32LE(relativeOffset, at);
    buf.writeInt32LE(position, at + 4);
  }

  protected decodeKey(buf: Buffer, at: number): number {
    return buf.readInt32LE(at);
  }

  protected decodeValue(buf: Buffer, at: number): number {
    return buf.readInt32LE(at + 4);
  }

  /** Relative offset and position of the last entry at or below `relativeOffset`; (0, 0) when none. */
  lookup(relativeOffset: number): { relativeOffset: number; position: number } {
    const i = this.floor(relativeOffset);
    return i < 0 ? { relativeOffset: 0, position: 0 } : { relativeOffset: this.keyAt(i), position: this.valueAt(i) };
  }
}
