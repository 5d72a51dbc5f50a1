/**
 * The Kafka APIs on Tributary: each handler turns one Kafka request into calls of the node's own
 * APIs (backend.ts) and their answers into the Kafka response. Topic names are tables of
 * `kafka.database` (topic-mapping.ts); partition errors travel inside responses as Kafka's codes.
 */
import type * as arrow from 'apache-arrow';
import { tableOption } from '../common/config.js';
import { ErrorCodes, errorNameOf, TributaryError } from '../common/errors.js';
import { schemaFromJson, type Schema, type TableInfo, tableInfoFromJson } from '../common/schema.js';
import { ApiKeys } from '../rpc/api-keys.js';
import { toArrowSchema } from '../record/arrow-schema.js';
import { ColumnBatchBuilder } from '../record/column-batch-builder.js';
import { decodeArrowPayload, encodeArrowPayload } from '../record/arrow-payload.js';
import type { ArrowCompression } from '../record/compression.js';
import { buildLogBatch, logBatchPayload, readLogBatchHeader, splitLogBatches } from '../record/log-batch.js';
import type { KafkaBrokerNode, LakeHistory, LakeRun, TributaryBackend } from './backend.js';
import { FetchBudget, type PartitionBudget } from './fetch-budget.js';
import { LakeFetch } from './lake-fetch.js';
import { ProduceTurns } from './produce-turns.js';
import { KafkaErrors, kafkaErrorOf } from './protocol/error-codes.js';
import { KAFKA_APIS } from './protocol/apis/index.js';
import type { ApiVersionsResponse } from './protocol/apis/api-versions.js';
import type { CreatePartitionsRequest, CreatePartitionsResponse } from './protocol/apis/create-partitions.js';
import type { CreateTopicsRequest, CreateTopicsResponse } from './protocol/apis/create-topics.js';
import type { DeleteTopicsRequest, DeleteTopicsResponse } from './protocol/apis/delete-topics.js';
import { type DescribeConfigsRequest, type DescribeConfigsResponse, RESOURCE_TOPIC, SOURCE_DEFAULT_CONFIG, SOURCE_TOPIC_CONFIG } from './protocol/apis/describe-configs.js';
import type { FetchPartitionResponse, FetchRequest, FetchResponse } from './protocol/apis/fetch.js';
import type { InitProducerIdRequest, InitProducerIdResponse } from './protocol/apis/init-producer-id.js';
import { EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, type ListOffsetsRequest, type ListOffsetsResponse } from './protocol/apis/list-offsets.js';
import type { MetadataRequest, MetadataResponse, MetadataTopic } from './protocol/apis/metadata.js';
import type { ProducePartitionResponse, ProduceRequest, ProduceResponse } from './protocol/apis/produce.js';
import { openBatch, splitBatches } from './records/record-batch.js';
import { CompressionError } from './records/compression.js';
import { KafkaDecodeError } from './protocol/primitives.js';
import { GroupCoordinator, type GroupCoordinatorOptions } from './groups/group-coordinator.js';
import { RAW_TOPIC_COLUMNS, topicMapping, type TopicMapping } from './topic-mapping.js';

export interface KafkaBrokerOptions {
  database: string;
  autoCreateTopics: boolean;
  defaultPartitions: number;
  /** Most Kafka record batch bytes of one Fetch response (`kafka.fetch.max-bytes`). */
  fetchMaxBytes: number;
  /** Lake reads kept open between fetches below lake-enabled topics' log start (`kafka.fetch.lake-cursors`). */
  lakeCursors: number;
  /** Most bytes one produced batch may decompress to (`rpc.max-frame-size`). */
  maxBatchBytes: number;
  /** Longest a Fetch may wait (`rpc.max-wait`). */
  maxWaitMs: number;
  /** This server's id: the Kafka node id of the broker that answers. */
  nodeId: number;
  /** The Kafka listeners of the servers that lead buckets, by server id. */
  brokers: () => KafkaBrokerNode[];
  clusterId: string;
  /** The consumer groups' limits and timers (groups/group-coordinator.ts). */
  groups: Omit<GroupCoordinatorOptions, 'database' | 'nodeId' | 'brokers' | 'partitionsOf'>;
}

