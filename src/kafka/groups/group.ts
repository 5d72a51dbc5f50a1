/**
 * One consumer group's membership: Kafka's classic group protocol, as a state machine.
 *
 *   Empty ──join──> PreparingRebalance ──every member joined, or rebalance timeout──> CompletingRebalance
 *     ^                 ^        │                                                     │ leader's SyncGroup
 *     │                 │        └──no member left──> Empty                            v
 *     │                 └──── a member joins, leaves, expires or changes protocols ── Stable
 *     └── Dead: the group is no longer coordinated here (every waiting request gets NOT_COORDINATOR)
 *
 * Invariants:
 * - the generation id steps by one each time a join phase ends, also when it ends with no member;
 * - in CompletingRebalance and Stable every member joined the current generation, and the leader
 *   is one of them; members that did not join again before the join phase ended are removed;
 * - a member not waiting in JoinGroup is removed when no heartbeat, SyncGroup or commit of it
 *   came for its session timeout.
 *
 * Protocols and assignments are carried opaquely: the coordinator picks the protocol every member
 * supports (by the members' preference votes) and hands the leader the members' metadata of it;
 * the leader's assignments go back to each member untouched. The group is driven by the calls of
 * its coordinator and by timers from `GroupTimers`, so tests run it on a hand-turned clock.
 */
import { randomUUID } from 'node:crypto';
import { TributaryError } from '../../common/errors.js';
import type { KafkaErrorName } from '../protocol/error-codes.js';

export type GroupState = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable' | 'Dead';

export interface GroupTimers {
  /** Runs `fn` after `ms`; the returned function cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export interface GroupLimits {
  minSessionTimeoutMs: number;
  maxSessionTimeoutMs: number;
  /** How long a group that was empty waits for more members before its first join phase ends. */
  initialRebalanceDelayMs: number;
  maxMembers: number;
  /** Most bytes of one member's protocol metadata, and of one assignment. */
  maxMetadataBytes: number;
}

export interface GroupProtocol {
  name: string;
  metadata: Buffer;
}

export interface JoinRequest {
  memberId: string;
  clientId: string;
  clientHost: string;
  sessionTimeoutMs: number;
  /** -1: the session timeout (JoinGroup v0). */
  rebalanceTimeoutMs: number;
  protocolType: string;
  protocols: GroupProtocol[];
}

export interface JoinResult {
  errorCode: KafkaErrorName;
  generationId: number;
  protocolName: string;
  leader: string;
  memberId: string;
  /** The leader's answer only: every member and its metadata of the chosen protocol. */
  members: { memberId: string; metadata: Buffer }[];
}

export interface SyncResult {
  errorCode: KafkaErrorName;
  assignment: Buffer;
}

export interface MemberView {
  memberId: string;
  clientId: string;
  clientHost: string;
  metadata: Buffer;
  assignment: Buffer;
}

interface Member {
  memberId: string;
  clientId: string;
  clientHost: string;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  protocols: GroupProtocol[];
  assignment: Buffer;
  joining?: (r: JoinResult) => void;
  syncing?: (r: SyncResult) => void;
  cancelSession?: () => void;
}

const EMPTY = Buffer.alloc(0);

export class ConsumerGroup {
  private stateNow: GroupState = 'Empty';
  private generation = 0;
  private protocolTypeNow = '';
  private protocolNow = '';
  private leaderId = '';
  private readonly members = new Map<string, Member>();
  private cancelRebalance: (() => void)[] = [];
  /** Until the initial delay has passed, the join phase of a group that was empty stays open. */
  private delaying = false;

  constructor(
    readonly groupId: string,
    private readonly limits: GroupLimits,
    private readonly timers: GroupTimers,
  ) {}

  get state(): GroupState {
    return this.stateNow;
  }
  get generationId(): number {
    return this.generation;
  }
  get protocolType(): string {
    return this.protocolTypeNow;
  }
  /** The protocol chosen for the current generation ('' while there is none). */
  get protocol(): string {
    return this.stateNow === 'CompletingRebalance' || this.stateNow === 'Stable' ? this.protocolNow : '';
  }
  get leader(): string {
    return this.leaderId;
  }
  get memberCount(): number {
    return this.members.size;
  }

