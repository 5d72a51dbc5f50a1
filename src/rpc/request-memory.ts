/**
 * The request memory of a node (`server.buffer.memory-size`): every byte a listener reads from a
 * socket is held until the response of the request it belongs to is written, and the budget
 * bounds the bytes held across all connections.
 *
 *   reading    When the held bytes reach the budget, the connections that hold their share of it
 *              or more (the budget divided by the open connections, at least SHARE_FLOOR or the
 *              whole budget when smaller) are not read until responses release bytes: connections
 *              stalled in the middle of big frames cannot keep the others' small requests from
 *              being read.
 *   starting   A request starts only while the bytes of running requests stay within the budget,
 *              except that one request always may run alone, so a request bigger than the budget
 *              cannot deadlock. Once bytes are released, waiting requests start one per
 *              connection in turn, so no connection starves.
 *   alone      If frames still being received fill the budget and nothing runs, one connection is
 *              read on alone until its frame completes; one that sends nothing for `silentTurnMs`
 *              loses the turn to the next (a timer runs only while a connection reads alone).
 *
 * One budget serves both listeners of a node: the RPC listener makes it and the Kafka listener
 * joins it, so `server.buffer.memory-size` bounds all request memory of the process, as the
 * option says, and a connection's share is of all open connections, whichever protocol they
 * speak: no client takes more than its share by choosing a listener. Sharing adds no wait
 * between the listeners: a Kafka request runs the node's APIs in the process (`RpcServer.invoke`),
 * which takes no request memory, so no running request waits for memory another one holds.
 *
 * Each listener keeps its own order of answering (the RPC listener answers as requests complete,
 * the Kafka listener in request order): it tells the budget what arrives, what waits, what starts
 * and what is answered, and decides with `mayRead` and its own state whether it reads.
 */

/** The least share a connection keeps reading into when the budget is full: one socket read, which holds any small request whole. */
export const SHARE_FLOOR = 64 * 1024;
const DEFAULT_SILENT_TURN_MS = 1000;

/** What the budget asks of a connection it accounts for. */
export interface BudgetedConnection {
  /** Bytes of the request that waits for memory to start, 0 when none waits. */
  waitingBytes(): number;
  /** Starts the waiting request: the budget has counted its bytes as running. */
  startWaiting(): void;
  /** Whether it is part-way through a frame that reading it alone would complete. */
  receiving(): boolean;
  /** Reads or stops reading, as `ConnectionMemory.mayRead` and its own state say. */
  refresh(): void;
}

/** A connection's account in the budget. */
export interface ConnectionMemory {
  /** Bytes read and not yet released: its running and waiting requests and a partial frame. */
  readonly heldBytes: number;
  /** Bytes of its running requests (part of heldBytes). */
  readonly runningBytes: number;
  /** Whether the budget lets the connection be read: it is not full, the connection holds less than its share, or it reads alone. */
  readonly mayRead: boolean;
  /** Bytes read from the socket, held until released. */
  hold(bytes: number): void;
  /** Starts the connection's waiting requests while memory allows. */
  startWaiting(): void;
  /** After bytes arrived or the connection's own state changed: decides again which connections read, and refreshes this one. */
  changed(): void;
  /**
   * A request's response is written (or its connection is gone): releases the request's bytes,
   * starts waiting requests of any connection as they fit, and refreshes the readers. Within a
   * start (a request answered at once as it starts) only the bytes are released.
   */
  release(bytes: number): void;
  /** Releases the held bytes that belong to no running request: a partial frame, requests dropped. */
  releaseIdle(): void;
  /** The connection closed: releases its idle bytes and leaves the turns; its running requests still release theirs. */
  close(): void;
}

/** A listener's part of the budget: the connections it opens and the bytes they hold. */
export interface ListenerMemory {
  /** Bytes held by the listener's connections, closed ones with running requests included. */
  readonly heldBytes: number;
  readonly runningBytes: number;
  open(connection: BudgetedConnection): ConnectionMemory;
}

interface Tally {
  held: number;
  running: number;
}

class Account implements Tally {
  held = 0;
  running = 0;
  /** Bytes arrived since the last check of the turn to read alone. */
  heard = false;
  constructor(
    readonly connection: BudgetedConnection,
    readonly listener: Tally,
  ) {}
}

export class RequestMemoryBudget {
  /** The open connections, in turn order: who reads alone next, who starts first after a release. */
  private readonly accounts = new Set<Account>();
  private readonly total: Tally = { held: 0, running: 0 };
  /** The least share: SHARE_FLOOR, or the whole budget when it is smaller. */
  private readonly shareFloor: number;
  private full = false;
  /** The connection read alone while the budget is full of partial frames and nothing runs. */
  private lone: Account | undefined;
  /** The lone connection at the previous check: one that stays silent from one check to the next loses its turn. */
  private loneAtCheck: Account | undefined;
  private turnTimer: NodeJS.Timeout | undefined;
  /** Set while requests are being started, so requests answered at once do not start more recursively. */
  private starting = false;