/** What FetchLog answered for one bucket. */
interface FetchedBucket {
  highWatermark: bigint;
  logStartOffset: bigint;
  errorCode?: number;
  records: Uint8Array;
}

interface Topic {
  table: TableInfo;
  mapping: TopicMapping;
  /** Bucket → leader server id, leader epoch, replicas, ISR. */
  buckets: { bucketId: number; leaderId: number; leaderEpoch: number; replicaId: number[]; isr: number[] }[];
}

/**
 * Produce conversion keeps a column builder per table schema for its next batch
 * (`buildToEncode`), for at most `REUSED_BUILDERS` schemas; a batch larger than
 * MAX_REUSED_BATCH_BYTES hands its arrays away, so each builder holds about that much at most.
 */
const MAX_REUSED_BATCH_BYTES = 4 << 20;
const REUSED_BUILDERS = 4;

const OFFSET_EARLIEST = 0;
const OFFSET_LATEST = 1;
const OFFSET_TIMESTAMP = 2;
const OFFSET_OUT_OF_RANGE = ErrorCodes.LOG_OFFSET_OUT_OF_RANGE_EXCEPTION;

/** A named error's Kafka code and message, for a partition or topic entry or a whole request. */
export function kafkaFailure(err: unknown): { errorCode: number; errorMessage: string } {
  if (err instanceof KafkaDecodeError || err instanceof CompressionError) return { errorCode: KafkaErrors.CORRUPT_MESSAGE, errorMessage: err.message };
  if (err instanceof TributaryError) return { errorCode: KafkaErrors[kafkaErrorOf(err.errorName)], errorMessage: err.message };
  return { errorCode: KafkaErrors.UNKNOWN_SERVER_ERROR, errorMessage: err instanceof Error ? err.message : String(err) };
}

export class KafkaBroker {
  private readonly arrowSchemas = new Map<string, { schema: Schema; arrow: arrow.Schema }>();
  /** FindCoordinator, the group APIs and the committed offsets. */
  readonly groups: GroupCoordinator;
  /** Fetches below the log start of lake-enabled topics. */
  private readonly lake: LakeFetch;
  private readonly produceTurns = new ProduceTurns();
  /** By table id and schema id, least recently used first; see REUSED_BUILDERS. */
  private readonly builders = new Map<string, ColumnBatchBuilder>();

  constructor(
    private readonly backend: TributaryBackend,
    lake: LakeHistory,
    private readonly options: KafkaBrokerOptions,
  ) {
    const { database, nodeId, brokers } = options;
    this.lake = new LakeFetch(lake, options.lakeCursors);
    this.groups = new GroupCoordinator(backend, { ...options.groups, database, nodeId, brokers, partitionsOf: async (name) => (await this.topic(name)).buckets.length });
  }

  /** Makes sure `kafka.database` exists, then starts the group coordinator. */
  async start(): Promise<void> {
    await this.ensureDatabase();
    await this.groups.start();
  }

  apiVersions(): ApiVersionsResponse {
    return { errorCode: 0, apiKeys: KAFKA_APIS.map((a) => ({ apiKey: a.key, minVersion: a.minVersion, maxVersion: a.maxVersion })), throttleTimeMs: 0 };
  }

  /** ApiVersions at a version this broker does not speak: version 0 with the versions it does. */
  unsupportedApiVersions(): ApiVersionsResponse {
    return { ...this.apiVersions(), errorCode: KafkaErrors.UNSUPPORTED_VERSION };
  }

  // ------------------------------------------------------------------ topics

  private path(name: string) {
    return { databaseName: this.options.database, tableName: name };
  }

