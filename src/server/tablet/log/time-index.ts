/**
 * TimeIndex: the `.timeindex` file of a segment, a sparse map from commit timestamp to offset.
 *
 * Grammar: a sequence of 12-byte entries, little-endian, both fields strictly increasing:
 *   CommitTimestamp i64  ms since epoch, the largest commit timestamp of the segment so far
 *   RelativeOffset  i32  the first batch (minus the segment's base offset) carrying that timestamp
 *
 * Commit timestamps never go backwards within a log, so every batch before an entry's offset is
 * older than the entry's timestamp. A sealed segment ends with an entry for its largest timestamp,
 * which retention reads without scanning the log.
 */
import { IndexFile } from './index-file.js';

export class TimeIndex extends IndexFile {
  static readonly ENTRY_SIZE = 12;

  constructor(path: string) {
    super(path, TimeIndex.ENTRY_SIZE);
  }

  protected encodeEntry(buf: Buffer, at: number, timestamp: number, relativeOffset: number): void {
    buf.writeBigInt64LE(BigInt(timestamp), at);
    buf.writeInt32LE(relativeOffset, at + 8);
  }

  protected decodeKey(buf: Buffer, at: number): number {
    return Number(buf.readBigInt64LE(at));
  }

  protected decodeValue(buf: Buffer, at: number): number {
    return buf.readInt32LE(at + 8);
  }

  /** Relative offset to start a scan for the first batch with a commit timestamp >= `timestamp`. */
  lookup(timestamp: number): number {
    const i = this.floor(timestamp);
    return i < 0 ? 0 : this.valueAt(i);
  }
}
