/**
 * What a node tier test file gets, per Kubernetes version: the node (the
 * runner's, or one started for the file), the recorder, the chart installed
 * with its default template and the injector running as the chart runs it
 * (test/e2e/injector-process.ts: the Service's loopback ClusterIP), and a
 * namespace labeled for injection where its Pods run on the node.
 *
 *   forEachNode('scenario', (suite, version) => {
 *     before(async () => { await suite().createPods([appPod('a'), ...]); });
 *     it('...', async () => { const pod = await suite().waitPod('a', running('app'), 'a running'); });
 *   });
 *
 * NODE_TIER_BREAK=<name> takes one behaviour away, so that a scenario can be
 * seen to fail (CONTRIBUTING.md, "The node tier").
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe } from 'node:test';
import { CoreV1Api, type V1Container, type V1ContainerStatus, type V1Pod } from '@kubernetes/client-node';
import { connect, sharedAddresses, type ControlPlane } from '../e2e/control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, uniqueName, type Release } from '../e2e/cluster.js';
import { startChartInjector, type ChartInjector } from '../e2e/injector-process.js';
import type { KubeVersion } from '../e2e/kube-binaries.js';
import { ROOT } from '../helpers/fixtures.js';
import { APP_IMAGE } from './image-recipes.js';
import { NODE_NAME } from './network.js';
import { NODE_VERSIONS, startNode, type KubeNode } from './node.js';
import { startRecorder, type Recorder } from './recorder.js';

export interface NodeSuite {
  readonly version: KubeVersion;
  readonly plane: ControlPlane;
  readonly core: CoreV1Api;
  readonly recorder: Recorder;
  readonly namespace: string;
  /** The chart's release whose injector runs as a local process; undefined for a suite made with `injector: 'none'`. */
  readonly release: Release | undefined;
  /** Creates the Pods at once in the suite's namespace, on the node. */
  createPods(pods: readonly V1Pod[]): Promise<void>;
  /** Polls Pod NAME until READY says it is as wanted; the bound and WHAT name it in the error. */
  waitPod(name: string, ready: (pod: V1Pod) => boolean, what: string, timeoutMs?: number): Promise<V1Pod>;
  readPod(name: string): Promise<V1Pod>;
}

/** The behaviour NODE_TIER_BREAK takes away (undefined: none). */
export function broken(): string | undefined {
  const value = process.env['NODE_TIER_BREAK'];
  return value === undefined || value === '' ? undefined : value;
}

/** The versions of this run: NODE_VERSIONS, narrowed by E2E_KUBE_VERSIONS. */
export function nodeVersions(): KubeVersion[] {
  const wanted = process.env['E2E_KUBE_VERSIONS'];
  return NODE_VERSIONS.filter((version) => wanted === undefined || wanted === '' || wanted.split(',').map((v) => v.trim()).includes(version));
}

/**
 * `describe(TITLE on VERSION)` per node version. With `injector: 'process'`
 * (the default) the suite's release (the chart with VALUES of the plane) runs
 * the injector as a local process on its Service's ClusterIP; with 'none' the
 * suite has no release and installs what it needs itself. NAMESPACE_LABELS
 * go on the suite's namespace beside its own (the injection and Pod Security).
 */
export function forEachNode(
  title: string,
  body: (suite: () => NodeSuite, version: KubeVersion) => void,
  options: { injector?: 'process' | 'none'; values?: (plane: ControlPlane) => Record<string, unknown>; namespaceLabels?: Readonly<Record<string, string>> } = {},
): void {
  const withInjector = options.injector !== 'none';
  for (const version of nodeVersions()) {
    describe(`${title} (Kubernetes ${version}, a real node)`, () => {
      let node: KubeNode | undefined;
      let current: NodeSuite | undefined;
      let injector: ChartInjector | undefined;
      before(async () => {
        const shared = sharedAddresses()[version];
        let plane: ControlPlane;
        if (shared !== undefined) plane = await connect(shared);
        else {
          node = await startNode(version);
          plane = node.plane;
        }
        current = await setUp(version, plane, withInjector, options.values?.(plane) ?? {}, options.namespaceLabels ?? {});
        if (current.release === undefined) return;
        injector = await startChartInjector(plane, current.release);
        const namespace = current.namespace;
        await eventually('a first Pod injected through the API server', async () => {
          const pod = await current?.core.createNamespacedPod({ namespace, body: appPod('warmup'), dryRun: 'All' });
          return pod?.metadata?.annotations?.['envoy-injector.io/status'] !== undefined ? true : undefined;
        }, 30_000, 200);
      });
      after(async () => {
        await injector?.stop().catch(() => undefined);
        if (current !== undefined) {
          await saveRecords(version, title, current.recorder);
          if (current.release !== undefined) await helmUninstall(current.plane, current.release).catch(() => undefined);
          await deleteNamespaces(current.plane, [current.namespace]);
          await current.recorder.close();
        }
        await node?.stop();
      });
      body(() => {
        if (current === undefined) throw new Error(`the Kubernetes ${version} node did not start (see the before hook's error)`);
        return current;
      }, version);
    });
  }
}