  private async topic(name: string, create = false): Promise<Topic> {
    let resp;
    try {
      resp = await this.backend.call(ApiKeys.GetMetadata, { tablePath: [this.path(name)] });
    } catch (err) {
      if (!create || !(err instanceof TributaryError) || err.errorName !== 'TABLE_NOT_EXIST') throw err;
      await this.createRawTopic(name, this.options.defaultPartitions, -1).catch((e: unknown) => {
        if (!(e instanceof TributaryError) || e.errorName !== 'TABLE_ALREADY_EXIST') throw e;
      });
      resp = await this.backend.call(ApiKeys.GetMetadata, { tablePath: [this.path(name)] });
    }
    const meta = resp.tableMetadata[0];
    if (!meta) throw new TributaryError('TABLE_NOT_EXIST', `topic '${name}' does not exist`);
    const table = tableInfoFromJson(JSON.parse(meta.tableJson));
    return { table, mapping: topicMapping(table), buckets: meta.bucketMetadata };
  }

  /**
   * Creates the topic's table, and `kafka.database` if it is missing: the listener creates it when it
   * starts, but a tablet server's listener may start while no coordinator is active.
   */
  private async createRawTopic(name: string, partitions: number, replicationFactor: number): Promise<void> {
    try {
      await this.createRawTable(name, partitions, replicationFactor);
    } catch (err) {
      if (!(err instanceof TributaryError) || err.errorName !== 'DATABASE_NOT_EXIST') throw err;
      await this.ensureDatabase();
      await this.createRawTable(name, partitions, replicationFactor);
    }
  }

  /** Creates `kafka.database` unless it exists. */
  async ensureDatabase(): Promise<void> {
    await this.backend.call(ApiKeys.CreateDatabase, { databaseName: this.options.database, databaseJson: '{}', ignoreIfExists: true });
  }

  private async createRawTable(name: string, partitions: number, replicationFactor: number): Promise<void> {
    await this.backend.call(ApiKeys.CreateTable, {
      tablePath: this.path(name),
      tableJson: JSON.stringify({
        columns: RAW_TOPIC_COLUMNS,
        bucketCount: partitions > 0 ? partitions : this.options.defaultPartitions,
        properties: { 'kafka.value.format': 'raw', ...(replicationFactor > 0 ? { 'table.replication.factor': String(replicationFactor) } : {}) },
      }),
      ignoreIfExists: false,
    });
  }

  private async schemaOf(table: TableInfo, schemaId: number): Promise<{ schema: Schema; arrow: arrow.Schema }> {
    const key = `${table.tableId}/${schemaId}`;
    let found = this.arrowSchemas.get(key);
    if (!found) {
      const schema =
        schemaId === table.schemaId
          ? table.schema
          : schemaFromJson(JSON.parse((await this.backend.call(ApiKeys.GetTableSchema, { tablePath: this.path(table.path.table), schemaId })).schemaJson));
      found = { schema, arrow: toArrowSchema(schema) };
      this.arrowSchemas.set(key, found);
    }
    return found;
  }

  // ------------------------------------------------------------------ Metadata

  /** `version`: v0 has no null topic array, so its empty one means every topic; from v1 an empty one means none. */
  async metadata(req: MetadataRequest, version: number): Promise<MetadataResponse> {
    let names: string[];
    if (req.topics === null || (version === 0 && req.topics.length === 0)) {
      names = await this.backend.call(ApiKeys.ListTables, { databaseName: this.options.database }).then(
        (r) => r.tableNames,
        (err: unknown) => {
          // No topic was created yet.
          if (err instanceof TributaryError && err.errorName === 'DATABASE_NOT_EXIST') return [];
          throw err;
        },
      );
    } else names = req.topics.map((t) => t.name);
    const listing = req.topics === null || req.topics.length === 0;
    const create = this.options.autoCreateTopics && req.allowAutoTopicCreation && !listing;
    const topics = await Promise.all(names.map((name) => this.topicMetadata(name, create)));
    return {
      brokers: this.options.brokers(),
      clusterId: this.options.clusterId,
      controllerId: this.options.nodeId,
      // A listing leaves out the tables of the database that are not topics.
      topics: listing ? topics.filter((t) => t.errorCode === 0) : topics,
    };
  }

