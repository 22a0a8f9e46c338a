import { rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { parseArgs } from 'node:util';
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { CAPTURE_NOT_REPAIRED_REASON, CAPTURE_REPAIRED_REASON, neverCapturedNamespace, notRepairedNote, repairAction, repairNote } from '../node/cni/index.js';
import { UsageError } from '../errors.js';
import { isJsonObject, type JsonObject } from '../injection/index.js';
import { connectToCluster, DEFAULT_BACKOFF, deletePodByUid, kubeJson, type Backoff, type PodDeleteOutcome, type WatchLiveness } from '../kube/api/index.js';
import { NodePods } from '../kube/watches/index.js';
import { CniAgentMetrics, NODE_LABEL } from '../node/agent-metrics.js';
import { RELEASE_LABEL } from '../server/metrics.js';
import { startMetricsServer } from '../server/metrics-server.js';
import { installPlugin, rulesRunner, serveShim, uninstallPlugin, type PluginPlaces } from '../node/agent.js';
import type { CommandIo } from './io.js';
import { parseInteger } from './options.js';

export const CNI_AGENT_HELP = `Usage: envoy-injector cni-agent --node-name NAME [options]

The node agent of capture in CNI mode (a DaemonSet Pod, privileged, host network
and PID): installs the plugin envoy-injector-cni into the node's CNI folders and
keeps it last in the primary configuration's chain, answers the plugin's requests
(the capture rules run in the Pods' network namespaces), deletes Pods of the node
whose envoy-capture-check found no rules (a bare Pod, which nothing would make
again, only gets a Warning), and takes the plugin out on SIGTERM.

Options:
  --node-name NAME     the node this agent runs on (NODE_NAME)
  --cni-bin-dir DIR    the CNI binary folder as mounted (default /host/opt/cni/bin)
  --cni-conf-dir DIR   the CNI configuration folder as mounted (default /host/etc/cni/net.d)
  --socket PATH        where the agent listens (default /var/run/envoy-injector/cni.sock)
  --plugin PATH        the plugin's static shim to install (default /usr/local/lib/envoy-injector-cni)
  --rules PATH         the rule script (default /usr/local/bin/capture-rules.sh)
  --ready-file PATH    written once the plugin is in place, removed on stop (default /tmp/cni-ready)
  --interval-seconds N how often the chain is checked and Pods are repaired (default 2)
  --namespace NAME     the injector's namespace (POD_NAMESPACE): never captured
  --excluded-namespaces L comma-separated namespaces the injector never captures, beyond
                       kube-system, kube-public, kube-node-lease (EXCLUDED_NAMESPACES): an
                       ADD for a Pod there that the agent's watch lacks is never
                       waited on (an API outage does not hold it)
  --metrics-port N     serve GET /metrics over plain HTTP on this port of the node (default 10390; 0: none)
  --metrics-host ADDR  address of the metrics port (default "::", every IPv4 and IPv6 address)
  --metrics-release ID put the label envoy_injector_release="ID" on every series, as the
                       injector's --metrics-release (METRICS_RELEASE); envoy_injector_node="NAME"
                       is always there
  --kubeconfig FILE    the cluster (default: in-cluster)
  -h, --help
`;

/**
 * The agent's metrics port on the node (host network): outside 9100-9999 (the
 * Prometheus exporters' block, where node-exporter, Calico, Cilium and Linkerd
 * listen), Istio's 15000-15090, Linkerd's 4140-4191, the Kubernetes components'
 * 10248-10260, the NodePort range and Linux's ephemeral ports.
 */
export const DEFAULT_METRICS_PORT = 10390;

export interface CniAgentSettings extends PluginPlaces {
  readonly nodeName: string;
  readonly rules: string;
  readonly readyFile: string;
  readonly intervalMs: number;
  /** Where GET /metrics is served (port 0: one the system picks); undefined: not served. */
  readonly metrics?: { readonly host: string; readonly port: number } | undefined;
  /** The envoy_injector_release label of every series (the chart's `<namespace>/<release>`). */
  readonly metricsRelease?: string | undefined;
  /** The injector's namespace and the configured exclusions: namespaces whose Pods are never captured (neverCapturedNamespace). */
  readonly injectorNamespace?: string | undefined;
  readonly excludedNamespaces?: readonly string[] | undefined;
  /** The watch of the node's Pods: tests shorten these (DEFAULT_BACKOFF, DEFAULT_WATCH_LIVENESS). */
  readonly watch?: { readonly backoff?: Backoff; readonly liveness?: Partial<WatchLiveness> } | undefined;
}

export interface CniAgent {
  /** One round: the plugin back in place if it was taken out, then the repair. */
  tick(): Promise<void>;
  stop(): Promise<void>;
  /** The port GET /metrics is served on, if it is. */
  readonly metricsPort: number | undefined;
  /** The node's Pods as the agent's watch holds them. */
  readonly pods: Pick<NodePods, 'get' | 'hasSynced'>;
}

/** Starts the agent's socket and first round, then a round every interval. */
export async function startCniAgent(settings: CniAgentSettings, kubeConfig: KubeConfig, io: CommandIo): Promise<CniAgent> {
  const metrics = new CniAgentMetrics({ labels: { [NODE_LABEL]: settings.nodeName, ...(settings.metricsRelease === undefined ? {} : { [RELEASE_LABEL]: settings.metricsRelease }) } });
  const metricsServer = settings.metrics === undefined ? undefined : await startMetricsServer(metrics, settings.metrics.host, settings.metrics.port);
  const log = pino({ level: 'info', base: { name: 'envoy-injector-cni-agent' } }, { write: (line: string) => void io.stderr.write(line) });
  const pods = new NodePods({ kubeConfig, nodeName: settings.nodeName, backoff: settings.watch?.backoff ?? DEFAULT_BACKOFF, watchLiveness: settings.watch?.liveness, log });
  pods.start();
  const server: Server = await serveShim(settings.agentSocket, {
    readPod: (namespace, name, uid) => pods.read(namespace, name, uid),
    cachedPod: (namespace, name, uid) => pods.get(namespace, name, uid),
    neverCaptured: (namespace) => neverCapturedNamespace(namespace, settings),
    runRules: rulesRunner(settings.rules),
    countSetUp: (result) => metrics.setUp(result),
  });
  /** The bare Pods already warned about (a Warning once each, not every round). */
  const left = new Set<string>();
  const tick = async (): Promise<void> => {
    const edit = await installPlugin(settings);
    if ('problem' in edit) {
      io.stderr.write(`cni-agent: ${settings.confDir}: ${edit.problem}\n`);
      metrics.installed.set(0);
      await rm(settings.readyFile, { force: true });
      return;
    }
    if (edit.changed) io.stdout.write(`cni-agent: envoy-injector-cni put last in the chain of ${edit.file ?? ''}\n`);
    await writeFile(settings.readyFile, 'ready\n');
    metrics.installed.set(1);
    // Until the watch has listed the node's Pods there is nothing to repair from (the next round tries again).
    if (pods.hasSynced) await repair(kubeConfig, settings.nodeName, io, metrics, left, pods.list()).catch((error: Error) => io.stderr.write(`cni-agent: repair: ${error.message}\n`));
  };
  let running = tick();
  await running;
  const timer = setInterval(() => {
    running = running.then(tick).catch((error: Error) => void io.stderr.write(`cni-agent: ${error.message}\n`));
  }, settings.intervalMs);
  return {
    tick: () => (running = running.then(tick)),
    metricsPort: metricsServer?.port,
    pods,
    stop: async () => {
      clearInterval(timer);
      pods.stop();
      await running.catch(() => undefined);
      await rm(settings.readyFile, { force: true });
      metrics.installed.set(0);
      await uninstallPlugin(settings);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await metricsServer?.close();
    },
  };
}

/** Posts a Warning Event on a Pod of the node, as the agent; a failure is only logged. */
async function warnOnPod(kubeConfig: KubeConfig, nodeName: string, io: CommandIo, pod: JsonObject, event: { reason: string; action: string; note: string }): Promise<void> {
  const metadata = isJsonObject(pod['metadata']) ? pod['metadata'] : {};
  const namespace = String(metadata['namespace']);
  const name = String(metadata['name']);
  await kubeJson(kubeConfig, {
    method: 'POST',
    path: `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/events`,
    body: {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      // Named as client-go names Events: the object, then a timestamp in hex.
      metadata: { name: `${name}.${Date.now().toString(16)}`, namespace },
      eventTime: new Date().toISOString().replace(/\.\d+Z$/, '.000000Z'),
      type: 'Warning',
      ...event,
      reportingController: 'envoy-injector.io/cni-agent',
      reportingInstance: `envoy-injector-cni-agent-${nodeName}`,
      regarding: { apiVersion: 'v1', kind: 'Pod', namespace, name, uid: metadata['uid'] },
    },
  }).catch((error: Error) => io.stderr.write(`cni-agent: Event for Pod ${namespace}/${name}: ${error.message}\n`));
}

/**
 * Deletes the node's Pods (ITEMS, the watch's cache) whose check found no rules and that a controller
 * makes again, each with a Warning Event on it first; a Pod nothing would
 * make again gets a Warning once (LEFT holds their uids) and is kept.
 */
async function repair(kubeConfig: KubeConfig, nodeName: string, io: CommandIo, metrics: CniAgentMetrics, left: Set<string>, items: readonly JsonObject[]): Promise<void> {
  const stillLeft = new Set<string>();
  for (const pod of items) {
    const action = repairAction(pod, nodeName);
    if (action === undefined) continue;
    const metadata = isJsonObject(pod['metadata']) ? pod['metadata'] : {};
    const namespace = String(metadata['namespace']);
    const name = String(metadata['name']);
    if (action === 'leave') {
      const uid = String(metadata['uid']);
      stillLeft.add(uid);
      if (left.has(uid)) continue;
      await warnOnPod(kubeConfig, nodeName, io, pod, { reason: CAPTURE_NOT_REPAIRED_REASON, action: 'None', note: notRepairedNote(nodeName) });
      metrics.repaired('left');
      io.stdout.write(`cni-agent: left Pod ${namespace}/${name}: ${notRepairedNote(nodeName)}\n`);
      continue;
    }
    await warnOnPod(kubeConfig, nodeName, io, pod, { reason: CAPTURE_REPAIRED_REASON, action: 'Delete', note: repairNote(nodeName) });
    let outcome: PodDeleteOutcome;
    try {
      outcome = await deletePodByUid(kubeConfig, { namespace, name, uid: String(metadata['uid'] ?? '') });
    } catch (error) {
      // Counted, and the next Pod repaired still: this one is tried again next round.
      metrics.repaired('failed');
      io.stderr.write(`cni-agent: deleting Pod ${namespace}/${name}: ${(error as Error).message}\n`);
      continue;
    }
    if (outcome !== 'deleted') {
      // Its name now holds a new Pod (a StatefulSet's), or none: nothing of this Pod is left to repair.
      io.stdout.write(`cni-agent: Pod ${namespace}/${name} not deleted: ${outcome === 'gone' ? 'already gone' : 'replaced by a new Pod of that name, which is kept'}\n`);
      continue;
    }
    metrics.repaired('deleted');
    io.stdout.write(`cni-agent: deleted Pod ${namespace}/${name}: ${repairNote(nodeName)}\n`);
  }
  // Only the Pods still waiting are remembered: a Pod gone (or fixed) is forgotten.
  left.clear();
  for (const uid of stillLeft) left.add(uid);
}

export async function runCniAgent(args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      'node-name': { type: 'string', default: env['NODE_NAME'] ?? '' },
      'cni-bin-dir': { type: 'string', default: '/host/opt/cni/bin' },
      'cni-conf-dir': { type: 'string', default: '/host/etc/cni/net.d' },
      socket: { type: 'string', default: '/var/run/envoy-injector/cni.sock' },
      plugin: { type: 'string', default: '/usr/local/lib/envoy-injector-cni' },
      rules: { type: 'string', default: '/usr/local/bin/capture-rules.sh' },
      'ready-file': { type: 'string', default: '/tmp/cni-ready' },
      'interval-seconds': { type: 'string', default: '2' },
      'metrics-port': { type: 'string', default: String(DEFAULT_METRICS_PORT) },
      'metrics-host': { type: 'string', default: '::' },
      'metrics-release': { type: 'string', default: env['METRICS_RELEASE'] ?? '' },
      namespace: { type: 'string', default: env['POD_NAMESPACE'] ?? '' },
      'excluded-namespaces': { type: 'string', default: env['EXCLUDED_NAMESPACES'] ?? '' },
      kubeconfig: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(CNI_AGENT_HELP);
    return 0;
  }
  if (values['node-name'] === '') throw new UsageError('--node-name: required (or NODE_NAME)');
  const seconds = parseInteger(values['interval-seconds'], '--interval-seconds', 1, 60);
  const metricsPort = parseInteger(values['metrics-port'], '--metrics-port', 0, 65535);
  const connection = connectToCluster({ kubeconfig: values.kubeconfig, env });
  if (connection === undefined) throw new UsageError('cni-agent needs the cluster: --kubeconfig, KUBECONFIG or an in-cluster service account');
  const agent = await startCniAgent(
    {
      nodeName: values['node-name'],
      binDir: values['cni-bin-dir'],
      confDir: values['cni-conf-dir'],
      agentSocket: values.socket,
      plugin: values.plugin,
      rules: values.rules,
      readyFile: values['ready-file'],
      intervalMs: seconds * 1000,
      metrics: metricsPort === 0 ? undefined : { host: values['metrics-host'], port: metricsPort },
      metricsRelease: values['metrics-release'] === '' ? undefined : values['metrics-release'],
      injectorNamespace: values.namespace === '' ? undefined : values.namespace,
      excludedNamespaces: values['excluded-namespaces'].split(',').map((name) => name.trim()).filter((name) => name !== ''),
    },
    connection.kubeConfig,
    io,
  );
  await new Promise<void>((resolve) => process.once('SIGTERM', resolve));
  await agent.stop();
  return 0;
}
