/**
 * `tributary coordinator-server` and `tributary tablet-server`: the two processes of a cluster on
 * ZooKeeper. They take the flags of `start` and print one `ready …` line once they serve, with
 * their HTTP address when they have one (a coordinator always; a tablet server with --http-port or
 * http.port); a coordinator that is not elected yet serves as a standby and says so, at the HTTP
 * address it keeps once it leads. Each runs until SIGTERM or
 * SIGINT. A coordinator that loses its ZooKeeper session (and with it the lead) exits with code 1,
 * for its supervisor to start it again as a new candidate.
 */
import { createLogger } from '../common/logger.js';
import type { Address } from '../server/server.js';
import { ClusterTabletServer } from '../server/cluster-tablet-server.js';
import { CoordinatorServer } from '../server/coordinator-server.js';
import { serverSettings, type StartFlags } from './start.js';
import { stopOnShutdown } from './shutdown.js';

export async function coordinatorServer(flags: StartFlags): Promise<void> {
  const log = createLogger().child({ role: 'coordinator-server' });
  const server = await stopOnShutdown(log, CoordinatorServer.start(serverSettings(flags), log), (s) => s.stop());
  const { host, port } = server.rpcAddress;
  process.stdout.write(`ready bootstrap=${host}:${port}${httpPart(server.httpAddress)}${server.standby ? ' standby' : ''}\n`);
  server.on('deposed', (err) => {
    log.error({ err }, 'deposed: exiting so that a supervisor starts this coordinator again');
    void server.stop().finally(() => log.flush(() => process.exit(1)));
  });
}

export async function tabletServer(flags: StartFlags): Promise<void> {
  const log = createLogger().child({ role: 'tablet-server' });
  const server = await stopOnShutdown(log, ClusterTabletServer.start(serverSettings(flags), log), (s) => s.stop());
  const { host, port } = server.rpcAddress;
  const kafka = server.kafkaAddress ? ` kafka=${server.kafkaAddress.host}:${server.kafkaAddress.port}` : '';
  process.stdout.write(`ready bootstrap=${host}:${port}${httpPart(server.httpAddress)}${kafka} tablet-server=${server.id}\n`);
}

const httpPart = (http: Address | undefined): string => (http ? ` http=${http.host}:${http.port}` : '');
