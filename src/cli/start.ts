/**
 * `tributary start`: runs one embedded node (coordinator + tablet server) until SIGTERM or SIGINT,
 * then shuts down gracefully. An embedded lake tiering worker runs beside it, on a thread of its
 * own (embedded-tiering.ts), unless `--no-tiering`. Prints exactly one line to stdout once it
 * serves: `ready …`.
 */
import path from 'node:path';
import { lakeCacheDir, optionDefault, Options } from '../common/config.js';
import { parseListener, TributaryServer } from '../server/server.js';
import { parseListeners } from '../kafka/index.js';
import { createLogger, type Logger } from '../common/logger.js';
import { EmbeddedTiering } from './embedded-tiering.js';
import { readConfigFile } from './settings.js';
import { stopOnShutdown } from './shutdown.js';

export interface StartFlags {
  dataDir?: string;
  host?: string;
  port?: string;
  httpPort?: string;
  /** `--kafka-port`: turns kafka.enabled on with a KAFKA listener on this port. */
  kafkaPort?: string;
  config?: string;
  set?: Record<string, string>;
  /** commander's `--no-tiering`: false turns the embedded tiering worker off. */
  tiering?: boolean;
}

export function serverSettings(flags: StartFlags): Record<string, string> {
  const settings: Record<string, string> = { ...(flags.config ? readConfigFile(flags.config) : {}), ...(flags.set ?? {}) };
  if (flags.dataDir) settings['data.dir'] = flags.dataDir;
  const kafkaName = settings['kafka.listener.names'] ?? optionDefault('kafka.listener.names');
  if (flags.port !== undefined || flags.host !== undefined || flags.kafkaPort !== undefined) {
    // The flag not given keeps its part of the configured listener; other listeners stay.
    const spec = settings['bind.listeners'] ?? optionDefault('bind.listeners');
    const listener = parseListener(spec, kafkaName);
    const host = flags.host ?? listener.host;
    const others = parseListeners(spec).filter((l) => l.name !== 'TRIBUTARY' && l.name !== '' && (flags.kafkaPort === undefined || l.name !== kafkaName));
    const kafka = flags.kafkaPort !== undefined ? [`${kafkaName}://${host}:${flags.kafkaPort}`] : [];
    settings['bind.listeners'] = [`TRIBUTARY://${host}:${flags.port ?? listener.port}`, ...others.map((l) => `${l.name}://${l.host}:${l.port}`), ...kafka].join(',');
    if (flags.kafkaPort !== undefined) settings['kafka.enabled'] = 'true';
  }
  if (flags.httpPort !== undefined) settings['http.port'] = flags.httpPort;
  return settings;
}

export async function start(flags: StartFlags): Promise<void> {
  const log = createLogger();
  const settings = serverSettings(flags);
  const { server } = await stopOnShutdown(log, startNode(flags, settings, log), async ({ server, worker }) => {
    await worker?.stop();
    await server.stop();
  });
  const { rpcAddress: rpc, httpAddress: http } = server;
  const kafka = server.kafkaAddress ? ` kafka=${server.kafkaAddress.host}:${server.kafkaAddress.port}` : '';
  process.stdout.write(`ready bootstrap=${rpc.host}:${rpc.port} http=${http.host}:${http.port}${kafka}\n`);
}

/** The node and, unless --no-tiering, its embedded tiering worker. */
async function startNode(flags: StartFlags, settings: Record<string, string>, log: Logger): Promise<{ server: TributaryServer; worker?: EmbeddedTiering }> {
  const server = await TributaryServer.start(settings, log);
  const { rpcAddress: rpc } = server;
  // The embedded tiering worker is a client of this node like any other worker.
  try {
    if (flags.tiering === false) return { server };
    return { server, worker: await EmbeddedTiering.start(`${rpc.host}:${rpc.port}`, settings, path.join(lakeCacheDir(new Options('server', settings)), 'tiering')) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}