  private async topicMetadata(name: string, create: boolean): Promise<MetadataTopic> {
    try {
      const { buckets } = await this.topic(name, create);
      return {
        errorCode: 0,
        name,
        isInternal: false,
        partitions: buckets.map((b) => ({
          errorCode: b.leaderId < 0 ? KafkaErrors.LEADER_NOT_AVAILABLE : 0,
          partitionIndex: b.bucketId,
          leaderId: b.leaderId,
          leaderEpoch: b.leaderEpoch,
          replicaNodes: b.replicaId.length > 0 ? b.replicaId : [b.leaderId],
          isrNodes: b.isr.length > 0 ? b.isr : [b.leaderId],
          offlineReplicas: [],
        })),
      };
    } catch (err) {
      return { errorCode: kafkaFailure(err).errorCode, name, isInternal: false, partitions: [] };
    }
  }

  // ------------------------------------------------------------------ CreateTopics / DeleteTopics / CreatePartitions / DescribeConfigs

  async createTopics(req: CreateTopicsRequest): Promise<CreateTopicsResponse> {
    const topics = await Promise.all(
      req.topics.map(async (t) => {
        try {
          if (t.assignments.length > 0) throw new TributaryError('INVALID_ARGUMENT', 'manual partition assignments are not supported: the coordinator places buckets');
          if (t.configs.length > 0) throw new TributaryError('INVALID_CONFIG_EXCEPTION', `topic configs (${t.configs.map((c) => c.name).join(', ')}) are not supported: set table options with ALTER TABLE`);
          if (!req.validateOnly) await this.createRawTopic(t.name, t.numPartitions, t.replicationFactor);
          return { name: t.name, errorCode: 0, errorMessage: null };
        } catch (err) {
          return { name: t.name, ...kafkaFailure(err) };
        }
      }),
    );
    return { throttleTimeMs: 0, topics };
  }

  async deleteTopics(req: DeleteTopicsRequest): Promise<DeleteTopicsResponse> {
    const responses = await Promise.all(
      req.topicNames.map(async (name) => {
        try {
          await this.topic(name);
          await this.backend.call(ApiKeys.DropTable, { tablePath: this.path(name), ignoreIfNotExists: false, purge: false });
          return { name, errorCode: 0, errorMessage: null };
        } catch (err) {
          return { name, ...kafkaFailure(err) };
        }
      }),
    );
    return { throttleTimeMs: 0, responses };
  }

  createPartitions(req: CreatePartitionsRequest): CreatePartitionsResponse {
    return {
      throttleTimeMs: 0,
      results: req.topics.map((t) => ({
        name: t.name,
        errorCode: KafkaErrors.INVALID_PARTITIONS,
        errorMessage: `the partitions of topic '${t.name}' are the buckets of its table, whose number is fixed when the table is created`,
      })),
    };
  }

  async describeConfigs(req: DescribeConfigsRequest): Promise<DescribeConfigsResponse> {
    const results = await Promise.all(
      req.resources.map(async (r) => {
        const head = { resourceType: r.resourceType, resourceName: r.resourceName };
        try {
          let entries: [string, string, boolean][] = [];
          if (r.resourceType === RESOURCE_TOPIC) {
            const { table } = await this.topic(r.resourceName);
            entries = [
              ['cleanup.policy', 'delete', true],
              ['retention.ms', String(table.properties['table.log.ttl'] ?? '7d'), table.properties['table.log.ttl'] === undefined],
              ...Object.entries(table.properties).map(([k, v]): [string, string, boolean] => [k, v, false]),
            ];
          } else {
            entries = [['num.partitions', String(this.options.defaultPartitions), false], ['auto.create.topics.enable', String(this.options.autoCreateTopics), false]];
          }
          const wanted = r.configurationKeys;
          const configs = entries
            .filter(([k]) => wanted === null || wanted.includes(k))
            .map(([name, value, isDefault]) => ({ name, value, readOnly: true, isDefault, configSource: isDefault ? SOURCE_DEFAULT_CONFIG : SOURCE_TOPIC_CONFIG, isSensitive: false, synonyms: [] }));
          return { errorCode: 0, errorMessage: null, ...head, configs };
        } catch (err) {
          return { ...kafkaFailure(err), ...head, configs: [] };
        }
      }),
    );
    return { throttleTimeMs: 0, results };
  }

