import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';
import { parseKubernetesVersion, supportsNativeSidecars } from './cluster-version.js';

/**
 * `--native-sidecar auto`: kubelets may be up to three minor versions older
 * than the API server, and a native sidecar on a 1.28 kubelet is an init
 * container that never exits (the Pod stays in Init). So native sidecars
 * only when every node's kubelet (Node `status.nodeInfo.kubeletVersion`,
 * read-only: get, list, watch) supports them.
 */
export class KubeletVersions {
  readonly #informer: ResilientInformer<V1Node>;
  readonly #log: Logger;
  readonly #onChange: () => void;
  #allNative: boolean | undefined;

  constructor(options: { kubeConfig: KubeConfig; backoff: Backoff; watchLiveness?: Partial<WatchLiveness> | undefined; log: Logger; onChange: () => void }) {
    const api = options.kubeConfig.makeApiClient(CoreV1Api);
    this.#log = options.log;
    this.#onChange = options.onChange;
    let informer: ResilientInformer<V1Node> | undefined;
    const onConnected = (): void => {
      informer?.resetBackoff();
      // The first sync decides even when no Node event comes (a cluster without nodes yet).
      this.#update();
    };
    this.#informer = informer = new ResilientInformer<V1Node>({
      name: 'Nodes',
      path: '/api/v1/nodes',
      watch: new TrackedWatch(options.kubeConfig, { backoff: options.backoff, liveness: options.watchLiveness, onConnected }),
      list: () => api.listNode(),
      backoff: options.backoff,
      log: options.log,
    });
    for (const verb of ['add', 'update', 'delete'] as const) this.#informer.on(verb, () => this.#update());
  }

  start(): void {
    this.#informer.start();
  }

  stop(): void {
    this.#informer.stop();
  }

  /** Every known kubelet runs native sidecars (false until the Nodes are listed). */
  get allNative(): boolean {
    return this.#informer.hasSynced && this.#oldNodes().length === 0;
  }

  /** Readiness: undefined once the Nodes have been listed, else why not. */
  problem(): string | undefined {
    return this.#informer.hasSynced ? undefined : 'the Node watch has not synced yet: the kubelet versions that decide native sidecars (--native-sidecar auto) are unknown';
  }

  #update(): void {
    if (!this.#informer.hasSynced) return;
    const old = this.#oldNodes();
    const allNative = old.length === 0;
    if (allNative === this.#allNative) return;
    this.#allNative = allNative;
    this.#log.info(
      { oldKubelets: old },
      allNative ? 'every kubelet is 1.29 or later (--native-sidecar auto)' : `kubelets older than 1.29 on ${old.join(', ')}: classic sidecars (--native-sidecar auto)`,
    );
    this.#onChange();
  }

  /** Names of the nodes whose kubelet cannot run native sidecars (an unreadable version counts: a Pod stuck in Init is worse than a classic sidecar). */
  #oldNodes(): string[] {
    return this.#informer
      .list()
      .filter((node) => {
        const version = parseKubernetesVersion({ major: '', minor: '', gitVersion: node.status?.nodeInfo?.kubeletVersion ?? '' });
        return version === undefined || !supportsNativeSidecars(version);
      })
      .map((node) => node.metadata?.name ?? '?');
  }
}
