import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { isJsonObject, objectAt, own, type JsonObject } from '../../injection/index.js';
import { kubeJson, KubeRequestError, ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';

/** How long an ADD waits on the API for a Pod the cache lacks: the shim waits 10 s in all, the rules need the rest. */
export const POD_READ_TIMEOUT_MS = 4_000;

type CachedPod = KubernetesObject & JsonObject;

/** What the cache keeps of a Pod: all but managedFields, which no decision reads and which is most of a Pod's size. */
export function slimPod(pod: unknown): unknown {
  if (!isJsonObject(pod)) return pod;
  const metadata = objectAt(pod, 'metadata');
  if (metadata === undefined || own(metadata, 'managedFields') === undefined) return pod;
  const { managedFields: _dropped, ...rest } = metadata;
  return { ...pod, metadata: rest };
}

/**
 * The Pods of one node (`spec.nodeName`), from one LIST + WATCH kept up by
 * the injector's own watch machinery (ResilientInformer over TrackedWatch:
 * bookmarks, the list's resourceVersion, a relist after 410 Gone, the same
 * liveness rules and backoff). The node agent's repair reads the cache, and
 * so does its answer to an ADD; `read` falls back to one GET for a Pod the
 * cache lacks (a Pod just bound, whose event the watch has not delivered
 * yet), or holds under another uid (a StatefulSet's Pod made again).
 */
export class NodePods {
  readonly #informer: ResilientInformer<CachedPod>;
  readonly #kubeConfig: KubeConfig;

  constructor(options: { kubeConfig: KubeConfig; nodeName: string; backoff: Backoff; watchLiveness?: Partial<WatchLiveness> | undefined; log: Logger }) {
    this.#kubeConfig = options.kubeConfig;
    const fieldSelector = `spec.nodeName=${options.nodeName}`;
    let informer: ResilientInformer<CachedPod> | undefined;
    const watch = new TrackedWatch(options.kubeConfig, { backoff: options.backoff, liveness: options.watchLiveness, slim: slimPod, onConnected: () => informer?.resetBackoff() });
    informer = new ResilientInformer<CachedPod>({
      name: `Pods of node ${options.nodeName}`,
      path: '/api/v1/pods',
      watch,
      // resourceVersion=0: served from the API server's watch cache, not etcd (as client-go's reflector lists), which matters when a thousand agents list at once.
      list: async () => {
        const list = await kubeJson(options.kubeConfig, { method: 'GET', path: `/api/v1/pods?${new URLSearchParams({ fieldSelector, resourceVersion: '0' }).toString()}` });
        if (!isJsonObject(list) || !Array.isArray(list['items'])) throw new Error('GET /api/v1/pods: not a list');
        return { ...list, items: list['items'].filter(isJsonObject).map((pod) => slimPod(pod) as CachedPod) } as unknown as KubernetesListObject<CachedPod>;
      },
      fieldSelector,
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

  /** True once a full list has filled the cache (it stays filled through later failures). */
  get hasSynced(): boolean {
    return this.#informer.hasSynced;
  }

  /** The cached Pod; with UID, only if that is its uid (else the cache holds another Pod of that name). */
  get(namespace: string, name: string, uid?: string): JsonObject | undefined {
    const cached = this.#informer.get(name, namespace);
    return cached === undefined || uid === undefined || own(objectAt(cached, 'metadata') ?? {}, 'uid') === uid ? cached : undefined;
  }

  /** Every cached Pod of the node. */
  list(): readonly JsonObject[] {
    return this.#informer.list();
  }

  /**
   * The Pod from the cache when it holds it (with UID, when given, as its
   * uid), else from one GET bounded by POD_READ_TIMEOUT_MS: undefined when the
   * API says it does not exist (or exists under another uid); throws when the
   * API cannot be asked.
   */
  async read(namespace: string, name: string, uid?: string): Promise<JsonObject | undefined> {
    const cached = this.get(namespace, name, uid);
    if (cached !== undefined) return cached;
    try {
      const pod = await kubeJson(this.#kubeConfig, { method: 'GET', path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods/${encodeURIComponent(name)}`, timeoutMs: POD_READ_TIMEOUT_MS });
      if (!isJsonObject(pod)) return undefined;
      return uid === undefined || own(objectAt(pod, 'metadata') ?? {}, 'uid') === uid ? pod : undefined;
    } catch (error) {
      if (error instanceof KubeRequestError && error.statusCode === 404) return undefined;
      throw error;
    }
  }
}