  describeMembers(): MemberView[] {
    return [...this.members.values()].map((m) => ({
      memberId: m.memberId,
      clientId: m.clientId,
      clientHost: m.clientHost,
      metadata: m.protocols.find((p) => p.name === this.protocol)?.metadata ?? EMPTY,
      assignment: m.assignment,
    }));
  }

  // ------------------------------------------------------------------ JoinGroup

  join(r: JoinRequest): Promise<JoinResult> {
    const refuse = (errorCode: KafkaErrorName): Promise<JoinResult> => Promise.resolve(joinError(errorCode, r.memberId));
    if (this.stateNow === 'Dead') return refuse('NOT_COORDINATOR');
    if (r.sessionTimeoutMs < this.limits.minSessionTimeoutMs || r.sessionTimeoutMs > this.limits.maxSessionTimeoutMs) return refuse('INVALID_SESSION_TIMEOUT');
    if (r.protocolType === '' || r.protocols.length === 0) return refuse('INCONSISTENT_GROUP_PROTOCOL');
    for (const p of r.protocols) {
      if (p.metadata.length > this.limits.maxMetadataBytes) {
        throw new TributaryError('GROUP_METADATA_TOO_LARGE', `the metadata of protocol '${p.name}' of a member of group '${this.groupId}' has ${p.metadata.length} bytes, more than kafka.group.max-metadata-size (${this.limits.maxMetadataBytes})`);
      }
    }
    const existing = r.memberId === '' ? undefined : this.members.get(r.memberId);
    if (r.memberId !== '' && !existing) return refuse('UNKNOWN_MEMBER_ID');
    if (!this.acceptsProtocols(r, existing)) return refuse('INCONSISTENT_GROUP_PROTOCOL');
    const rebalanceTimeoutMs = r.rebalanceTimeoutMs > 0 ? r.rebalanceTimeoutMs : r.sessionTimeoutMs;

    if (!existing) {
      if (this.members.size >= this.limits.maxMembers) {
        throw new TributaryError('GROUP_MAX_SIZE_REACHED', `group '${this.groupId}' has ${this.members.size} members, as many as kafka.group.max-members allows`);
      }
      const member: Member = { memberId: `${r.clientId || 'member'}-${randomUUID()}`, clientId: r.clientId, clientHost: r.clientHost, sessionTimeoutMs: r.sessionTimeoutMs, rebalanceTimeoutMs, protocols: r.protocols, assignment: EMPTY };
      if (this.members.size === 0) this.protocolTypeNow = r.protocolType;
      this.members.set(member.memberId, member);
      const joined = this.awaitJoin(member);
      if (this.stateNow !== 'PreparingRebalance') this.prepareRebalance();
      this.tryCompleteJoin();
      return joined;
    }

    const same = sameProtocols(existing.protocols, r.protocols);
    Object.assign(existing, { clientId: r.clientId, clientHost: r.clientHost, sessionTimeoutMs: r.sessionTimeoutMs, rebalanceTimeoutMs, protocols: r.protocols });
    if (same && (this.stateNow === 'CompletingRebalance' || (this.stateNow === 'Stable' && existing.memberId !== this.leaderId))) {
      // A join again with nothing changed (its answer was lost, or a follower rejoins): the current generation.
      return Promise.resolve(this.joinResult(existing));
    }
    const joined = this.awaitJoin(existing);
    if (this.stateNow !== 'PreparingRebalance') this.prepareRebalance();
    this.tryCompleteJoin();
    return joined;
  }

  /** Whether a member may join: same protocol type, and a protocol every member would share. */
  private acceptsProtocols(r: JoinRequest, self: Member | undefined): boolean {
    const others = [...this.members.values()].filter((m) => m !== self);
    if (others.length === 0) return true;
    if (r.protocolType !== this.protocolTypeNow) return false;
    return r.protocols.some((p) => others.every((m) => m.protocols.some((q) => q.name === p.name)));
  }

  private awaitJoin(m: Member): Promise<JoinResult> {
    m.joining?.(joinError('REBALANCE_IN_PROGRESS', m.memberId));
    m.cancelSession?.();
    m.cancelSession = undefined;
    return new Promise((resolve) => (m.joining = resolve));
  }

