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
import { FindCoordinator } from './find-coordinator.js';
import { JoinGroup } from './join-group.js';
import { SyncGroup } from './sync-group.js';
import { Heartbeat } from './heartbeat.js';
import { LeaveGroup } from './leave-group.js';
import { OffsetCommit } from './offset-commit.js';
import { OffsetFetch } from './offset-fetch.js';
import { ListGroups } from './list-groups.js';
import { DescribeGroups } from './describe-groups.js';

export {
  ApiVersions,
  CreatePartitions,
  CreateTopics,
  DeleteTopics,
  DescribeConfigs,
  DescribeGroups,
  Fetch,
  FindCoordinator,
  Heartbeat,
  InitProducerId,
  JoinGroup,
  LeaveGroup,
  ListGroups,
  ListOffsets,
  Metadata,
  OffsetCommit,
  OffsetFetch,
  Produce,
  SyncGroup,
};

export const KAFKA_APIS: readonly KafkaApi[] = [
  Produce,
  Fetch,
  ListOffsets,
  Metadata,
  OffsetCommit,
  OffsetFetch,
  FindCoordinator,
  JoinGroup,
  Heartbeat,
  LeaveGroup,
  SyncGroup,
  DescribeGroups,
  ListGroups,
  ApiVersions,
  CreateTopics,
  DeleteTopics,
  InitProducerId,
  DescribeConfigs,
  CreatePartitions,
] as KafkaApi[];
