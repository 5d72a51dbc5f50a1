/**
 * The byte budget of one Fetch response, as Kafka's (KIP-74): it counts the Kafka record batch
 * bytes sent, not the log's stored bytes (compressed Arrow, often many times smaller), so the
 * response stays within the consumer's max bytes and each partition within its partition max
 * bytes. A client holds the server to them: librdkafka drops a connection whose response is larger
 * than its receive.message.max.bytes. A batch that does not fit is cut to the records that do;
 * the first partition with data sends at least one record whatever its size, so a consumer never
 * stalls on a record larger than its limits. Partitions take their share in request order.
 */
import { batchRecordCount, encodeBatchWithin, type NewKafkaBatch } from './records/record-batch.js';

export class FetchBudget {
  /** Bytes the response may still carry. */
  left: number;
  /** Whether any record is in the response yet. */
  sentAny = false;

  constructor(maxBytes: number) {
    this.left = Math.max(1, maxBytes);
  }

  /** The next partition's share: up to `partitionMaxBytes` (≤ 0: no limit of its own) of what is left. */
  partition(partitionMaxBytes: number): PartitionBudget {
    return new PartitionBudget(this, partitionMaxBytes > 0 ? partitionMaxBytes : Number.POSITIVE_INFINITY);
  }
}

export class PartitionBudget {
  private readonly batches: Buffer[] = [];
  private cut = false;

  constructor(
    private readonly response: FetchBudget,
    private left: number,
  ) {}

  /** Bytes the partition may still send. */
  get room(): number {
    return Math.min(this.left, this.response.left);
  }

  /** Whether the partition takes no more records: a batch was cut, or no byte is left. */
  get full(): boolean {
    return this.cut || this.room <= 0;
  }

  /** Whether any record was added. */
  get sent(): boolean {
    return this.batches.length > 0;
  }

  /**
   * Adds the records of `batch` as one Kafka batch, as many as fit (their offsets from its base);
   * returns how many. Fewer than all, and the partition is full.
   */
  add(batch: NewKafkaBatch): number {
    if (this.full || batch.records.length === 0) return 0;
    const encoded = encodeBatchWithin(batch, this.room, !this.response.sentAny);
    const count = encoded ? batchRecordCount(encoded) : 0;
    if (count < batch.records.length) this.cut = true;
    if (!encoded) return 0;
    this.batches.push(encoded);
    this.left -= encoded.length;
    this.response.left -= encoded.length;
    this.response.sentAny = true;
    return count;
  }

  /** The Kafka batches added, in order. */
  records(): Buffer {
    return this.batches.length === 1 ? this.batches[0] : Buffer.concat(this.batches);
  }
}
