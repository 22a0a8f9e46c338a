import type { JsonObject } from '../../src/injection/index.js';
import type { ControlPlane } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { kubeCall } from './policy-parity.js';

/**
 * The set-up the capture files share: the chart installed with VALUES,
 * one opted-in namespace per Pod Security level, the injector started as
 * the chart runs it, and a dry-run create repeated until the API server
 * really calls it (its webhook configuration is read with a delay).
 */
export interface CaptureInstall<K extends string = string> {
  readonly release: Release;
  readonly injector: ChartInjector;
  /** The namespaces made, by the name the caller gave their level. */
  readonly namespaces: Readonly<Record<K, string>>;
  /** Stops the injector, uninstalls the chart and deletes the namespaces; never throws. */
  teardown(): Promise<void>;
}

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';

export async function installCaptureChart<K extends string>(
  plane: ControlPlane,
  values: Record<string, unknown>,
  /** Per namespace to make: its prefix and the Pod Security level it enforces, or that level and further labels. */
  levels: Readonly<Record<K, PodSecurityLevel | { readonly level: PodSecurityLevel; readonly labels: Readonly<Record<string, string>> }>>,
  /** A Pod the first namespace injects once the webhook is called. */
  warmupPod: JsonObject,
): Promise<CaptureInstall<K>> {
  const made = (Object.entries(levels) as [K, PodSecurityLevel | { level: PodSecurityLevel; labels: Readonly<Record<string, string>> }][]).map(([key, given]) => ({
    key,
    level: typeof given === 'string' ? given : given.level,
    labels: typeof given === 'string' ? {} : given.labels,
    name: uniqueName(`capture-${key}`),
  }));
  const namespaces = Object.fromEntries(made.map(({ key, name }) => [key, name])) as Record<K, string>;
  const release = await helmInstall(plane, { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') }, values);
  await Promise.all(made.map(({ name, level, labels }) => createNamespace(plane, name, { ...labels, 'envoy-injector.io/inject': 'enabled', 'pod-security.kubernetes.io/enforce': level })));
  const injector = await startChartInjector(plane, release);
  const teardown = async (): Promise<void> => {
    await injector.stop().catch(() => undefined);
    await helmUninstall(plane, release).catch(() => undefined);
    await deleteNamespaces(plane, Object.values(namespaces));
  };
  try {
    await eventually('a first Pod injected through the API server', async () => {
      const response = await kubeCall(plane, 'POST', `/api/v1/namespaces/${made[0]?.name ?? 'default'}/pods?dryRun=All`, warmupPod);
      return JSON.stringify(response.body).includes('envoy-injector.io/status') ? true : undefined;
    }, 30_000, 200);
  } catch (error) {
    await teardown();
    throw error;
  }
  return { release, injector, namespaces, teardown };
}