  // ------------------------------------------------------------------ InitProducerId

  async initProducerId(req: InitProducerIdRequest): Promise<InitProducerIdResponse> {
    if (req.transactionalId !== null) {
      return { throttleTimeMs: 0, errorCode: KafkaErrors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producerId: -1n, producerEpoch: -1 };
    }
    const { writerId } = await this.backend.call(ApiKeys.InitWriter, {});
    return { throttleTimeMs: 0, errorCode: 0, producerId: writerId, producerEpoch: 0 };
  }

  // ------------------------------------------------------------------ Produce

  async produce(req: ProduceRequest): Promise<ProduceResponse> {
    const responses = await Promise.all(
      req.topics.map(async (t) => {
        // Taken before the first await, so in the order the listener started the requests.
        const turn = this.produceTurns.take(t.partitions.map((p) => `${t.name}/${p.partitionIndex}`));
        let topic: Topic;
        try {
          if (req.transactionalId !== null) throw new TributaryError('INVALID_ARGUMENT', 'transactions are not supported');
          topic = await this.topic(t.name, this.options.autoCreateTopics);
          await turn.ready;
        } catch (err) {
          turn.end();
          const { errorCode, errorMessage } = kafkaFailure(err);
          return { name: t.name, partitions: t.partitions.map((p) => producePartition(p.partitionIndex, errorCode, errorMessage)) };
        }
        const prepared = t.partitions.map((p) => {
          try {
            return { partition: p.partitionIndex, records: this.toLogBatches(topic, p.records) };
          } catch (err) {
            return { partition: p.partitionIndex, error: err };
          }
        });
        const good = prepared.filter((p): p is { partition: number; records: Buffer } => 'records' in p);
        const answered = new Map<number, ProducePartitionResponse>();
        for (const p of prepared) if ('error' in p) answered.set(p.partition, producePartition(p.partition, kafkaFailure(p.error).errorCode, kafkaFailure(p.error).errorMessage));
        if (good.length === 0) turn.end();
        else {
          try {
            const produced = this.backend.call(ApiKeys.ProduceLog, {
              acks: req.acks,
              tableId: BigInt(topic.table.tableId),
              timeoutMs: Math.max(0, req.timeoutMs),
              bucketsReq: good.map((p) => ({ bucketId: p.partition, records: p.records })),
            });
            // The call has handed the batches to the logs (the node's own APIs run up to the log's
            // append queue before they first wait): the next request of these partitions may go.
            turn.end();
            const resp = await produced;
            for (const b of resp.bucketsResp) {
              const code = b.errorCode === undefined ? 0 : KafkaErrors[kafkaErrorOf(errorNameOf(b.errorCode))];
              answered.set(b.bucketId, { ...producePartition(b.bucketId, code, b.errorMessage ?? null), baseOffset: b.errorCode === undefined ? b.baseOffset : -1n });
            }
          } catch (err) {
            turn.end();
            const { errorCode, errorMessage } = kafkaFailure(err);
            for (const p of good) answered.set(p.partition, producePartition(p.partition, errorCode, errorMessage));
          }
        }
        return { name: t.name, partitions: t.partitions.map((p) => answered.get(p.partitionIndex)!) };
      }),
    );
    return { responses, throttleTimeMs: 0 };
  }

