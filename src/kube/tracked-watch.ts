import { KubeConfig, Watch } from '@kubernetes/client-node';
import type { RequestOptions } from 'node:https';
import { backoffDelayMs, type Backoff } from './backoff.js';

type WatchArgs = Parameters<Watch['watch']>;

/**
 * The API server sends a bookmark about every minute on a watch that asked
 * for them: a stream silent for longer than that and a margin is half-open.
 */
export const DEFAULT_WATCH_STALE_AFTER_MS = 90_000;
/** A stream that ends cleanly sooner than this did no useful work: reopening it at once would hammer the server. */
const DEFAULT_QUICK_CLOSE_MS = 1_000;

/**
 * client-node's Watch, plus: watch bookmarks; a server-side timeout so that
 * streams are replaced every few minutes (as client-go does); a watchdog that
 * restarts a stream with no event or bookmark for `staleAfterMs`
 * (half-open connections are otherwise only found by TCP keepalive, in
 * minutes); backoff after streams that end cleanly but too soon; failures
 * before the request (credentials: an exec plugin, a token file) reported
 * as watch errors, never as unhandled rejections; an optional Accept header
 * (metadata-only watches); and connection tracking for the staleness figure.
 */
export class TrackedWatch extends Watch {
  #connected = false;
  #everConnected = false;
  #lastSyncAt = Date.now();
  #quickCloses = 0;
  readonly #onConnected: () => void;
  readonly #backoff: Backoff;
  readonly #staleAfterMs: number;
  readonly #slim: ((object: unknown) => unknown) | undefined;

  constructor(
    config: KubeConfig,
    options: {
      accept?: string;
      onConnected?: () => void;
      backoff: Backoff;
      staleAfterMs?: number | undefined;
      /** Keeps only what the cache needs of each object an event carries (never of a bookmark or an error). */
      slim?: (object: unknown) => unknown;
    },
  ) {
    super(options.accept === undefined ? config : withAcceptHeader(config, options.accept));
    this.#onConnected = options.onConnected ?? (() => undefined);
    this.#backoff = options.backoff;
    this.#staleAfterMs = options.staleAfterMs ?? DEFAULT_WATCH_STALE_AFTER_MS;
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

  /** Seconds since the stream was last known good (its last event, for a stream found silent); 0 while connected. */
  staleSeconds(now = Date.now()): number {
    return this.#connected ? 0 : Math.max(0, (now - this.#lastSyncAt) / 1000);
  }

  /** A successful LIST is a sync too. */
  markSynced(): void {
    this.#lastSyncAt = Date.now();
  }

  override async watch(path: WatchArgs[0], query: WatchArgs[1], callback: WatchArgs[2], done: WatchArgs[3]): Promise<AbortController> {
    const openedAt = Date.now();
    let lastEventAt = openedAt;
    let finished = false;
    let silent = false;
    let controller: AbortController | undefined;
    let watchdog: NodeJS.Timeout | undefined;

    const finish = (error: unknown): void => {
      if (finished) return;
      finished = true;
      clearTimeout(watchdog);
      if (this.#connected) {
        this.#connected = false;
        this.#lastSyncAt = silent ? lastEventAt : Date.now();
      }
      if (silent) return done(new Error(`no event or bookmark for ${this.#staleAfterMs} ms: the stream is presumed dead, restarting the watch`));
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
    const arm = (): void => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        silent = true;
        controller?.abort();
        finish(null);
      }, this.#staleAfterMs);
      watchdog.unref();
    };
    const onEvent: WatchArgs[2] = (phase, object, watchObject) => {
      lastEventAt = Date.now();
      arm();
      const slim = this.#slim;
      callback(phase, slim !== undefined && (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') ? slim(object) : object, watchObject);
    };

    try {
      controller = await super.watch(path, { ...query, allowWatchBookmarks: true, timeoutSeconds: 300 + Math.floor(Math.random() * 300) }, onEvent, finish);
    } catch (error) {
      // Not yet a request (credentials failed): report it as the watch's end, after the caller has its controller.
      setImmediate(() => finish(error));
      return new AbortController();
    }
    if (!finished) {
      this.#connected = true;
      this.#everConnected = true;
      this.#lastSyncAt = Date.now();
      lastEventAt = Date.now();
      arm();
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