/** The suite's records, kept for a look after a failure: node_modules/.cache/envoy-injector-node/logs/VERSION/. */
async function saveRecords(version: KubeVersion, title: string, recorder: Recorder): Promise<void> {
  const dir = join(ROOT, 'node_modules', '.cache', 'envoy-injector-node', 'logs', version);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, `records-${title.replace(/[^a-z0-9]+/gi, '-')}.jsonl`), recorder.records.map((record) => JSON.stringify(record)).join('\n'));
}

async function setUp(version: KubeVersion, plane: ControlPlane, withRelease: boolean, values: Record<string, unknown>, labels: Readonly<Record<string, string>>): Promise<NodeSuite> {
  const core = plane.kubeConfig.makeApiClient(CoreV1Api);
  const recorder = await startRecorder();
  const release = withRelease ? await helmInstall(plane, { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') }, values) : undefined;
  const namespace = uniqueName('node');
  await createNamespace(plane, namespace, { ...labels, 'envoy-injector.io/inject': 'enabled', 'pod-security.kubernetes.io/enforce': 'privileged' });
  // The OpenShift fork's token volume needs this ConfigMap; its controller publishes it into every namespace.
  if (version !== '1.28') {
    await eventually(`ConfigMap ${namespace}/openshift-service-ca.crt (service-ca-certificate-publisher-controller)`, () =>
      core.readNamespacedConfigMap({ name: 'openshift-service-ca.crt', namespace }).then(() => true));
  }
  const readPod = (name: string): Promise<V1Pod> => core.readNamespacedPod({ name, namespace });
  return {
    version,
    plane,
    core,
    recorder,
    namespace,
    release,
    createPods: async (pods) => {
      await Promise.all(pods.map((pod) => core.createNamespacedPod({ namespace, body: { ...pod, spec: { ...pod.spec, nodeName: NODE_NAME, containers: pod.spec?.containers ?? [] } } })));
    },
    readPod,
    waitPod: async (name, ready, what, timeoutMs = 60_000) => {
      let last: V1Pod | undefined;
      try {
        return await eventually(what, async () => {
          last = await readPod(name);
          return ready(last) ? last : undefined;
        }, timeoutMs, 200);
      } catch (error) {
        throw new Error(`${(error as Error).message}; Pod ${name} is ${describePod(last)}`);
      }
    },
  };
}

/** The app container (images/app.py) with ARGS. */
export function appContainer(args: readonly string[] = ['--port', '8080'], extra: Partial<V1Container> = {}): V1Container {
  return { name: 'app', image: APP_IMAGE, imagePullPolicy: 'IfNotPresent', args: [...args], ...extra };
}

/** A Pod of the app, on the node; ANNOTATIONS ask the injector for what the scenario needs. */
export function appPod(name: string, annotations: Record<string, string> = {}, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations },
    spec: { nodeName: NODE_NAME, terminationGracePeriodSeconds: 15, containers: [appContainer()], ...spec },
  };
}

/** Every container (init ones too) of POD by name. */
export function statuses(pod: V1Pod): Map<string, V1ContainerStatus> {
  return new Map([...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])].map((status) => [status.name, status]));
}

export function running(...names: string[]): (pod: V1Pod) => boolean {
  return (pod) => names.every((name) => statuses(pod).get(name)?.state?.running !== undefined);
}

export function terminated(...names: string[]): (pod: V1Pod) => boolean {
  return (pod) => names.every((name) => statuses(pod).get(name)?.state?.terminated !== undefined);
}

export function podReady(pod: V1Pod): boolean {
  return pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') === true;
}

/** When CONTAINER of POD started, as the kubelet reports it (seconds since the epoch; the API gives whole seconds). */
export function startedAt(pod: V1Pod, container: string): number {
  const state = statuses(pod).get(container)?.state;
  const at = state?.running?.startedAt ?? state?.terminated?.startedAt;
  if (at === undefined) throw new Error(`container ${container} of Pod ${pod.metadata?.name} has not started: ${JSON.stringify(state)}`);
  return new Date(at).getTime() / 1000;
}

export function finishedAt(pod: V1Pod, container: string): number {
  const at = statuses(pod).get(container)?.state?.terminated?.finishedAt;
  if (at === undefined) throw new Error(`container ${container} of Pod ${pod.metadata?.name} has not finished`);
  return new Date(at).getTime() / 1000;
}

/** The phase and every container's state in a line, for error messages. */
export function describePod(pod: V1Pod | undefined): string {
  if (pod === undefined) return 'not read';
  const states = [...statuses(pod).values()].map((status) => `${status.name}: ${Object.keys(status.state ?? {}).join('')}${status.state?.waiting?.reason === undefined ? '' : ` (${status.state.waiting.reason}: ${status.state.waiting.message ?? ''})`}${status.state?.terminated === undefined ? '' : ` (exit ${status.state.terminated.exitCode})`} restarts ${status.restartCount}`);
  return `${pod.status?.phase ?? 'unknown'}; ${states.join('; ') || 'no container status'}`;
}