  private prepareRebalance(): void {
    for (const m of this.members.values()) {
      m.syncing?.({ errorCode: 'REBALANCE_IN_PROGRESS', assignment: EMPTY });
      m.syncing = undefined;
    }
    const wasEmpty = this.stateNow === 'Empty';
    this.stateNow = 'PreparingRebalance';
    this.stopRebalanceTimers();
    const timeout = Math.max(0, ...[...this.members.values()].map((m) => m.rebalanceTimeoutMs));
    if (wasEmpty && this.limits.initialRebalanceDelayMs > 0) {
      this.delaying = true;
      this.cancelRebalance.push(
        this.timers.after(Math.min(this.limits.initialRebalanceDelayMs, timeout), () => {
          this.delaying = false;
          this.tryCompleteJoin();
        }),
      );
    }
    this.cancelRebalance.push(this.timers.after(timeout, () => this.completeJoin()));
  }

  private tryCompleteJoin(): void {
    if (this.stateNow !== 'PreparingRebalance') return;
    if (this.members.size > 0 && (this.delaying || [...this.members.values()].some((m) => !m.joining))) return;
    this.completeJoin();
  }

  /** Ends the join phase: members that did not join again leave, and a generation begins. */
  private completeJoin(): void {
    if (this.stateNow !== 'PreparingRebalance') return;
    this.stopRebalanceTimers();
    for (const m of [...this.members.values()]) if (!m.joining) this.dropMember(m);
    this.generation++;
    if (this.members.size === 0) {
      this.stateNow = 'Empty';
      this.protocolNow = '';
      this.leaderId = '';
      return;
    }
    this.protocolNow = this.selectProtocol();
    if (!this.members.has(this.leaderId)) this.leaderId = this.members.keys().next().value!;
    this.stateNow = 'CompletingRebalance';
    for (const m of this.members.values()) {
      m.assignment = EMPTY;
      const answer = m.joining!;
      m.joining = undefined;
      this.armSession(m);
      answer(this.joinResult(m));
    }
  }

  /** The protocol all members support that most members prefer (their first choice among those). */
  private selectProtocol(): string {
    const all = [...this.members.values()];
    const candidates = all[0].protocols.map((p) => p.name).filter((name) => all.every((m) => m.protocols.some((p) => p.name === name)));
    const votes = new Map<string, number>(candidates.map((c) => [c, 0]));
    for (const m of all) {
      const choice = m.protocols.find((p) => votes.has(p.name))!.name;
      votes.set(choice, votes.get(choice)! + 1);
    }
    let best = candidates[0];
    for (const c of candidates) if (votes.get(c)! > votes.get(best)!) best = c;
    return best;
  }

  private joinResult(m: Member): JoinResult {
    const leader = m.memberId === this.leaderId;
    return {
      errorCode: 'NONE',
      generationId: this.generation,
      protocolName: this.protocolNow,
      leader: this.leaderId,
      memberId: m.memberId,
      members: leader ? [...this.members.values()].map((x) => ({ memberId: x.memberId, metadata: x.protocols.find((p) => p.name === this.protocolNow)!.metadata })) : [],
    };
  }

  // ------------------------------------------------------------------ SyncGroup, Heartbeat, LeaveGroup, commits

  sync(memberId: string, generationId: number, assignments: { memberId: string; assignment: Buffer }[]): Promise<SyncResult> {
    const refuse = (errorCode: KafkaErrorName): Promise<SyncResult> => Promise.resolve({ errorCode, assignment: EMPTY });
    if (this.stateNow === 'Dead') return refuse('NOT_COORDINATOR');
    const m = this.members.get(memberId);
    if (!m) return refuse('UNKNOWN_MEMBER_ID');
    if (generationId !== this.generation) return refuse('ILLEGAL_GENERATION');
    if (this.stateNow === 'PreparingRebalance') return refuse('REBALANCE_IN_PROGRESS');
    this.armSession(m);
    if (this.stateNow === 'Stable') return Promise.resolve({ errorCode: 'NONE', assignment: m.assignment });
    // CompletingRebalance: wait for the leader's assignments.
    const synced = new Promise<SyncResult>((resolve) => (m.syncing = resolve));
    if (memberId === this.leaderId) {
      for (const a of assignments) {
        if (a.assignment.length > this.limits.maxMetadataBytes) {
          throw new TributaryError('GROUP_METADATA_TOO_LARGE', `the assignment of a member of group '${this.groupId}' has ${a.assignment.length} bytes, more than kafka.group.max-metadata-size (${this.limits.maxMetadataBytes})`);
        }
      }
      const given = new Map(assignments.map((a) => [a.memberId, a.assignment]));
      this.stateNow = 'Stable';
      for (const x of this.members.values()) {
        x.assignment = given.get(x.memberId) ?? EMPTY;
        x.syncing?.({ errorCode: 'NONE', assignment: x.assignment });
        x.syncing = undefined;
      }
    }
    return synced;
  }

