import type { KubeConfig } from '@kubernetes/client-node';
import { describeKubeError } from './kube-errors.js';
import { kubeJson, KubeRequestError } from './kube-json.js';

/**
 * How an open watch stream is judged alive. Silence proves nothing: the API
 * server sends a bookmark only once the resourceVersion of what is watched
 * has moved past the stream's own, which on a quiet resource waits for a
 * progress notification from etcd (seen about 60 to 120 s after the stream
 * opened, then every minute, on a 1.36 API server whose etcd keeps its
 * defaults; up to etcd's progress-notify interval, 10 minutes by default,
 * where nothing else moves it). A dead TCP peer is found by client-node's TCP
 * keepalive on the stream's socket (30 s idle, then 10 probes 1 s apart on
 * Linux): the stream then fails with an error. What remains is a peer that
 * keeps the connection but forwards nothing (a proxy or load balancer whose
 * backend is gone), hence the check and the deadline.
 */
export interface WatchLiveness {
  /** Silence on an open stream after which the API server is asked whether it still answers. */
  readonly quietMs: number;
  /** How long that question may take: no answer within it, or a 5xx, and the stream is presumed dead. */
  readonly checkTimeoutMs: number;
  /**
   * Each stream asks the API server to end it after a timeout between this and
   * twice this (as client-go does); one still open quietMs past it is presumed dead,
   * whatever the checks said (they may reach another API server than the stream).
   */
  readonly streamSeconds: number;
}

export const DEFAULT_WATCH_LIVENESS: WatchLiveness = { quietMs: 60_000, checkTimeoutMs: 10_000, streamSeconds: 300 };

/** Undefined when the API server answered GET /version within TIMEOUTMS (any status below 500: a 403 is an answer), else why not. */
export async function apiServerSilence(kubeConfig: KubeConfig, timeoutMs: number): Promise<string | undefined> {
  // A deadline for the whole call: a socket's idle timeout was seen to take twice as long on a TLS handshake that never ends.
  const signal = AbortSignal.timeout(timeoutMs);
  try {
    await kubeJson(kubeConfig, { method: 'GET', path: '/version', timeoutMs, signal });
    return undefined;
  } catch (error) {
    if (error instanceof KubeRequestError && error.statusCode < 500) return undefined;
    return signal.aborted ? `GET /version: no answer within ${timeoutMs} ms` : describeKubeError(error);
  }
}

/**
 * The timers of one open stream: after `quietMs` without an event, `check`;
 * `dead` with a sentence when the check fails (and nothing arrived meanwhile)
 * or when the stream outlives its server-side timeout by `quietMs`.
 */
export class StreamLiveness {
  readonly #liveness: WatchLiveness;
  readonly #timeoutSeconds: number;
  readonly #check: () => Promise<string | undefined>;
  readonly #answered: (quietMs: number) => void;
  readonly #dead: (reason: string) => void;
  #lastEventAt = Date.now();
  #lastAliveAt = Date.now();
  #quietTimer: NodeJS.Timeout | undefined;
  #deadline: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: {
    liveness: WatchLiveness;
    /** The timeoutSeconds the stream asked for. */
    timeoutSeconds: number;
    /** Undefined when the API server answers, else why not (see apiServerSilence). */
    check: () => Promise<string | undefined>;
    /** A quiet stream was checked and kept. */
    answered: (quietMs: number) => void;
    dead: (reason: string) => void;
  }) {
    this.#liveness = options.liveness;
    this.#timeoutSeconds = options.timeoutSeconds;
    this.#check = options.check;
    this.#answered = options.answered;
    this.#dead = options.dead;
  }

  /** When the stream was last known alive: its last event, or the last check the API server answered. */
  get lastAliveAt(): number {
    return this.#lastAliveAt;
  }

  /** The stream is open. */
  start(): void {
    this.#lastEventAt = this.#lastAliveAt = Date.now();
    this.#armQuiet();
    const graceMs = this.#timeoutSeconds * 1000 + this.#liveness.quietMs;
    this.#deadline = setTimeout(() => this.#die(`the stream outlived the ${this.#timeoutSeconds} s timeout it asked of the API server by ${this.#liveness.quietMs} ms: presumed dead, restarting the watch`), graceMs);
    this.#deadline.unref();
  }

  /** An event or a bookmark arrived. */
  event(): void {
    this.#lastEventAt = this.#lastAliveAt = Date.now();
    this.#armQuiet();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#quietTimer);
    clearTimeout(this.#deadline);
  }

  #armQuiet(): void {
    if (this.#stopped) return;
    clearTimeout(this.#quietTimer);
    this.#quietTimer = setTimeout(() => void this.#checkQuiet(), this.#liveness.quietMs);
    this.#quietTimer.unref();
  }

  async #checkQuiet(): Promise<void> {
    const askedAt = Date.now();
    const silence = await this.#check();
    if (this.#stopped) return;
    if (this.#lastEventAt >= askedAt) return; // the stream spoke meanwhile: event() re-armed the timer
    if (silence === undefined) {
      this.#lastAliveAt = Date.now();
      this.#answered(askedAt - this.#lastEventAt);
      this.#armQuiet();
      return;
    }
    this.#die(`no event or bookmark for ${askedAt - this.#lastEventAt} ms, and a check of the API server failed (${silence}): the stream is presumed dead, restarting the watch`);
  }

  #die(reason: string): void {
    if (this.#stopped) return;
    this.stop();
    this.#dead(reason);
  }
}
