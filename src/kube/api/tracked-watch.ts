import { KubeConfig, Watch } from '@kubernetes/client-node';
import type { RequestOptions } from 'node:https';
import { backoffDelayMs, type Backoff } from './backoff.js';
import { apiServerSilence, DEFAULT_WATCH_LIVENESS, StreamLiveness, type WatchLiveness } from './stream-liveness.js';

type WatchArgs = Parameters<Watch['watch']>;

/** A stream that ends cleanly sooner than this did no useful work: reopening it at once would hammer the server. */
const DEFAULT_QUICK_CLOSE_MS = 1_000;

/**
 * client-node's Watch, plus: watch bookmarks; a server-side timeout so that
 * streams are replaced every few minutes (as client-go does); a judge of a
 * quiet stream (StreamLiveness: the API server asked after a silence, a
 * deadline past the stream's own timeout), which restarts only a stream
 * presumed dead; backoff after streams that end cleanly but too soon;
 * failures before the request (credentials: an exec plugin, a token file)
 * reported as watch errors, never as unhandled rejections; an optional
 * Accept header (metadata-only watches); and connection tracking for the
 * staleness figure.
 */
export class TrackedWatch extends Watch {
  #connected = false;
  #everConnected = false;
  #lastSyncAt = Date.now();
  #quickCloses = 0;
  #onQuietCheck: (quietMs: number) => void = () => undefined;
  readonly #onConnected: () => void;
  readonly #backoff: Backoff;
  readonly #liveness: WatchLiveness;
  readonly #slim: ((object: unknown) => unknown) | undefined;

  constructor(
    config: KubeConfig,
    options: {
      accept?: string;
      onConnected?: () => void;
      backoff: Backoff;
      /** Tests shorten these; see DEFAULT_WATCH_LIVENESS. */
      liveness?: Partial<WatchLiveness> | undefined;
      /** Keeps only what the cache needs of each object an event carries (never of a bookmark or an error). */
      slim?: (object: unknown) => unknown;
    },
  ) {
    super(options.accept === undefined ? config : withAcceptHeader(config, options.accept));
    this.#onConnected = options.onConnected ?? (() => undefined);
    this.#backoff = options.backoff;
    this.#liveness = { ...DEFAULT_WATCH_LIVENESS, ...options.liveness };
    this.#slim = options.slim;
  }

  /** True while a watch stream is open and alive. */
  get connected(): boolean {
    return this.#connected;
  }

  /** True once a watch stream has opened: the informer's cache then holds a full list. */
  get hasSynced(): boolean {
    return this.#everConnected;
  }

  /** Seconds since the stream was last known good (its last event or answered check, for a stream presumed dead); 0 while connected. */
  staleSeconds(now = Date.now()): number {
    return this.#connected ? 0 : Math.max(0, (now - this.#lastSyncAt) / 1000);
  }

  /** A successful LIST is a sync too. */
  markSynced(): void {
    this.#lastSyncAt = Date.now();
  }

  /** LISTENER hears of every quiet stream checked and kept (the informer logs it at debug). */
  reportQuietChecks(listener: (quietMs: number) => void): void {
    this.#onQuietCheck = listener;
  }

  override async watch(path: WatchArgs[0], query: WatchArgs[1], callback: WatchArgs[2], done: WatchArgs[3]): Promise<AbortController> {
    const openedAt = Date.now();
    const { streamSeconds } = this.#liveness;
    const timeoutSeconds = streamSeconds + Math.floor(Math.random() * streamSeconds);
    let finished = false;
    let deadReason: string | undefined;
    let controller: AbortController | undefined;
    const liveness = new StreamLiveness({
      liveness: this.#liveness,
      timeoutSeconds,
      check: () => apiServerSilence(this.config, this.#liveness.checkTimeoutMs),
      answered: (quietMs) => this.#onQuietCheck(quietMs),
      dead: (reason) => {
        deadReason = reason;
        controller?.abort();
        finish(null);
      },
    });

    const finish = (error: unknown): void => {
      if (finished) return;
      finished = true;
      liveness.stop();
      if (this.#connected) {
        this.#connected = false;
        this.#lastSyncAt = deadReason === undefined ? Date.now() : liveness.lastAliveAt;
      }
      if (deadReason !== undefined) return done(new Error(deadReason));
      if (error === null || error === undefined) {
        if (Date.now() - openedAt < (this.#backoff.quickCloseMs ?? DEFAULT_QUICK_CLOSE_MS)) {
          const delayMs = backoffDelayMs(this.#backoff, this.#quickCloses);
          this.#quickCloses += 1;
          setTimeout(() => done(null), delayMs).unref();
          return;
        }
        this.#quickCloses = 0;
      }
      done(error);
    };
    const onEvent: WatchArgs[2] = (phase, object, watchObject) => {
      liveness.event();
      const slim = this.#slim;
      callback(phase, slim !== undefined && (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') ? slim(object) : object, watchObject);
    };

    try {
      controller = await super.watch(path, { ...query, allowWatchBookmarks: true, timeoutSeconds }, onEvent, finish);
    } catch (error) {
      // Not yet a request (credentials failed): report it as the watch's end, after the caller has its controller.
      setImmediate(() => finish(error));
      return new AbortController();
    }
    if (!finished) {
      this.#connected = true;
      this.#everConnected = true;
      this.#lastSyncAt = Date.now();
      liveness.start();
      this.#onConnected();
    }
    return controller;
  }
}

/** The same cluster and credentials, with an Accept header on every watch request. */
function withAcceptHeader(config: KubeConfig, accept: string): KubeConfig {
  const copy = new AcceptingKubeConfig(accept);
  copy.loadFromOptions({ clusters: config.clusters, contexts: config.contexts, users: config.users, currentContext: config.currentContext });
  return copy;
}

class AcceptingKubeConfig extends KubeConfig {
  readonly #accept: string;
  constructor(accept: string) {
    super();
    this.#accept = accept;
  }
  override async applyToFetchOptions(opts: RequestOptions): ReturnType<KubeConfig['applyToFetchOptions']> {
    const options = await super.applyToFetchOptions(opts);
    // client-node builds node-fetch's Headers here (config.js, applyToFetchOptions): anything with set().
    const headers = options.headers as { set?: unknown } | undefined;
    if (typeof headers?.set !== 'function') throw new Error('client-node changed its fetch options: cannot set the Accept header');
    (headers as { set(name: string, value: string): void }).set('Accept', this.#accept);
    return options;
  }
}