  heartbeat(memberId: string, generationId: number): KafkaErrorName {
    if (this.stateNow === 'Dead') return 'NOT_COORDINATOR';
    const m = this.members.get(memberId);
    if (!m) return 'UNKNOWN_MEMBER_ID';
    if (generationId !== this.generation) return 'ILLEGAL_GENERATION';
    if (!m.joining) this.armSession(m);
    return this.stateNow === 'PreparingRebalance' ? 'REBALANCE_IN_PROGRESS' : 'NONE';
  }

  leave(memberId: string): KafkaErrorName {
    if (this.stateNow === 'Dead') return 'NOT_COORDINATOR';
    const m = this.members.get(memberId);
    if (!m) return 'UNKNOWN_MEMBER_ID';
    this.removeMember(m);
    return 'NONE';
  }

  /**
   * Whether a commit of `memberId` at `generationId` may be stored. Generation -1 without a member
   * id commits from outside group management, taken while the group has no members.
   */
  checkCommit(memberId: string, generationId: number): KafkaErrorName {
    if (this.stateNow === 'Dead') return 'NOT_COORDINATOR';
    if (generationId < 0 && memberId === '' && this.stateNow === 'Empty') return 'NONE';
    const m = this.members.get(memberId);
    if (!m) return 'UNKNOWN_MEMBER_ID';
    if (generationId !== this.generation) return 'ILLEGAL_GENERATION';
    if (this.stateNow === 'CompletingRebalance') return 'REBALANCE_IN_PROGRESS';
    if (!m.joining) this.armSession(m);
    return 'NONE';
  }

  /** The group is no longer coordinated here: waiting requests end with NOT_COORDINATOR, timers stop. */
  close(): void {
    this.stateNow = 'Dead';
    this.stopRebalanceTimers();
    for (const m of this.members.values()) {
      m.cancelSession?.();
      m.joining?.(joinError('NOT_COORDINATOR', m.memberId));
      m.syncing?.({ errorCode: 'NOT_COORDINATOR', assignment: EMPTY });
    }
    this.members.clear();
  }

  // ------------------------------------------------------------------ members leaving

  private armSession(m: Member): void {
    m.cancelSession?.();
    m.cancelSession = this.timers.after(m.sessionTimeoutMs, () => {
      m.cancelSession = undefined;
      if (this.members.get(m.memberId) === m) this.removeMember(m);
    });
  }

  private removeMember(m: Member): void {
    this.dropMember(m);
    if (this.stateNow === 'Stable' || this.stateNow === 'CompletingRebalance') this.prepareRebalance();
    this.tryCompleteJoin();
  }

  private dropMember(m: Member): void {
    this.members.delete(m.memberId);
    m.cancelSession?.();
    m.joining?.(joinError('UNKNOWN_MEMBER_ID', m.memberId));
    m.syncing?.({ errorCode: 'UNKNOWN_MEMBER_ID', assignment: EMPTY });
    m.joining = m.syncing = undefined;
  }

  private stopRebalanceTimers(): void {
    for (const cancel of this.cancelRebalance) cancel();
    this.cancelRebalance = [];
    this.delaying = false;
  }
}

function joinError(errorCode: KafkaErrorName, memberId: string): JoinResult {
  return { errorCode, generationId: -1, protocolName: '', leader: '', memberId, members: [] };
}

function sameProtocols(a: GroupProtocol[], b: GroupProtocol[]): boolean {
  return a.length === b.length && a.every((p, i) => p.name === b[i].name && p.metadata.equals(b[i].metadata));
}
