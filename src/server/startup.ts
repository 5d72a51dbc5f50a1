/**
 * What every server process does the same way: claim its data directory, warn of what on the host
 * lengthens latency tails (host-checks.ts), open its parts one by one so that a start failing
 * half-way closes what it opened (in reverse), releases the lock and removes the data dir if it
 * created it; build its RPC listener from the server options; and let the data dir go at the end
 * of its stop.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ServerActivity } from '../common/activity.js';
import { lakeCacheDir, type Options } from '../common/config.js';
import { makeDirectory } from '../common/files.js';
import type { Logger } from '../common/logger.js';
import { initArrowCompression } from '../record/compression.js';
import { RpcServer } from '../rpc/server.js';
import { DataDirLock } from './data-dir-lock.js';
import { warnOfMemoryMonitors } from './host-checks.js';
import type { NodeMetrics } from './metrics.js';
import { DataDisk } from './tablet/data-disk.js';
import { configureObjectStorage } from '../storage/stores.js';

/** Closing steps of the parts opened so far, in opening order. */
export type Undo = (() => Promise<unknown>)[];

/** What every server has on its claimed data dir before its own parts: the lock, the periodic tasks, the data disk's watch. */
export interface ServerBase {
  dataDir: string;
  lock: DataDirLock;
  activity: ServerActivity;
  disk: DataDisk;
  /** Where the server pushes the closing of each part it opens. */
  undo: Undo;
}

/** Claims `data.dir`, opens the server base on it and runs `open`; a failure undoes every pushed step, then throws the named error. */
export async function startOnDataDir<T>(options: Options, log: Logger, open: (base: ServerBase) => Promise<T>): Promise<T> {
  const dataDir = path.resolve(options.string('data.dir')!);
  const createdDir = await makeDirectory(dataDir, 'INVALID_DATA_DIR');
  const undo: Undo = [];
  try {
    const lock = await DataDirLock.acquire(dataDir);
    undo.push(() => lock.abandon());
    warnOfMemoryMonitors(log);
    await initArrowCompression();
    configureObjectStorage(options, lakeCacheDir(options));
    const activity = new ServerActivity(log.child({ role: 'activity' }));
    undo.push(async () => activity.close());
    const disk = await DataDisk.start(dataDir, options, log.child({ role: 'data-disk' }), activity);
    undo.push(async () => disk.stop());
    return await open({ dataDir, lock, activity, disk, undo });
  } catch (err) {
    for (const step of undo.reverse()) await step().catch((e: unknown) => log.warn({ err: e }, 'cleanup after a failed start failed'));
    if (createdDir) await fs.promises.rm(createdDir, { recursive: true, force: true });
    throw err;
  }
}

/** The last steps of every server's stop, once its parts are closed: the data disk's watch, the periodic tasks, the data dir's lock. */
export async function releaseDataDir(disk: DataDisk, activity: ServerActivity, lock: DataDirLock): Promise<void> {
  disk.stop();
  activity.close();
  await lock.release();
}

/** The RPC listener of a server, with its limits from the options; `metrics` counts its requests. */
export function rpcServerOf(options: Options, listen: { host: string; port: number }, log: Logger, metrics: () => NodeMetrics | undefined): RpcServer {
  return new RpcServer({
    host: listen.host,
    port: listen.port,
    maxFrameBytes: options.bytes('rpc.max-frame-size'),
    maxInflightBytes: options.bytes('server.buffer.memory-size'),
    frameTimeoutMs: options.durationMs('rpc.frame-timeout'),
    idleTimeoutMs: options.durationMs('netty.connection.max-idle-time'),
    logger: log.child({ role: 'rpc' }),
    onAnswered: (api, seconds, errorName) => metrics()?.requestDone(api.name, seconds, errorName),
    onDeadlineClosed: (deadline) => metrics()?.connectionClosed(deadline, 'rpc'),
  });
}