  constructor(
    readonly limitBytes: number,
    private readonly silentTurnMs = DEFAULT_SILENT_TURN_MS,
  ) {
    this.shareFloor = Math.min(SHARE_FLOOR, limitBytes);
  }

  listener(): ListenerMemory {
    const tally: Tally = { held: 0, running: 0 };
    return {
      get heldBytes() {
        return tally.held;
      },
      get runningBytes() {
        return tally.running;
      },
      open: (connection) => this.open(connection, tally),
    };
  }

  /** Whether some connection has a request waiting for memory. */
  requestsWaiting(): boolean {
    for (const account of this.accounts) if (account.connection.waitingBytes() > 0) return true;
    return false;
  }

  private open(connection: BudgetedConnection, listener: Tally): ConnectionMemory {
    const account = new Account(connection, listener);
    this.accounts.add(account);
    const budget = this;
    return {
      get heldBytes() {
        return account.held;
      },
      get runningBytes() {
        return account.running;
      },
      get mayRead() {
        return budget.mayRead(account);
      },
      hold: (bytes) => {
        this.count(account, bytes, 0);
        account.heard = true;
      },
      startWaiting: () => this.startWaiting(account),
      changed: () => {
        this.updateGate();
        connection.refresh();
      },
      release: (bytes) => this.release(account, bytes),
      releaseIdle: () => this.count(account, account.running - account.held, 0),
      close: () => this.close(account),
    };
  }

  private count(account: Account, held: number, running: number): void {
    for (const tally of [account, account.listener, this.total]) {
      tally.held += held;
      tally.running += running;
    }
  }

  private mayRead(account: Account): boolean {
    return !this.full || account === this.lone || account.held < Math.max(this.shareFloor, this.limitBytes / this.accounts.size);
  }

  private fits(bytes: number): boolean {
    return this.total.running === 0 || this.total.running + bytes <= this.limitBytes;
  }

  private start(account: Account, bytes: number): void {
    this.count(account, 0, bytes);
    account.connection.startWaiting();
  }

  private startWaiting(account: Account): void {
    const outer = this.starting;
    this.starting = true;
    try {
      for (let bytes = account.connection.waitingBytes(); bytes > 0 && this.fits(bytes); bytes = account.connection.waitingBytes()) this.start(account, bytes);
    } finally {
      this.starting = outer;
    }
  }

  /** After a release: gives each connection a turn, one request at a time, so none starves. */
  private startAllWaiting(): void {
    this.starting = true;
    try {
      let started = true;
      while (started) {
        started = false;
        for (const account of this.accounts) {
          const bytes = account.connection.waitingBytes();
          if (bytes > 0 && this.fits(bytes)) {
            this.start(account, bytes);
            started = true;
            account.connection.refresh();
          }
        }
      }
    } finally {
      this.starting = false;
    }
  }

  private release(account: Account, bytes: number): void {
    this.count(account, -bytes, -bytes);
    if (this.starting) return; // the running start loop goes on by itself
    this.startAllWaiting();
    this.updateGate();
    account.connection.refresh();
  }

  private close(account: Account): void {
    this.count(account, account.running - account.held, 0);
    this.accounts.delete(account);
    if (this.lone === account) this.lone = undefined;
    if (!this.updateGate() && this.full) this.refreshAll(); // the others' shares grew
  }

  /** Decides whether the budget is full and who reads alone; on a change every connection re-evaluates whether it reads (and true is returned). */
  private updateGate(): boolean {
    const full = this.total.held >= this.limitBytes;
    let lone: Account | undefined;
    if (full && this.total.running === 0) {
      lone = this.lone?.connection.receiving() ? this.lone : undefined;
      for (const account of this.accounts) {
        if (lone) break;
        if (account.connection.receiving()) lone = account;
      }
    }
    const changed = full !== this.full || lone !== this.lone;
    this.full = full;
    this.lone = lone;
    this.watchTurn();
    if (changed) this.refreshAll();
    return changed;
  }

  private refreshAll(): void {
    for (const account of this.accounts) account.connection.refresh();
  }

  /** Runs the check of the turn while a connection reads alone, and only then. */
  private watchTurn(): void {
    if (this.lone && !this.turnTimer) {
      this.loneAtCheck = undefined;
      this.turnTimer = setInterval(() => this.checkTurn(), this.silentTurnMs).unref();
    } else if (!this.lone && this.turnTimer) {
      clearInterval(this.turnTimer);
      this.turnTimer = undefined;
    }
  }

  /** Passes the turn to read alone on from a connection that sent nothing since the previous check. */
  private checkTurn(): void {
    const silent = this.lone !== undefined && this.lone === this.loneAtCheck && !this.lone.heard;
    for (const account of this.accounts) account.heard = false;
    if (silent) {
      // To the end of the turn order, so the next connection receiving a frame gets the turn.
      this.accounts.delete(this.lone!);
      this.accounts.add(this.lone!);
      this.lone = undefined;
      this.updateGate();
    }
    this.loneAtCheck = this.lone;
  }
}
