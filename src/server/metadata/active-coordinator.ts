/**
 * Where the active coordinator is: the elected coordinator writes its address once it leads, and
 * tablet servers read it (and watch it) to know whom to send AdjustIsr and ControlledShutdown to.
 *
 *   <root>/coordinators/active   ephemeral, owned by the active coordinator's session; JSON
 *                                {version: 1, id, host, port, epoch}
 *
 * The znode goes with the coordinator's session; the next one elected writes its own. One left by a
 * coordinator that resigned while keeping its session is replaced by the next leader.
 */
import { ZooKeeperConflict, type ZooKeeperSession } from './zookeeper-session.js';

export interface ActiveCoordinator {
  id: number;
  host: string;
  port: number;
  /** Its coordinator epoch (coordinator-election.ts): requests it sends carry it. */
  epoch: number;
}

const activeZnode = (root: string): string => `${root}/coordinators/active`;

/** Publishes `coordinator` as the active one; only the elected leader calls it. */
export async function publishActiveCoordinator(session: ZooKeeperSession, root: string, coordinator: ActiveCoordinator): Promise<void> {
  await session.ensure([root, `${root}/coordinators`]);
  const data = Buffer.from(JSON.stringify({ version: 1, ...coordinator }));
  for (;;) {
    try {
      await session.create(activeZnode(root), data, 'ephemeral');
      return;
    } catch (err) {
      if (!(err instanceof ZooKeeperConflict && err.code === 'NODE_EXISTS')) throw err;
    }
    // A deposed leader's: it keeps its session but no longer leads.
    try {
      await session.remove(activeZnode(root), -1);
    } catch (err) {
      if (!(err instanceof ZooKeeperConflict && err.code === 'NO_NODE')) throw err;
    }
  }
}

/**
 * The active coordinator, or undefined while none is; with `watch`, called once when that changes
 * (a coordinator appears, is replaced or goes).
 */
export async function readActiveCoordinator(session: ZooKeeperSession, root: string, watch?: () => void): Promise<ActiveCoordinator | undefined> {
  // exists() sets a watch even on a missing znode, which get() would not.
  if (!(await session.exists(activeZnode(root), watch))) return undefined;
  const node = await session.get(activeZnode(root));
  if (!node) return undefined;
  const { id, host, port, epoch } = JSON.parse(node.data.toString('utf8')) as ActiveCoordinator & { version: 1 };
  return { id, host, port, epoch };
}
