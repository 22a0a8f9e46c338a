import { CoreV1Api, KubeConfig, setHeaderOptions, type V1Namespace } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { describeKubeError, kubeErrorForLog, kubeErrorStatus } from './kube-errors.js';
import type { Backoff } from './backoff.js';
import { ResilientInformer } from './resilient-informer.js';
import { TrackedWatch } from './tracked-watch.js';

/** Ask for metadata only: labels are all we need, and this keeps the cache small. */
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export type Labels = Readonly<Record<string, string>>;

/**
 * Namespace labels from a metadata-only watch of Namespaces. A namespace not
 * (yet) in the cache is read directly, bounded by a short timeout; if that
 * fails too, its labels are unknown, which the decision treats as "not enabled".
 */
export class NamespaceLabels {
  readonly #informer: ResilientInformer<V1Namespace>;
  readonly #api: CoreV1Api;
  readonly #lookupTimeoutMs: number;
  readonly #log: Logger;

  constructor(options: { kubeConfig: KubeConfig; backoff: Backoff; lookupTimeoutMs: number; log: Logger; onWatchConnected?: () => void }) {
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#lookupTimeoutMs = options.lookupTimeoutMs;
    this.#log = options.log;
    let informer: ResilientInformer<V1Namespace> | undefined;
    const watch = new TrackedWatch(options.kubeConfig, {
      accept: METADATA_OBJECT,
      onConnected: () => {
        informer?.resetBackoff();
        options.onWatchConnected?.();
      },
    });
    informer = new ResilientInformer<V1Namespace>({
      name: 'Namespaces',
      path: '/api/v1/namespaces',
      watch,
      list: () => this.#api.listNamespace({}, setHeaderOptions('Accept', METADATA_LIST)),
      backoff: options.backoff,
      log: options.log,
    });
    this.#informer = informer;
  }

  start(): void {
    this.#informer.start();
  }

  stop(): void {
    this.#informer.stop();
  }

  staleSeconds(now = Date.now()): number {
    return this.#informer.staleSeconds(now);
  }

  async labelsOf(namespace: string): Promise<Labels | undefined> {
    const cached = this.#informer.get(namespace);
    if (cached !== undefined) return cached.metadata?.labels ?? {};
    let timer: NodeJS.Timeout | undefined;
    try {
      const read = this.#api.readNamespace({ name: namespace }, setHeaderOptions('Accept', METADATA_OBJECT));
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${this.#lookupTimeoutMs} ms`)), this.#lookupTimeoutMs);
      });
      const found = await Promise.race([read, timeout]);
      return found.metadata?.labels ?? {};
    } catch (error) {
      // A namespace that does not exist has no labels; the API server will refuse the Pod anyway.
      if (kubeErrorStatus(error) === 404) return {};
      const reason = describeKubeError(error);
      this.#log.warn({ namespace, err: kubeErrorForLog(error) }, `labels of namespace "${namespace}" unknown (not cached, direct read failed: ${reason}); treating it as not enabled`);
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  }
}
