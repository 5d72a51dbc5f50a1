/**
 * InitProducerId (key 22), versions 0-4, flexible from 2.
 *
 *   request   TransactionalId nullable string, TransactionTimeoutMs int32,
 *             ProducerId int64 (v3+), ProducerEpoch int16 (v3+)
 *   response  ThrottleTimeMs int32, ErrorCode int16, ProducerId int64, ProducerEpoch int16
 */
import { kafkaApi } from '../api.js';
import { field as f, message } from '../schema.js';

export interface InitProducerIdRequest {
  transactionalId: string | null;
  transactionTimeoutMs: number;
  producerId: bigint;
  producerEpoch: number;
}

export interface InitProducerIdResponse {
  throttleTimeMs: number;
  errorCode: number;
  producerId: bigint;
  producerEpoch: number;
}

export const InitProducerId = kafkaApi<InitProducerIdRequest, InitProducerIdResponse>(
  22,
  'InitProducerId',
  0,
  4,
  message('InitProducerIdRequest', '2+', [
    f('TransactionalId', 'string', '0+', { nullableVersions: '0+' }),
    f('TransactionTimeoutMs', 'int32', '0+'),
    f('ProducerId', 'int64', '3+', { default: -1n }),
    f('ProducerEpoch', 'int16', '3+', { default: -1 }),
  ]),
  message('InitProducerIdResponse', '2+', [f('ThrottleTimeMs', 'int32', '0+'), f('ErrorCode', 'int16', '0+'), f('ProducerId', 'int64', '0+', { default: -1n }), f('ProducerEpoch', 'int16', '0+')]),
);
