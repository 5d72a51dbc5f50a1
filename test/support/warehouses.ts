/**
 * The warehouses the lake e2e tests run on, one test body for each: the node's own directory, and
 * an s3:// warehouse on a real S3-protocol server (s3rver on loopback) that the servers, their
 * tiering workers and the test's client reach with the same `s3.*` options.
 */
import { describe } from 'node:test';
import type { ClusterOptions } from './cluster.js';

export interface Warehouse {
  name: 'local' | 's3';
  /** What a cluster on this warehouse is started with, besides a test's own options. */
  cluster: Pick<ClusterOptions, 'objectStorage'>;
}

export const WAREHOUSES: readonly Warehouse[] = [
  { name: 'local', cluster: {} },
  { name: 's3', cluster: { objectStorage: { warehouse: true } } },
];

/** The suite `body`, once per warehouse, each in a `describe` named after it. */
export function onEachWarehouse(title: string, body: (warehouse: Warehouse) => void): void {
  for (const w of WAREHOUSES) describe(`${title} (${w.name} warehouse)`, () => body(w));
}