  /**
   * One log batch per Kafka batch, with as many records, so offsets stay equal. An idempotent
   * producer's batch keeps its producer id as the writer id and its last record's sequence, the
   * batch marked as counting records (log-batch.ts), so the writer state checks Kafka's rules.
   */
  private toLogBatches(topic: Topic, records: Buffer | null): Buffer {
    if (records === null || records.length === 0) throw new TributaryError('CORRUPT_MESSAGE', 'the partition has no record batch');
    const out: Buffer[] = [];
    const builder = this.builderOf(topic.table);
    const compression = tableOption(topic.table.properties, 'table.log.arrow.compression.type') as ArrowCompression;
    const zstdLevel = Number(tableOption(topic.table.properties, 'table.log.arrow.compression.zstd.level'));
    for (const raw of splitBatches(records)) {
      const batch = openBatch(raw, this.options.maxBatchBytes);
      // The records are read (and checked) first, so a batch that does not decode fails as that.
      topic.mapping.append(builder, batch.records);
      if (batch.transactional || batch.control) throw new TributaryError('INVALID_ARGUMENT', 'transactional and control batches are not supported');
      if (batch.recordCount === 0) throw new TributaryError('CORRUPT_MESSAGE', 'a record batch without records');
      const idempotent = batch.producerId >= 0n && batch.baseSequence >= 0;
      out.push(
        buildLogBatch({
          schemaId: topic.table.schemaId,
          appendOnly: true,
          recordCount: batch.recordCount,
          payload: encodeArrowPayload(builder.buildToEncode(MAX_REUSED_BATCH_BYTES), compression, zstdLevel),
          ...(idempotent ? { writerId: batch.producerId, batchSequence: (batch.baseSequence + batch.recordCount - 1) % 2 ** 31, recordSequences: true } : {}),
        }),
      );
    }
    return out.length === 1 ? out[0] : Buffer.concat(out);
  }

  /** The reused builder of the table's current schema (conversion is synchronous: one user at a time). */
  private builderOf(table: TableInfo): ColumnBatchBuilder {
    const key = `${table.tableId}/${table.schemaId}`;
    let builder = this.builders.get(key);
    this.builders.delete(key);
    // Rows left by a conversion that failed between append and build (a transactional batch is
    // refused once its records are read) are not this batch's.
    if (!builder || builder.rowCount > 0) {
      builder = new ColumnBatchBuilder(table.schema);
      if (this.builders.size >= REUSED_BUILDERS) this.builders.delete(this.builders.keys().next().value!);
    }
    this.builders.set(key, builder);
    return builder;
  }

  // ------------------------------------------------------------------ ListOffsets

