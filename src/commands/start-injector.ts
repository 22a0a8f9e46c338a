import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { clusterRequested, DEFAULT_BACKOFF } from '../kube/api/index.js';
import type { CertificateManager, ClusterWatches, RolloutController, WorkloadEvents } from '../kube/index.js';
import type { InjectorMetrics } from '../server/metrics.js';
import { createServerState, startServer, type RunningServer, type ServeOptions } from '../server/serve.js';
import type { ServerState } from '../server/server-state.js';
import type { Cluster, InjectorContext } from './injector-context.js';
import { loadTemplates } from './io.js';
import { followNativeSidecars, type NativeSidecarFollowers } from './native-sidecar-followers.js';
import type { ServeSettings } from './serve-settings.js';
import { StopList } from './stop-list.js';
import { startTlsSource } from './tls-source.js';

/** On shutdown, how long the last flush of workload Events may take. */
const EVENTS_SHUTDOWN_FLUSH_MS = 2_000;

export interface RunningInjector {
  readonly server: RunningServer;
  readonly state: ServerState;
  readonly metrics: InjectorMetrics;
  readonly cluster: ClusterWatches | undefined;
  /** Present in `--cert-mode auto`. */
  readonly certificates: CertificateManager | undefined;
  /** Present with `--rollout on` in a cluster: leading or following. */
  readonly rollout: RolloutController | undefined;
  /** Readiness false, drain, close, stop the watches. */
  stop(): Promise<void>;
}

/**
 * Wires settings into a running injector, one step after the other; each
 * step's stop is recorded as it starts, and when a later step fails what has
 * started is stopped before the failure is thrown.
 */
export async function startInjector(settings: ServeSettings, context: InjectorContext): Promise<RunningInjector> {
  const cluster = await connect(settings, context.env);
  const { state, metrics } = createServerState(context.log, await initialTemplates(settings, cluster, context), settings.metricsRelease);
  const started = new StopList();
  try {
    const tlsSource = await startTlsSource(settings, cluster, state, metrics, context);
    started.add(() => tlsSource.stop());
    const followers = followNativeSidecars(settings, cluster, state, context);
    started.add(() => followers.stop());
    const watches = startClusterState(settings, cluster, state, followers, context);
    if (watches !== undefined) started.add(() => watches.stop());
    const workloadEvents = startWorkloadEvents(settings, cluster, metrics, context);
    // Stopped after the server: no request is left to add an Event, and the last flush is bounded.
    if (workloadEvents !== undefined) started.add(() => workloadEvents.stop(EVENTS_SHUTDOWN_FLUSH_MS));
    const rollout = startRollout(settings, cluster, state, metrics, watches, context);
    // Stopped after the server (latest first): its last plan ends and the Lease is given up before the process exits.
    if (rollout !== undefined) started.add(() => rollout.stop());
    const server = await startWebhookServer(settings, cluster, tlsSource.tls, state, metrics, watches, workloadEvents, context);
    started.add(() => server.shutdown());
    await tlsSource.serveOn(server);
    if (settings.tls === undefined && settings.certificates.mode === 'files') printTryIt(settings.certsDir, server.port, context);
    return { server, state, metrics, cluster: watches, certificates: tlsSource.certificates, rollout, stop: () => started.stopAll() };
  } catch (error) {
    await started.stopAll();
    throw error;
  }
}

/** The cluster, when one is configured; outside one @kubernetes/client-node is never loaded (memory and start-up time). */
async function connect(settings: ServeSettings, env: NodeJS.ProcessEnv): Promise<Cluster | undefined> {
  if (clusterRequested({ kubeconfig: settings.kubeconfig, env }) === undefined) return undefined;
  const kube = await import('../kube/index.js');
  const connection = kube.connectToCluster({ kubeconfig: settings.kubeconfig, env });
  if (connection === undefined) return undefined;
  return { kube, connection, namespace: settings.namespace ?? connection.contextNamespace ?? 'default' };
}

/** A template file, or outside a cluster the bundled one; in a cluster the ConfigMap watch fills the store. */
async function initialTemplates(settings: ServeSettings, cluster: Cluster | undefined, { io }: InjectorContext): Promise<Parameters<typeof createServerState>[1]> {
  if (settings.templateFile === undefined && cluster !== undefined) return undefined;
  return { set: await loadTemplates(settings.templateFile, io), source: settings.templateFile ?? 'the bundled seed template' };
}

