import { KubeConfig, Watch } from '@kubernetes/client-node';
import type { RequestOptions } from 'node:https';

type WatchArgs = Parameters<Watch['watch']>;

/**
 * client-node's Watch, plus: watch bookmarks, a server-side timeout so that a
 * silently dead stream is replaced every few minutes (as client-go does), an
 * optional Accept header (metadata-only watches), and connection tracking for
 * the staleness figure.
 */
export class TrackedWatch extends Watch {
  #connected = false;
  #everConnected = false;
  #lastSyncAt = Date.now();
  readonly #onConnected: () => void;

  constructor(config: KubeConfig, options: { accept?: string; onConnected?: () => void } = {}) {
    super(options.accept === undefined ? config : withAcceptHeader(config, options.accept));
    this.#onConnected = options.onConnected ?? (() => undefined);
  }

  /** True while a watch stream is open. */
  get connected(): boolean {
    return this.#connected;
  }

  /** True once a watch stream has opened: the informer's cache then holds a full list. */
  get hasSynced(): boolean {
    return this.#everConnected;
  }

  /** Seconds since the stream was last known good; 0 while connected. */
  staleSeconds(now = Date.now()): number {
    return this.#connected ? 0 : Math.max(0, (now - this.#lastSyncAt) / 1000);
  }

  /** A successful LIST is a sync too. */
  markSynced(): void {
    this.#lastSyncAt = Date.now();
  }

  override async watch(path: WatchArgs[0], query: WatchArgs[1], callback: WatchArgs[2], done: WatchArgs[3]): Promise<AbortController> {
    let finished = false;
    const controller = await super.watch(
      path,
      { ...query, allowWatchBookmarks: true, timeoutSeconds: 300 + Math.floor(Math.random() * 300) },
      callback,
      (error: unknown) => {
        finished = true;
        if (this.#connected) {
          this.#connected = false;
          this.#lastSyncAt = Date.now();
        }
        done(error);
      },
    );
    if (!finished) {
      this.#connected = true;
      this.#everConnected = true;
      this.#lastSyncAt = Date.now();
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
