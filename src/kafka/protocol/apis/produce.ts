/**
 * Produce (key 0), versions 3-9 (3 is the first with record batch v2), flexible from 9.
 *
 *   request   TransactionalId nullable string, Acks int16, TimeoutMs int32,
 *             Topics [Name string, Partitions [PartitionIndex int32, Records nullable records]]
 *   response  Responses [Name string,
 *                        Partitions [PartitionIndex int32, ErrorCode int16, BaseOffset int64,
 *                                    LogAppendTimeMs int64, LogStartOffset int64 (v5+),
 *                                    RecordErrors [BatchIndex int32, BatchIndexErrorMessage
 *                                                  nullable string] (v8+),
 *                                    ErrorMessage nullable string (v8+)]],
 *             ThrottleTimeMs int32
 *
 * A request with Acks 0 gets no response at all.
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface ProduceRequest {
  transactionalId: string | null;
  acks: number;
  timeoutMs: number;
  topics: { name: string; partitions: { partitionIndex: number; records: Buffer | null }[] }[];
}

export interface ProducePartitionResponse {
  partitionIndex: number;
  errorCode: number;
  baseOffset: bigint;
  logAppendTimeMs: bigint;
  logStartOffset: bigint;
  recordErrors: { batchIndex: number; batchIndexErrorMessage: string | null }[];
  errorMessage: string | null;
}

export interface ProduceResponse {
  responses: { name: string; partitions: ProducePartitionResponse[] }[];
  throttleTimeMs: number;
}

export const Produce = kafkaApi<ProduceRequest, ProduceResponse>(
  0,
  'Produce',
  3,
  9,
  message('ProduceRequest', '9+', [
    f('TransactionalId', 'string', '3+', { nullableVersions: '3+', default: null }),
    f('Acks', 'int16', '0+'),
    f('TimeoutMs', 'int32', '0+'),
    f('Topics', { array: [f('Name', 'string', '0+'), f('Partitions', { array: [f('PartitionIndex', 'int32', '0+'), f('Records', 'records', '0+', { nullableVersions: '0+' })] }, '0+')] }, '0+'),
  ]),
  message('ProduceResponse', '9+', [
    f(
      'Responses',
      {
        array: [
          f('Name', 'string', '0+'),
          f(
            'Partitions',
            {
              array: [
                f('PartitionIndex', 'int32', '0+'),
                f('ErrorCode', 'int16', '0+'),
                f('BaseOffset', 'int64', '0+', { default: -1n }),
                f('LogAppendTimeMs', 'int64', '2+', { default: -1n }),
                f('LogStartOffset', 'int64', '5+', { default: -1n }),
                f('RecordErrors', { array: [f('BatchIndex', 'int32', '8+'), f('BatchIndexErrorMessage', 'string', '8+', { nullableVersions: '8+', default: null })] }, '8+'),
                f('ErrorMessage', 'string', '8+', { nullableVersions: '8+', default: null }),
              ],
            },
            '0+',
          ),
        ],
      },
      '0+',
    ),
    f('ThrottleTimeMs', 'int32', '1+'),
  ]),
  { response: 'responses', request: 'topics', keys: { name: 'name' }, items: { response: 'partitions', request: 'partitions', keys: { partitionIndex: 'partitionIndex' } } },
);