/** The watches of the live state (templates, namespace labels), and what readiness and the metrics read of them. */
function startClusterState(settings: ServeSettings, cluster: Cluster | undefined, state: ServerState, followers: NativeSidecarFollowers, context: InjectorContext): ClusterWatches | undefined {
  if (cluster === undefined) return undefined;
  const { versionCheck } = followers;
  const watches = cluster.kube.startClusterWatches({
    connection: cluster.connection,
    namespace: cluster.namespace,
    configMapName: settings.templateFile === undefined ? settings.configMapName : undefined,
    store: state.templates,
    backoff: context.backoff ?? DEFAULT_BACKOFF,
    watchLiveness: context.watchLiveness,
    namespaceLookupTimeoutMs: context.namespaceLookupTimeoutMs ?? 1_000,
    log: context.log,
    ...(versionCheck === undefined ? {} : { onWatchConnected: () => void versionCheck.recheck() }),
  });
  state.staleSeconds = () => watches.staleSeconds();
  state.addCheck('namespaces', () => watches.namespaceLabels.problem());
  return watches;
}

/** Warning Events on the workloads of Pods that asked for the sidecar and did not get it as asked (none outside a cluster, or at --event-queue-size 0). */
function startWorkloadEvents(settings: ServeSettings, cluster: Cluster | undefined, metrics: InjectorMetrics, { log }: InjectorContext): WorkloadEvents | undefined {
  if (cluster === undefined || settings.eventQueueSize === 0) return undefined;
  // In a Pod the host name is the Pod's name: the Events' reportingInstance.
  const events = new cluster.kube.WorkloadEvents({ kubeConfig: cluster.connection.kubeConfig, log, recorder: metrics, queueSize: settings.eventQueueSize, reportingInstance: hostname() });
  events.start();
  return events;
}

/** The rollout by budget (`--rollout on`): every replica runs for the Lease, the leader rolls (kube/rollout-controller.ts). */
function startRollout(settings: ServeSettings, cluster: Cluster | undefined, state: ServerState, metrics: InjectorMetrics, watches: ClusterWatches | undefined, context: InjectorContext): RolloutController | undefined {
  if (!settings.rollout.enabled || cluster === undefined || watches === undefined) return undefined;
  const rollout = new cluster.kube.RolloutController({
    kubeConfig: cluster.connection.kubeConfig,
    namespace: cluster.namespace,
    leaseName: settings.rollout.leaseName,
    // client-go's identity: the host (the Pod's name) and a UUID, so that a restarted Pod is a new candidate.
    identity: `${hostname()}_${randomUUID()}`,
    settings: { maxConcurrent: settings.rollout.maxConcurrent, readyTimeoutMs: settings.rollout.readyTimeoutMs },
    decision: {
      excludedNamespaces: settings.excludedNamespaces,
      injectorNamespace: settings.namespace ?? cluster.connection.contextNamespace,
      neverInjectSelectors: settings.neverInjectSelectors,
      alwaysInjectSelectors: settings.alwaysInjectSelectors,
    },
    templates: () => state.templates.current,
    namespaceMetadata: (name) => watches.namespaceLabels.metadataOf(name),
    fieldManager: settings.rollout.fieldManager,
    allowedOverrides: settings.allowedOverrides,
    recorder: metrics.rollout,
    log: context.log.child({ component: 'rollout' }),
    backoff: context.backoff ?? DEFAULT_BACKOFF,
    watchLiveness: context.watchLiveness,
  });
  rollout.start();
  return rollout;
}

function startWebhookServer(
  settings: ServeSettings,
  cluster: Cluster | undefined,
  tls: ServeOptions['tls'],
  state: ServerState,
  metrics: InjectorMetrics,
  watches: ClusterWatches | undefined,
  workloadEvents: WorkloadEvents | undefined,
  { log }: InjectorContext,
): Promise<RunningServer> {
  return startServer({
    port: settings.port,
    host: settings.host,
    tls,
    tlsReloadIntervalMs: settings.tlsReloadIntervalMs,
    state,
    metrics,
    decisionOptions: {
      excludedNamespaces: settings.excludedNamespaces,
      // Only a namespace known to be the injector's: not the `default` the watches fall back to.
      injectorNamespace: settings.namespace ?? cluster?.connection.contextNamespace,
      allowedOverrides: settings.allowedOverrides,
      neverInjectSelectors: settings.neverInjectSelectors,
      alwaysInjectSelectors: settings.alwaysInjectSelectors,
    },
    ...(watches === undefined ? {} : { namespaceMetadata: (name: string) => watches.namespaceLabels.metadataOf(name) }),
    workloadEvents,
    maxConnections: settings.maxConnections,
    metricsPort: settings.metricsPort,
    shutdownDelayMs: settings.shutdownDelayMs,
    shutdownTimeoutMs: settings.shutdownTimeoutMs,
    log,
  });
}

/** With dev certificates, how to try the server by hand. */
function printTryIt(certsDir: string, port: number, { io }: InjectorContext): void {
  const ca = join(certsDir, 'ca.crt');
  io.stderr.write(`try it: curl --cacert ${ca} -H Content-Type:application/json --data-binary @examples/admission-review.json https://localhost:${port}/mutate\n`);
}