  async listOffsets(req: ListOffsetsRequest): Promise<ListOffsetsResponse> {
    const topics = await Promise.all(
      req.topics.map(async (t) => {
        let topic: Topic;
        try {
          topic = await this.topic(t.name);
        } catch (err) {
          return { name: t.name, partitions: t.partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode: kafkaFailure(err).errorCode, timestamp: -1n, offset: -1n, leaderEpoch: -1 })) };
        }
        const partitions = await Promise.all(
          t.partitions.map(async (p) => {
            const ts = p.timestamp;
            const head = { partitionIndex: p.partitionIndex, timestamp: -1n, leaderEpoch: topic.buckets.find((b) => b.bucketId === p.partitionIndex)?.leaderEpoch ?? -1 };
            // -3 (max timestamp) and the newer special timestamps need record timestamps indexed, which logs do not.
            if (ts < 0n && ts !== EARLIEST_TIMESTAMP && ts !== LATEST_TIMESTAMP) return { ...head, errorCode: KafkaErrors.UNSUPPORTED_VERSION, offset: -1n };
            const offsetType = ts === EARLIEST_TIMESTAMP ? OFFSET_EARLIEST : ts === LATEST_TIMESTAMP ? OFFSET_LATEST : OFFSET_TIMESTAMP;
            try {
              const resp = await this.backend.call(ApiKeys.ListOffsets, {
                followerServerId: -1,
                offsetType,
                tableId: BigInt(topic.table.tableId),
                bucketId: [p.partitionIndex],
                ...(offsetType === OFFSET_TIMESTAMP ? { startTimestamp: ts } : {}),
              });
              const b = resp.bucketsResp[0];
              if (b.errorCode !== undefined) return { ...head, errorCode: KafkaErrors[kafkaErrorOf(errorNameOf(b.errorCode))], offset: -1n };
              // The earliest of a lake-enabled topic is the lake's, which holds what retention deleted from the log.
              if (offsetType === OFFSET_EARLIEST && b.offset > 0n && LakeFetch.enabledFor(topic.table) && (await this.lake.holds(topic.table, p.partitionIndex, 0n))) return { ...head, errorCode: 0, offset: 0n };
              return { ...head, errorCode: 0, offset: b.offset, timestamp: offsetType === OFFSET_TIMESTAMP ? ts : -1n };
            } catch (err) {
              return { ...head, errorCode: kafkaFailure(err).errorCode, offset: -1n };
            }
          }),
        );
        return { name: t.name, partitions };
      }),
    );
    return { throttleTimeMs: 0, topics };
  }

  // ------------------------------------------------------------------ Fetch

  async fetch(req: FetchRequest): Promise<FetchResponse> {
    const resolved = await Promise.all(
      req.topics.map(async (t) => {
        try {
          return { t, topic: await this.topic(t.topic), error: undefined };
        } catch (err) {
          return { t, topic: undefined, error: err };
        }
      }),
    );
    const readable = resolved.filter((r): r is { t: FetchRequest['topics'][number]; topic: Topic; error: undefined } => r.topic !== undefined);
    /** FetchLog's answers of the readable topics, in order, by partition. */
    const byTopic: Map<number, FetchedBucket>[] = [];
    const maxBytes = Math.min(req.maxBytes > 0 ? req.maxBytes : this.options.fetchMaxBytes, this.options.fetchMaxBytes);
    if (readable.length > 0) {
      const resp = await this.backend.call(ApiKeys.FetchLog, {
        followerServerId: -1,
        maxBytes,
        minBytes: req.minBytes,
        maxWaitMs: Math.min(Math.max(0, req.maxWaitMs), this.options.maxWaitMs),
        tablesReq: readable.map(({ t, topic }) => ({
          tableId: BigInt(topic.table.tableId),
          bucketsReq: t.partitions.map((p) => ({ bucketId: p.partition, fetchOffset: p.fetchOffset, maxFetchBytes: p.partitionMaxBytes })),
        })),
      });
      for (const tr of resp.tablesResp) byTopic.push(new Map(tr.bucketsResp.map((b) => [b.bucketId, b])));
    }
    // Partitions take their share of the response in request order (fetch-budget.ts).
    const budget = new FetchBudget(maxBytes);
    const responses: FetchResponse['responses'] = [];
    let next = 0;
    for (const r of resolved) {
      if (!r.topic) {
        responses.push({ topic: r.t.topic, partitions: r.t.partitions.map((p) => fetchPartition(p.partition, kafkaFailure(r.error).errorCode)) });
        continue;
      }
      const topic = r.topic;
      const answers = byTopic[next++];
      const partitions: FetchPartitionResponse[] = [];
      for (const p of r.t.partitions) partitions.push(await this.answerPartition(topic, p, answers.get(p.partition), budget.partition(p.partitionMaxBytes)));
      responses.push({ topic: r.t.topic, partitions });
    }
    return { throttleTimeMs: 0, errorCode: 0, sessionId: 0, responses };
  }

  /** One partition's answer from what FetchLog read of it (`b`), the records within `budget`. */
  private async answerPartition(topic: Topic, p: FetchRequest['topics'][number]['partitions'][number], b: FetchedBucket | undefined, budget: PartitionBudget): Promise<FetchPartitionResponse> {
    if (!b) return fetchPartition(p.partition, KafkaErrors.UNKNOWN_TOPIC_OR_PARTITION);
    try {
      if (b.errorCode === OFFSET_OUT_OF_RANGE && LakeFetch.enabledFor(topic.table)) {
        const answer = await this.fetchFromLake(topic, p.partition, p.fetchOffset, budget);
        if (answer) return answer;
      }
      if (b.errorCode !== undefined) return { ...fetchPartition(p.partition, KafkaErrors[kafkaErrorOf(errorNameOf(b.errorCode))]), highWatermark: b.highWatermark, logStartOffset: b.logStartOffset };
      await this.toKafkaBatches(topic, b.records, p.fetchOffset, budget);
      return { ...fetchPartition(p.partition, 0), highWatermark: b.highWatermark, lastStableOffset: b.highWatermark, logStartOffset: b.logStartOffset, records: budget.records() };
    } catch (err) {
      return fetchPartition(p.partition, kafkaFailure(err).errorCode);
    }
  }

  /**
   * A partition's fetch below its log start, from the lake (lake-fetch.ts): its rows from `offset`,
   * or, when the lake has none there, the log from where the lake ends. Undefined when the lake
   * does not hold `offset` either.
   */
  private async fetchFromLake(topic: Topic, bucket: number, offset: bigint, budget: PartitionBudget): Promise<FetchPartitionResponse | undefined> {
    const read = await this.lake.read(topic.table, bucket, offset, budget, (run) => topic.mapping.records(run.batch, topic.table.schema, BigInt(run.timestamp)));
    if (!read) return undefined;
    const answer = (highWatermark: bigint): FetchPartitionResponse => ({ ...fetchPartition(bucket, 0), highWatermark, lastStableOffset: highWatermark, logStartOffset: 0n, records: budget.records() });
    const tableId = BigInt(topic.table.tableId);
    if (budget.sent || budget.full) {
      const latest = (await this.backend.call(ApiKeys.ListOffsets, { followerServerId: -1, offsetType: OFFSET_LATEST, tableId, bucketId: [bucket] })).bucketsResp[0];
      if (latest.errorCode !== undefined) return fetchPartition(bucket, KafkaErrors[kafkaErrorOf(errorNameOf(latest.errorCode))]);
      return answer(latest.offset);
    }
    const room = budget.room;
    const resp = await this.backend.call(ApiKeys.FetchLog, {
      followerServerId: -1,
      maxBytes: room,
      minBytes: 0,
      maxWaitMs: 0,
      tablesReq: [{ tableId, bucketsReq: [{ bucketId: bucket, fetchOffset: read.endOffset, maxFetchBytes: room }] }],
    });
    const b = resp.tablesResp[0].bucketsResp[0];
    if (b.errorCode !== undefined) return { ...fetchPartition(bucket, KafkaErrors[kafkaErrorOf(errorNameOf(b.errorCode))]), highWatermark: b.highWatermark };
    await this.toKafkaBatches(topic, b.records, read.endOffset, budget);
    return answer(b.highWatermark);
  }

  /**
   * Adds the log batches' records from `from` to `budget` as Kafka batches, each at its log offset
   * (Kafka offset = log offset). Rows below `from` are left out: a fetch may start inside a stored
   * batch that an earlier fetch cut. Batches past what the budget takes are not decoded.
   */
  private async toKafkaBatches(topic: Topic, records: Uint8Array, from: bigint, budget: PartitionBudget): Promise<void> {
    for (const stored of splitLogBatches(Buffer.from(records.buffer, records.byteOffset, records.byteLength))) {
      if (budget.full) return;
      const h = readLogBatchHeader(stored);
      const skip = from > h.baseOffset ? Number(from - h.baseOffset) : 0;
      if (!h.appendOnly || skip > h.lastOffsetDelta) continue;
      const { schema, arrow: arrowSchema } = await this.schemaOf(topic.table, h.schemaId);
      const batch = decodeArrowPayload(arrowSchema, logBatchPayload(stored));
      const rows = skip > 0 ? batch.slice(skip) : batch;
      budget.add({ baseOffset: h.baseOffset + BigInt(skip), partitionLeaderEpoch: h.leaderEpoch, records: topic.mapping.records(rows, schema, h.commitTimestamp) });
    }
  }
}

function producePartition(partitionIndex: number, errorCode: number, errorMessage: string | null): ProducePartitionResponse {
  return { partitionIndex, errorCode, baseOffset: -1n, logAppendTimeMs: -1n, logStartOffset: -1n, recordErrors: [], errorMessage: errorCode === 0 ? null : errorMessage };
}

function fetchPartition(partitionIndex: number, errorCode: number): FetchPartitionResponse {
  return { partitionIndex, errorCode, highWatermark: -1n, lastStableOffset: -1n, logStartOffset: -1n, abortedTransactions: null, preferredReadReplica: -1, records: null };
}

