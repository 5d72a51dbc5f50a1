/**
 * node:test's `before` and `after`, loaded when a fixture registers its hooks rather than when its
 * module loads: benchmarks use the same fixtures, and a process that loads the test runner prints
 * a test report on its stdout when it exits, where a benchmark's child answers.
 */
import { createRequire } from 'node:module';

export function suiteHooks(): Pick<typeof import('node:test'), 'before' | 'after'> {
  return createRequire(import.meta.url)('node:test') as typeof import('node:test');
}
