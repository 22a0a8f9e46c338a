import { CoreV1Api, KubeConfig, Observable, setHeaderOptions, type V1Namespace } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { NamespaceLabelsUnknownError } from '../../errors.js';
import { injectorAnnotations, type NamespaceMetadata } from '../../injection/index.js';
import { describeKubeError, kubeErrorForLog, kubeErrorStatus, ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';

/** Ask for metadata only: labels and our annotations are all we need, and this keeps the cache small. */
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
/** A direct read stands in for the watch this long; the watch, once back, is the truth again. */
export const DIRECT_READ_TTL_MS = 10_000;
/** Bound on remembered direct reads (namespaces seen while the watch was down). */
const DIRECT_READ_MAX = 1_000;

export type Labels = Readonly<Record<string, string>>;

const NO_LABELS: Labels = Object.freeze({});

/**
 * What the cache keeps of a namespace: its name and resourceVersion (the
 * informer's bookkeeping), its labels and only its `envoy-injector.io/`
 * annotations and OpenShift's two id ranges (injectorAnnotations); never
 * managedFields, kubectl's last-applied copy or OpenShift's other annotations.
 */
export function slimNamespace(namespace: V1Namespace): V1Namespace {
  const metadata = namespace.metadata;
  if (metadata === undefined) return namespace;
  const annotations = injectorAnnotations(metadata.annotations);
  return {
    metadata: {
      ...(metadata.name === undefined ? {} : { name: metadata.name }),
      ...(metadata.resourceVersion === undefined ? {} : { resourceVersion: metadata.resourceVersion }),
      ...(metadata.labels === undefined ? {} : { labels: metadata.labels }),
      ...(annotations === undefined ? {} : { annotations: { ...annotations } }),
    },
  };
}

function metadataOf(namespace: V1Namespace): NamespaceMetadata {
  return { labels: namespace.metadata?.labels ?? NO_LABELS, annotations: injectorAnnotations(namespace.metadata?.annotations) };
}

/** What a cached namespace gives the decision, made once per cached object (a watch event replaces the object). */
const metadataOfCached = new WeakMap<V1Namespace, NamespaceMetadata>();

function cachedMetadata(namespace: V1Namespace): NamespaceMetadata {
  let metadata = metadataOfCached.get(namespace);
  if (metadata === undefined) {
    // The cache is slimmed already: its annotations are ours only.
    metadata = { labels: namespace.metadata?.labels ?? NO_LABELS, annotations: namespace.metadata?.annotations };
    metadataOfCached.set(namespace, metadata);
  }
  return metadata;
}

/**
 * Namespace labels and `envoy-injector.io/` annotations from a metadata-only
 * watch of Namespaces (slimmed to those, see slimNamespace). A namespace not
 * (yet) in the cache is read directly: one read per namespace however many
 * reviews wait for it, aborted after a short timeout, its answer remembered
 * briefly. When the labels cannot be known, metadataOf throws: the webhook then
 * answers with an error and the webhook's failurePolicy decides, never a
 * silent skip.
 */
export class NamespaceLabels {
  readonly #informer: ResilientInformer<V1Namespace>;
  readonly #api: CoreV1Api;
  readonly #lookupTimeoutMs: number;
  readonly #log: Logger;
  readonly #reading = new Map<string, Promise<NamespaceMetadata>>();
  readonly #read = new Map<string, { metadata: NamespaceMetadata; at: number }>();

  constructor(options: { kubeConfig: KubeConfig; backoff: Backoff; watchLiveness?: Partial<WatchLiveness> | undefined; lookupTimeoutMs: number; log: Logger; onWatchConnected?: () => void }) {
    this.#api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#lookupTimeoutMs = options.lookupTimeoutMs;
    this.#log = options.log;
    let informer: ResilientInformer<V1Namespace> | undefined;
    const watch = new TrackedWatch(options.kubeConfig, {
      accept: METADATA_OBJECT,
      backoff: options.backoff,
      liveness: options.watchLiveness,
      slim: (object) => slimNamespace(object as V1Namespace),
      onConnected: () => {
        informer?.resetBackoff();
        options.onWatchConnected?.();
      },
    });
    informer = new ResilientInformer<V1Namespace>({
      name: 'Namespaces',
      path: '/api/v1/namespaces',
      watch,
      list: async () => {
        const list = await this.#api.listNamespace({}, setHeaderOptions('Accept', METADATA_LIST));
        return { ...list, items: list.items.map(slimNamespace) };
      },
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

  /** Readiness: undefined once the Namespace watch has listed all namespaces, else why not. */
  problem(): string | undefined {
    return this.#informer.hasSynced ? undefined : 'the Namespace watch has not synced yet: namespace labels are unknown';
  }

  /**
   * The namespace's labels and `envoy-injector.io/` annotations: at once from
   * the watch's cache (or a recent direct read), else the promise of a direct
   * read, which rejects with NamespaceLabelsUnknownError when they cannot be known.
   */
  metadataOf(namespace: string): NamespaceMetadata | Promise<NamespaceMetadata> {
    const cached = this.#informer.get(namespace);
    if (cached !== undefined) return cachedMetadata(cached);
    const recent = this.#read.get(namespace);
    if (recent !== undefined && Date.now() - recent.at < DIRECT_READ_TTL_MS) return recent.metadata;
    let reading = this.#reading.get(namespace);
    if (reading === undefined) {
      reading = this.#readDirectly(namespace).finally(() => this.#reading.delete(namespace));
      this.#reading.set(namespace, reading);
    }
    return reading;
  }

  async #readDirectly(namespace: string): Promise<NamespaceMetadata> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error(`no answer within ${this.#lookupTimeoutMs} ms`)), this.#lookupTimeoutMs);
    try {
      const options = setHeaderOptions('Accept', METADATA_OBJECT, {
        middleware: [
          {
            pre: (context) => {
              context.setSignal(abort.signal);
              return new Observable(Promise.resolve(context));
            },
            post: (context) => new Observable(Promise.resolve(context)),
          },
        ],
        middlewareMergeStrategy: 'append',
      });
      const found = metadataOf(await this.#api.readNamespace({ name: namespace }, options));
      this.#remember(namespace, found);
      return found;
    } catch (error) {
      // A namespace that does not exist has no labels; the API server will refuse the Pod anyway.
      if (kubeErrorStatus(error) === 404) return { labels: NO_LABELS, annotations: undefined };
      const reason = abort.signal.aborted ? String((abort.signal.reason as Error).message) : describeKubeError(error);
      const message = `labels of namespace "${namespace}" unknown (not in the watch cache, direct read failed: ${reason})`;
      this.#log.warn({ namespace, err: kubeErrorForLog(error) }, `${message}; answering with an error so that the webhook's failurePolicy decides`);
      throw new NamespaceLabelsUnknownError(message, { cause: error });
    } finally {
      clearTimeout(timer);
    }
  }

  #remember(namespace: string, metadata: NamespaceMetadata): void {
    if (this.#read.size >= DIRECT_READ_MAX) {
      const now = Date.now();
      for (const [name, entry] of this.#read) if (now - entry.at >= DIRECT_READ_TTL_MS) this.#read.delete(name);
      // Still full: the oldest entry goes (a Map iterates in insertion order).
      const oldest = this.#read.keys().next();
      if (this.#read.size >= DIRECT_READ_MAX && oldest.done !== true) this.#read.delete(oldest.value);
    }
    this.#read.set(namespace, { metadata, at: Date.now() });
  }
}
