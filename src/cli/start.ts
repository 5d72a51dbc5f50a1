/**
 * `tributary start`: runs one embedded node (coordinator + tablet server) until SIGTERM or SIGINT,
 * then shuts down gracefully. Prints exactly one line to stdout once it serves: `ready …`.
 */
import { TributaryServer } from '../server/server.js';
import { createLogger } from '../server/logger.js';
import { readConfigFile } from './settings.js';

export interface StartFlags {
  dataDir?: string;
  host?: string;
  port?: string;
  httpPort?: string;
  config?: string;
  set?: Record<string, string>;
}

export function serverSettings(flags: StartFlags): Record<string, string> {
  const settings: Record<string, string> = { ...(flags.config ? readConfigFile(flags.config) : {}), ...(flags.set ?? {}) };
  if (flags.dataDir) settings['data.dir'] = flags.dataDir;
  if (flags.port !== undefined || flags.host !== undefined) {
    settings['bind.listeners'] = `TRIBUTARY://${flags.host ?? '127.0.0.1'}:${flags.port ?? '9123'}`;
  }
  if (flags.httpPort !== undefined) settings['http.port'] = flags.httpPort;
  return settings;
}

export async function start(flags: StartFlags): Promise<void> {
  const log = createLogger();
  const server = await TributaryServer.start(serverSettings(flags), log);
  const { rpcAddress: rpc, httpAddress: http } = server;
  process.stdout.write(`ready bootstrap=${rpc.host}:${rpc.port} http=${http.host}:${http.port}\n`);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutdown requested');
    server.stop().then(
      () => log.flush(() => process.exit(0)),
      (err) => {
        log.error({ err }, 'shutdown failed');
        log.flush(() => process.exit(1));
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

