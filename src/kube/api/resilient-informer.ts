import { ListWatch, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { backoffDelayMs, type Backoff } from './backoff.js';
import { describeKubeError, kubeErrorForLog } from './kube-errors.js';
import type { TrackedWatch } from './tracked-watch.js';

/**
 * client-node's ListWatch (list, then watch from the list's resourceVersion,
 * relist on 410 Gone) made to survive: any other error stops a ListWatch, so
 * it is restarted after a capped exponential backoff with full jitter, reset
 * once a watch stream is open again. One restart timer at most, so a storm of
 * errors cannot pile up work.
 */
export class ResilientInformer<T extends KubernetesObject> {
  readonly #listWatch: ListWatch<T>;
  readonly #watch: TrackedWatch;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  readonly #name: string;
  #failures = 0;
  #restartTimer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: {
    name: string;
    path: string;
    watch: TrackedWatch;
    list: () => Promise<KubernetesListObject<T>>;
    fieldSelector?: string;
    backoff: Backoff;
    log: Logger;
  }) {
    this.#name = options.name;
    this.#watch = options.watch;
    this.#backoff = options.backoff;
    this.#log = options.log;
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await options.list();
      options.watch.markSynced();
      return result;
    };
    this.#listWatch = new ListWatch<T>(options.path, options.watch, list, false, undefined, options.fieldSelector);
    this.#listWatch.on('error', (error: unknown) => this.#scheduleRestart(error));
    // Quiet is normal (nothing changed): a debug line, never a warning.
    options.watch.reportQuietChecks((quietMs) => this.#log.debug({ watch: this.#name, quietMs }, `watch of ${this.#name} quiet for ${quietMs} ms; the API server answers, keeping the stream`));
  }

  on(verb: 'add' | 'update' | 'delete', callback: (object: T) => void): void {
    this.#listWatch.on(verb, callback);
  }

  list(): readonly T[] {
    return this.#listWatch.list();
  }

  get(name: string, namespace?: string): T | undefined {
    return this.#listWatch.get(name, namespace);
  }

  /** Call when the watch stream opens: the next failure starts the backoff from the beginning. */
  resetBackoff(): void {
    this.#failures = 0;
  }

  start(): void {
    this.#stopped = false;
    this.#startListWatch();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#restartTimer);
    this.#restartTimer = undefined;
    void this.#listWatch.stop();
  }

  staleSeconds(now = Date.now()): number {
    return this.#watch.staleSeconds(now);
  }

  /** True once the cache has been filled by a full list (it stays filled through later failures). */
  get hasSynced(): boolean {
    return this.#watch.hasSynced;
  }

  /** A rejection here (client-node rethrows what its watch threw) is one more failure to back off from, never an unhandled one. */
  #startListWatch(): void {
    this.#listWatch.start().catch((error: unknown) => this.#scheduleRestart(error));
  }

  #scheduleRestart(error: unknown): void {
    if (this.#stopped || this.#restartTimer !== undefined) return;
    const delayMs = backoffDelayMs(this.#backoff, this.#failures);
    this.#failures += 1;
    const reason = describeKubeError(error);
    this.#log.warn({ watch: this.#name, err: kubeErrorForLog(error), retryInMs: delayMs, failures: this.#failures }, `watch of ${this.#name} failed (${reason}); retrying in ${delayMs} ms`);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      if (!this.#stopped) this.#startListWatch();
    }, delayMs);
    this.#restartTimer.unref();
  }
}
