/**
 * `tributary start`: runs one embedded node (coordinator + tablet server) until SIGTERM or SIGINT,
 * then shuts down gracefully. An embedded lake tiering worker runs beside it, on a thread of its
 * own (embedded-tiering.ts), unless `--no-tiering`. Prints exactly one line to stdout once it
 * serves: `ready …`.
 */
import path from 'node:path';
import { lakeCacheDir, optionDefault, Options } from '../common/config.js';
import { parseListener, TributaryServer } from '../server/server.js';
import { createLogger } from '../common/logger.js';
import { EmbeddedTiering } from './embedded-tiering.js';
import { readConfigFile } from './settings.js';
import { onShutdown } from './tiering.js';

export interface StartFlags {
  dataDir?: string;
  host?: string;
  port?: string;
  httpPort?: string;
  config?: string;
  set?: Record<string, string>;
  /** commander's `--no-tiering`: false turns the embedded tiering worker off. */
  tiering?: boolean;
}

export function serverSettings(flags: StartFlags): Record<string, string> {
  const settings: Record<string, string> = { ...(flags.config ? readConfigFile(flags.config) : {}), ...(flags.set ?? {}) };
  if (flags.dataDir) settings['data.dir'] = flags.dataDir;
  if (flags.port !== undefined || flags.host !== undefined) {
    // The flag not given keeps its part of the configured listener.
    const listener = parseListener(settings['bind.listeners'] ?? optionDefault('bind.listeners'));
    settings['bind.listeners'] = `TRIBUTARY://${flags.host ?? listener.host}:${flags.port ?? listener.port}`;
  }
  if (flags.httpPort !== undefined) settings['http.port'] = flags.httpPort;
  return settings;
}

export async function start(flags: StartFlags): Promise<void> {
  const log = createLogger();
  const settings = serverSettings(flags);
  const server = await TributaryServer.start(settings, log);
  const { rpcAddress: rpc, httpAddress: http } = server;
  // The embedded tiering worker is a client of this node like any other worker.
  let worker: EmbeddedTiering | undefined;
  try {
    worker = flags.tiering === false ? undefined : await EmbeddedTiering.start(`${rpc.host}:${rpc.port}`, settings, path.join(lakeCacheDir(new Options('server', settings)), 'tiering'));
  } catch (err) {
    await server.stop();
    throw err;
  }
  process.stdout.write(`ready bootstrap=${rpc.host}:${rpc.port} http=${http.host}:${http.port}\n`);
  onShutdown(log, async () => {
    await worker?.stop();
    await server.stop();
  });
}
