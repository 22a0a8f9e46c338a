import type { Logger } from 'pino';
import { UsageError } from '../errors.js';
import { DEFAULT_BACKOFF, type Backoff } from '../kube/api/index.js';
import { startHealthServer, type HealthServer } from '../server/health-server.js';
import { createServerState } from '../server/serve.js';
import { loadTemplates, type CommandIo } from './io.js';
import type { ServeSettings } from './serve-settings.js';

export interface RunningPolicyController {
  readonly health: HealthServer;
  /** Stop serving health, stop the watch and the applies. */
  stop(): Promise<void>;
}

/**
 * `serve --mode policy`: no webhook, no certificates. The injector follows the
 * template ConfigMap (or a file) and keeps the MutatingAdmissionPolicy and the
 * binding compiled from it applied, through the API version the cluster
 * serves; it is ready when the objects in the cluster match the current
 * templates.
 */
export async function startPolicyController(
  settings: ServeSettings,
  context: { io: CommandIo; env: NodeJS.ProcessEnv; log: Logger; backoff?: Backoff },
): Promise<RunningPolicyController> {
  const { io, log } = context;
  const backoff = context.backoff ?? DEFAULT_BACKOFF;
  const kube = await import('../kube/index.js');
  // Apart from kube/index.js: the policy compiler is loaded by policy mode only, not by every webhook (RSS at rest, issue 39).
  const { PolicySync } = await import('../kube/policy-sync.js');
  const connection = kube.connectToCluster({ kubeconfig: settings.kubeconfig, env: context.env });
  if (connection === undefined) throw new UsageError('--mode policy needs a cluster (--kubeconfig, or running in a Pod)');
  const namespace = settings.namespace ?? connection.contextNamespace ?? 'default';
  const initial = settings.templateFile === undefined ? undefined : { set: await loadTemplates(settings.templateFile, io), source: settings.templateFile };
  const { state, metrics } = createServerState(log, initial, settings.metricsRelease);

  const sync = new PolicySync({
    kubeConfig: connection.kubeConfig,
    apiVersion: settings.policy.apiVersion,
    ownerClusterRole: settings.policy.owner,
    settings: {
      name: settings.policy.name,
      failurePolicy: settings.policy.failurePolicy,
      injectorNamespace: namespace,
      excludedNamespaces: settings.excludedNamespaces,
      // The API exists from 1.34 (beta), and every such cluster has native sidecars: auto means on.
      nativeSidecar: settings.nativeSidecar !== 'off',
      allowedOverrides: settings.allowedOverrides,
      neverInjectSelectors: settings.neverInjectSelectors,
      alwaysInjectSelectors: settings.alwaysInjectSelectors,
      generation: settings.policy.generation,
    },
    backoff,
    log,
  });
  metrics.trackPolicySync(() => sync.isInSync(state.templates.current));
  metrics.trackPolicyRefused(() => sync.refused);
  state.templates.onApplied((templates) => sync.apply(templates));
  if (state.templates.current !== undefined) sync.apply(state.templates.current);
  const watch =
    settings.templateFile === undefined
      ? kube.watchTemplateConfigMap({ kubeConfig: connection.kubeConfig, namespace, name: settings.configMapName, store: state.templates, backoff, log })
      : undefined;

  let health: HealthServer;
  try {
    health = await startHealthServer({
      host: settings.host,
      port: settings.port,
      metrics,
      ready: () => {
        const current = state.templates.current;
        if (current === undefined) return { ready: false, reason: 'no valid sidecar template loaded yet' };
        // During a rolling upgrade the newer release's controller applies; this one must not revert it.
        const newer = sync.supersededBy;
        if (newer !== undefined) return { ready: true, reason: `standing by: MutatingAdmissionPolicy ${settings.policy.name} is kept by a newer release (generation ${newer}; this one is ${settings.policy.generation})` };
        if (!sync.isInSync(current)) return { ready: false, reason: sync.problem ?? `MutatingAdmissionPolicy ${settings.policy.name} does not match the current templates yet` };
        return { ready: true, reason: `MutatingAdmissionPolicy ${settings.policy.name} (admissionregistration.k8s.io/${sync.apiVersion ?? '?'}) matches the current templates` };
      },
    });
  } catch (error) {
    watch?.stop();
    sync.stop();
    throw error;
  }
  log.info(
    { port: health.port, policy: settings.policy.name, namespace, configMap: settings.templateFile === undefined ? settings.configMapName : undefined },
    `envoy-injector policy mode: keeping MutatingAdmissionPolicy ${settings.policy.name} in sync (${connection.source}); health on http://${settings.host}:${health.port}`,
  );
  return {
    health,
    stop: async () => {
      await health.close();
      watch?.stop();
      sync.stop();
    },
  };
}
