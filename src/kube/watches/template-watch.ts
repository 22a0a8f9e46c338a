import { CoreV1Api, KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { TemplateStore } from '../../state/template-store.js';
import { ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';

/**
 * Watches the one template ConfigMap (a field selector on its name, so RBAC
 * can stay scoped to that name in that namespace) and feeds every version to
 * the store, which applies valid ones and keeps the last good set otherwise.
 */
export function watchTemplateConfigMap(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  store: TemplateStore;
  backoff: Backoff;
  watchLiveness?: Partial<WatchLiveness> | undefined;
  log: Logger;
  onWatchConnected?: () => void;
}): ResilientInformer<V1ConfigMap> {
  const { kubeConfig, namespace, name, store, log } = options;
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const fieldSelector = `metadata.name=${name}`;
  const source = `ConfigMap ${namespace}/${name}`;
  let informer: ResilientInformer<V1ConfigMap> | undefined;
  const watch = new TrackedWatch(kubeConfig, {
    backoff: options.backoff,
    liveness: options.watchLiveness,
    onConnected: () => {
      informer?.resetBackoff();
      options.onWatchConnected?.();
    },
  });
  informer = new ResilientInformer<V1ConfigMap>({
    name: source,
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
    watch,
    list: () => api.listNamespacedConfigMap({ namespace, fieldSelector }),
    fieldSelector,
    backoff: options.backoff,
    log,
  });
  const apply = (configMap: V1ConfigMap): void => {
    store.update(configMap.data ?? {}, `${source} (resourceVersion ${configMap.metadata?.resourceVersion ?? '?'})`);
  };
  informer.on('add', apply);
  informer.on('update', apply);
  informer.on('delete', () => store.deleted(source));
  informer.start();
  return informer;
}
