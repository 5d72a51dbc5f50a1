/**
 * Starts a worker thread on one of the project's modules, given by its URL without the extension:
 * compiled, modules are .js files; under tsx (tests, benchmarks) they are .ts, and tsx's loader
 * hooks do not reach worker threads on Node 20, so the entry is loaded through tsx's API.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';

const EXTENSION = path.extname(fileURLToPath(import.meta.url));

/** `base` is the module's URL without its extension, e.g. `new URL('./data-file-worker', import.meta.url)`. */
export function startModuleWorker(base: URL, options: Omit<WorkerOptions, 'eval'> = {}): Worker {
  const url = new URL(`${base.href}${EXTENSION}`);
  if (EXTENSION !== '.ts') return new Worker(url, options);
  const tsx = JSON.stringify(import.meta.resolve('tsx/esm/api'));
  return new Worker(`import(${tsx}).then((api) => api.tsImport(${JSON.stringify(url.href)}, ${JSON.stringify(import.meta.url)}))`, { ...options, eval: true });
}
