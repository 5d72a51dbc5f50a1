/** Every API the Kafka listener serves, by key. */
import type { KafkaApi } from '../api.js';
import { ApiVersions } from './api-versions.js';
import { CreatePartitions } from './create-partitions.js';
import { CreateTopics } from './create-topics.js';
import { DeleteTopics } from './delete-topics.js';
import { DescribeConfigs } from './describe-configs.js';
import { Fetch } from './fetch.js';
import { InitProducerId } from './init-producer-id.js';
import { ListOffsets } from './list-offsets.js';
import { Metadata } from './metadata.js';
import { Produce } from './produce.js';

export { ApiVersions, CreatePartitions, CreateTopics, DeleteTopics, DescribeConfigs, Fetch, InitProducerId, ListOffsets, Metadata, Produce };

export const KAFKA_APIS: readonly KafkaApi[] = [Produce, Fetch, ListOffsets, Metadata, ApiVersions, CreateTopics, DeleteTopics, InitProducerId, DescribeConfigs, CreatePartitions] as KafkaApi[];
