/**
 * Election of the active coordinator through ZooKeeper, with a fencing epoch.
 *
 *   <root>/coordinators/election/candidate_<sequence>   ephemeral sequential, one per candidate; data
 *                                                       = the candidate's id as JSON
 *   <root>/coordinators/epoch                           JSON number: the epoch of the latest leader
 *
 * The candidate with the lowest sequence leads. Every other candidate watches only the one just
 * below it (no herd when the leader goes), and looks again when that one's znode is deleted. A
 * candidate that finds itself lowest increments the epoch (compare-and-set) before it calls itself
 * leader, so every leader has a higher epoch than all before it, and whoever receives a request
 * carrying an older epoch knows its sender was deposed. A leader's candidate znode lives as long as
 * its session: closing the session or letting it expire hands leadership on. The first leader's
 * epoch is 1. Once elected, a leader learns that it lost the lead from its session's `expired` event.
 *
 * The leader's `fence` is the epoch znode at the version its own increment left: a metadata store
 * opened with it checks that version in every transaction, so once a newer leader has incremented
 * the epoch, a deposed leader that still believes it leads (paused, cut off, not yet expired)
 * cannot write anything, not even to paths the new leader has not touched.
 */
import { TributaryError } from '../../common/errors.js';
import { type EpochFence, ZooKeeperConflict, type ZooKeeperSession } from './zookeeper-session.js';

const PREFIX = 'candidate_';
/** Wait before looking again after a failed look (e.g. while reconnecting). */
const RETRY_MS = 1_000;

const sequenceOf = (name: string): number => Number(name.slice(PREFIX.length));

export interface Leadership {
  epoch: number;
  fence: EpochFence;
}

export class CoordinatorElection {
  /** Resolves once this candidate leads; rejects if its session expires or it resigns first. */
  readonly elected: Promise<Leadership>;
  private win!: (leadership: Leadership) => void;
  private lose!: (err: Error) => void;
  private done = false;
  /** Looks run one after another: two at once could both find the candidate lowest and increment the epoch twice. */
  private looking: Promise<void> = Promise.resolve();
  private readonly onExpired = (): void => this.finish(new TributaryError('STORAGE_EXCEPTION', `the ZooKeeper session of election candidate ${this.name} expired`));

  private constructor(
    private readonly session: ZooKeeperSession,
    private readonly dir: string,
    private readonly epochZnode: string,
    /** This candidate's znode name (`candidate_<sequence>`). */
    readonly name: string,
  ) {
    this.elected = new Promise((resolve, reject) => {
      this.win = resolve;
      this.lose = reject;
    });
    // The caller may never wait for `elected`; a rejection nobody awaits must not crash the process.
    this.elected.catch(() => undefined);
    session.on('expired', this.onExpired);
  }

  /**
   * Enters `candidateId` into the election under `root` and returns once it leads or watches its
   * predecessor; await `elected` to learn when it leads.
   */
  static async join(session: ZooKeeperSession, root: string, candidateId: string): Promise<CoordinatorElection> {
    const dir = `${root}/coordinators/election`;
    await session.ensure([root, `${root}/coordinators`, dir]);
    const created = await session.create(`${dir}/${PREFIX}`, Buffer.from(JSON.stringify(candidateId)), 'ephemeral-sequential');
    const election = new CoordinatorElection(session, dir, `${root}/coordinators/epoch`, created.slice(dir.length + 1));
    await election.look();
    return election;
  }

  /** Leaves the election (a leader steps down): deletes this candidate's znode. */
  async resign(): Promise<void> {
    this.finish(new TributaryError('STORAGE_EXCEPTION', `election candidate ${this.name} resigned`));
    try {
      await this.session.remove(`${this.dir}/${this.name}`, -1);
    } catch (err) {
      if (!(err instanceof ZooKeeperConflict && err.code === 'NO_NODE')) throw err;
    }
  }

  private look(): Promise<void> {
    this.looking = this.looking.then(() => this.lookOnce());
    return this.looking;
  }

  /** Leads if this candidate is the lowest, else watches its predecessor. */
  private async lookOnce(): Promise<void> {
    try {
      while (!this.done) {
        const candidates = (await this.session.children(this.dir)).filter((n) => n.startsWith(PREFIX)).sort((a, b) => sequenceOf(a) - sequenceOf(b));
        const at = candidates.indexOf(this.name);
        if (at < 0) throw new TributaryError('STORAGE_EXCEPTION', `election candidate ${this.name} is gone from ${this.dir}`);
        if (at === 0) {
          const leadership = await this.nextEpoch();
          if (!this.done) {
            this.done = true;
            this.session.off('expired', this.onExpired);
            this.win(leadership);
          }
          return;
        }
        // The watch fires once, when the predecessor's znode is deleted; then look again.
        if (await this.session.exists(`${this.dir}/${candidates[at - 1]}`, () => void this.look())) return;
        // The predecessor went between the listing and the watch: look again now.
      }
    } catch (err) {
      if (err instanceof TributaryError && err.errorName === 'NETWORK_EXCEPTION') setTimeout(() => void this.look(), RETRY_MS).unref();
      else this.finish(err as Error);
    }
  }

  private async nextEpoch(): Promise<Leadership> {
    for (;;) {
      const current = await this.session.get(this.epochZnode);
      const epoch = current ? (JSON.parse(current.data.toString('utf8')) as number) + 1 : 1;
      const data = Buffer.from(JSON.stringify(epoch));
      try {
        const version = current ? await this.session.set(this.epochZnode, data, current.version) : (await this.session.create(this.epochZnode, data), 0);
        return { epoch, fence: { znode: this.epochZnode, version } };
      } catch (err) {
        if (!(err instanceof ZooKeeperConflict)) throw err;
      }
    }
  }

  private finish(err: Error): void {
    if (this.done) return;
    this.done = true;
    this.session.off('expired', this.onExpired);
    this.lose(err);
  }
}
