import type { Logger } from 'pino';
import type { TemplateStore } from '../../state/template-store.js';
import type { Backoff, ClusterConnection, WatchLiveness } from '../api/index.js';
import { NamespaceLabels } from './namespace-labels.js';
import { watchTemplateConfigMap } from './template-watch.js';

export interface ClusterWatches {
  readonly namespaceLabels: NamespaceLabels;
  /** Seconds since the stalest watch was last in sync (0 when all are connected). */
  staleSeconds(): number;
  stop(): void;
}

/** Everything the webhook follows in a cluster: Namespace labels and, unless a file is used, the template ConfigMap. */
export function startClusterWatches(options: {
  connection: ClusterConnection;
  namespace: string;
  /** The template ConfigMap's name; undefined when templates come from a file. */
  configMapName: string | undefined;
  store: TemplateStore;
  backoff: Backoff;
  /** Tests shorten these; see DEFAULT_WATCH_LIVENESS. */
  watchLiveness?: Partial<WatchLiveness> | undefined;
  namespaceLookupTimeoutMs: number;
  /** Called whenever a watch stream (re)connects. */
  onWatchConnected?: () => void;
  log: Logger;
}): ClusterWatches {
  const { connection, log, backoff } = options;
  const namespaceLabels = new NamespaceLabels({
    kubeConfig: connection.kubeConfig,
    backoff,
    watchLiveness: options.watchLiveness,
    lookupTimeoutMs: options.namespaceLookupTimeoutMs,
    log,
    ...(options.onWatchConnected === undefined ? {} : { onWatchConnected: options.onWatchConnected }),
  });
  namespaceLabels.start();
  const templates =
    options.configMapName === undefined
      ? undefined
      : watchTemplateConfigMap({
          kubeConfig: connection.kubeConfig,
          namespace: options.namespace,
          name: options.configMapName,
          store: options.store,
          backoff,
          watchLiveness: options.watchLiveness,
          log,
          ...(options.onWatchConnected === undefined ? {} : { onWatchConnected: options.onWatchConnected }),
        });
  log.info(
    { cluster: connection.source, namespace: options.namespace, configMap: options.configMapName },
    `watching ${options.configMapName === undefined ? 'Namespaces' : `ConfigMap ${options.namespace}/${options.configMapName} and Namespaces`} (${connection.source})`,
  );
  return {
    namespaceLabels,
    staleSeconds: () => Math.max(namespaceLabels.staleSeconds(), templates?.staleSeconds() ?? 0),
    stop: () => {
      namespaceLabels.stop();
      templates?.stop();
    },
  };
}
