import { DEFAULT_BACKOFF } from '../kube/api/index.js';
import type { ClusterVersionCheck } from '../kube/index.js';
import type { ServerState } from '../server/server-state.js';
import type { Cluster, InjectorContext } from './injector-context.js';
import type { ServeSettings } from './serve-settings.js';

/** What follows the cluster's versions for `--native-sidecar auto`; nothing for on and off, or outside a cluster. */
export interface NativeSidecarFollowers {
  /** Checks the API server's version again (the cluster watches call it when they reconnect). */
  readonly versionCheck: ClusterVersionCheck | undefined;
  stop(): void;
}

/**
 * Sets the native-sidecar default: on, off, or with `auto` native sidecars
 * when the API server and every kubelet are 1.29+, followed as they change.
 */
export function followNativeSidecars(settings: ServeSettings, cluster: Cluster | undefined, state: ServerState, context: InjectorContext): NativeSidecarFollowers {
  state.nativeSidecar = settings.nativeSidecar === 'on';
  if (settings.nativeSidecar !== 'auto' || cluster === undefined) return { versionCheck: undefined, stop: () => undefined };
  const { kube, connection } = cluster;
  const { log } = context;
  const backoff = context.backoff ?? DEFAULT_BACKOFF;
  let apiServerNative = false;
  const kubelets = new kube.KubeletVersions({
    kubeConfig: connection.kubeConfig,
    backoff,
    watchLiveness: context.watchLiveness,
    log,
    onChange: () => (state.nativeSidecar = apiServerNative && kubelets.allNative),
  });
  const versionCheck = new kube.ClusterVersionCheck({
    kubeConfig: connection.kubeConfig,
    log,
    backoff,
    onNativeSidecar: (native) => {
      apiServerNative = native;
      state.nativeSidecar = native && kubelets.allNative;
    },
  });
  state.addCheck('nodes', () => kubelets.problem());
  kubelets.start();
  versionCheck.start();
  return {
    versionCheck,
    stop: () => {
      versionCheck.stop();
      kubelets.stop();
    },
  };
}
