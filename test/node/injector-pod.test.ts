import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, PolicyV1Api, type CoreV1Event, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, uniqueName, type Release } from '../e2e/cluster.js';
import { serviceAddress } from '../e2e/injector-process.js';
import { importArchive } from './containerd.js';
import { cordon, startDrain } from './drain.js';
import { buildImage } from './images.js';
import { injectorRecipe } from './injector-image.js';
import { NODE_IP, NODE_NAME } from './network.js';
import { appPod, broken, describePod, forEachNode, podReady, running, statuses } from './node-suite.js';
import { startRelay, type Relay } from './relay.js';
import { startScheduler, type Scheduler } from './scheduler.js';

/**
 * The injector itself on the node (issue 36, last part), installed as the
 * README says (issue 42): the chart's own Deployment, unchanged but for its
 * environment, runs as two Pods of an image assembled with the Dockerfile's
 * runtime layout (injector-image.ts), makes its certificate, patches its
 * webhook's caBundle, passes its probes and injects Pods that then run.
 *
 * What a cluster would give it and this node has not: kube-scheduler and
 * kube-proxy. scheduler.ts binds the release's Pending Pods while the node is
 * schedulable. Two relays (relay.ts) do kube-proxy's part: the node's address
 * to the API server (the Pod's KUBERNETES_SERVICE_HOST/PORT, set through the
 * chart's extraEnv: the kubelet's own values name the kubernetes Service's
 * loopback ClusterIP, which in a Pod is the Pod's own loopback), and the
 * webhook Service's ClusterIP to a Ready injector Pod (none Ready: the
 * connection is refused), so the API server calls it through the chart's own
 * MutatingWebhookConfiguration and checks the certificate the injector made
 * for `<service>.<namespace>.svc`. A `url` to a Pod's IP cannot be used:
 * that certificate names the Service, not the Pod's address.
 *
 * Issue 42 here: the README's order (helm install, `rollout status`, then
 * label and restart) gives the workload no FailedCreate; each injector
 * replica starts slowly (NODE_OPTIONS makes its process wait SLOW_START_SECONDS
 * before it loads, as on a busy node: the preStop hook's `node -e` does not
 * wait) and the startupProbe spares it the liveness probe's failures; and the
 * drain of this one node finishes: helm install counted one Node and made no
 * budget (with one, the drain would wait for ever: the first replica's
 * replacement stays Pending on the cordoned node).
 *
 * NODE_TIER_BREAK: install-order (label and restart right after helm install,
 * without the wait), startup-probe (the Deployment's startupProbe removed),
 * single-node-drain (the budget kept: podDisruptionBudget.skipOnSingleNode false).
 */
const SLOW_START_SECONDS = 15;
const SLOW_START = `--import=data:text/javascript,if(process.argv[1])Atomics.wait(new%20Int32Array(new%20SharedArrayBuffer(4)),0,0,${SLOW_START_SECONDS * 1000})`;
// A rollout of two slow replicas, one after the other at worst; the bound holds on a machine five times slower.
const ROLLOUT_MS = 240_000;
// The drain's --timeout: evictions retried every 5 s, then the injector's preStop wait and shutdown (well under its grace period).
const DRAIN_MS = 120_000;
const WORKLOAD = 'my-app';

forEachNode('the injector\'s own Deployment on the node', (suite, version) => {
  let release: Release | undefined;
  const relays: Relay[] = [];
  let scheduler: Scheduler | undefined;
  let selector = '';
  const workloadNamespace = uniqueName('my-namespace');
  const apps = (): AppsV1Api => suite().plane.kubeConfig.makeApiClient(AppsV1Api);
  const injectorPods = async (): Promise<V1Pod[]> => (await suite().core.listNamespacedPod({ namespace: release?.namespace ?? '', labelSelector: selector })).items;

  /** `kubectl -n my-namespace rollout restart deployment/my-app`, after the namespace is labeled for injection. */
  const labelAndRestart = async (): Promise<void> => {
    const { core } = suite();
    await core.patchNamespace({ name: workloadNamespace, body: [{ op: 'add', path: '/metadata/labels/envoy-injector.io~1inject', value: 'enabled' }] });
    await apps().patchNamespacedDeployment({
      name: WORKLOAD,
      namespace: workloadNamespace,
      body: [{ op: 'add', path: '/spec/template/metadata/annotations', value: { 'kubectl.kubernetes.io/restartedAt': new Date().toISOString() } }],
    });
  };

  before(async () => {
    const { plane, core } = suite();
    await importArchive((await buildImage(await injectorRecipe())).archive);
    const apiPort = Number(new URL(plane.server).port);
    relays.push(await startRelay({ host: NODE_IP, port: apiPort }, () => ({ host: '127.0.0.1', port: apiPort })));
    // A workload that runs before injection is turned on (its Pods name the node: only the injector's need the scheduler).
    await createNamespace(plane, workloadNamespace, { 'pod-security.kubernetes.io/enforce': 'privileged' });
    const template = appPod(WORKLOAD, {}, { automountServiceAccountToken: false });
    await apps().createNamespacedDeployment({
      namespace: workloadNamespace,
      body: {
        metadata: { name: WORKLOAD },
        spec: { replicas: 1, selector: { matchLabels: { app: WORKLOAD } }, template: { metadata: { labels: { app: WORKLOAD } }, spec: template.spec ?? { containers: [] } } },
      },
    });

    // helm install, as the README's commands do (the chart's defaults: two replicas, the budget).
    release = await helmInstall(plane, { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') }, {
      extraEnv: [
        { name: 'KUBERNETES_SERVICE_HOST', value: NODE_IP },
        { name: 'KUBERNETES_SERVICE_PORT', value: String(apiPort) },
        { name: 'NODE_OPTIONS', value: SLOW_START },
      ],
      ...(broken() === 'single-node-drain' ? { podDisruptionBudget: { skipOnSingleNode: false } } : {}),
    });
    const namespace = release.namespace;
    const deployment = release.manifests.find((manifest) => manifest.kind === 'Deployment');
    const matchLabels = (deployment?.['spec'] as { selector: { matchLabels: Record<string, string> } } | undefined)?.selector.matchLabels ?? {};
    selector = Object.entries(matchLabels).map(([key, value]) => `${key}=${value}`).join(',');
    const service = await serviceAddress(plane, release);
    // kube-proxy: the Service's ClusterIP to a Ready injector Pod, read at each connection.
    relays.push(await startRelay({ host: service.clusterIP, port: service.port }, async () => {
      const ready = (await injectorPods()).find((pod) => podReady(pod) && pod.metadata?.deletionTimestamp === undefined);
      const port = ready?.spec?.containers[0]?.ports?.find((entry) => entry.name === 'https')?.containerPort ?? 8443;
      return ready?.status?.podIP === undefined ? undefined : { host: ready.status.podIP, port };
    }));
    if (broken() === 'startup-probe') {
      await apps().patchNamespacedDeployment({ name: deployment?.metadata.name ?? '', namespace, body: [{ op: 'remove', path: '/spec/template/spec/containers/0/startupProbe' }] });
    }
    if (broken() === 'install-order') await labelAndRestart();
    scheduler = startScheduler(core, namespace, NODE_NAME);
    // kubectl -n <namespace> rollout status deployment/<name>
    await rolloutStatus(apps(), namespace, deployment?.metadata.name ?? '', ROLLOUT_MS).catch(async (error: Error) => {
      throw new Error(`${error.message}; its Pods: ${(await injectorPods()).map((pod) => `${pod.metadata?.name}: ${describePod(pod)}`).join(' | ')}`);
    });
    if (broken() !== 'install-order') await labelAndRestart();
    await rolloutStatus(apps(), workloadNamespace, WORKLOAD, ROLLOUT_MS);
  });
  after(async () => {
    const { plane, core } = suite();
    await scheduler?.stop();
    await cordon(core, NODE_NAME, false).catch(() => undefined);
    for (const relay of relays) await relay.close();
    if (release !== undefined) await helmUninstall(plane, release).catch(() => undefined);
    await deleteNamespaces(plane, [workloadNamespace]);
  });

  it(`runs as the chart deploys it, makes its certificate and injects a Pod that then runs (${version})`, async () => {
    const { plane, core, namespace, createPods, waitPod } = suite();
    assert.ok(release !== undefined);
    const pods = await injectorPods();
    assert.equal(pods.filter(podReady).length, 2, `two Ready replicas: ${pods.map(describePod).join(' | ')}`);
    for (const injectorPod of pods) {
      const container = injectorPod.spec?.containers[0];
      assert.equal(container?.image, 'envoy-injector:0.1.0');
      assert.equal(container?.securityContext?.readOnlyRootFilesystem, true);
      assert.equal(container?.securityContext?.runAsNonRoot, true);
      assert.equal(statuses(injectorPod).get('envoy-injector')?.restartCount, 0, describePod(injectorPod));
    }
    // Cert mode auto: the injector wrote its CA into the chart's webhook configuration.
    const webhookName = release.manifests.find((manifest) => manifest.kind === 'MutatingWebhookConfiguration')?.metadata.name ?? '';
    const admission = plane.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    await eventually('the caBundle patched by the injector Pod', async () => {
      const config = await admission.readMutatingWebhookConfiguration({ name: webhookName });
      return config.webhooks?.every((webhook) => (webhook.clientConfig.caBundle ?? '') !== '') === true ? true : undefined;
    }, 30_000);
    await eventually('a Pod injected by the injector Pod', async () => {
      const pod = await core.createNamespacedPod({ namespace, body: appPod('probe'), dryRun: 'All' });
      return pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined ? true : undefined;
    }, 30_000, 250);
    await createPods([appPod('injected')]);
    const pod = await waitPod('injected', running('envoy', 'app'), 'the injected Pod running with its proxy');
    assert.ok(pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined);
    assert.equal(pod.spec?.initContainers?.find((entry) => entry.name === 'envoy')?.restartPolicy, 'Always', 'a native sidecar: the injector Pod read this node\'s kubelet version');
  });

  it(`issue 42: the README's install order (helm install, rollout status, then label and restart) gives the workload no FailedCreate (${version})`, async (t: TestContext) => {
    const { core } = suite();
    const pods = (await core.listNamespacedPod({ namespace: workloadNamespace, labelSelector: `app=${WORKLOAD}` })).items.filter((pod) => pod.metadata?.deletionTimestamp === undefined);
    assert.ok(pods.length > 0 && pods.every((pod) => pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined), `the restarted workload's Pods injected: ${pods.map((pod) => pod.metadata?.name).join(', ')}`);
    const failed = (await events(core, workloadNamespace)).filter((event) => event.reason === 'FailedCreate');
    t.diagnostic(`FailedCreate Events of ${WORKLOAD}: ${failed.reduce((sum, event) => sum + (event.count ?? 1), 0)}`);
    assert.deepEqual(failed.map((event) => `${event.involvedObject.kind}/${event.involvedObject.name}: ${event.message ?? ''}`), [], 'no FailedCreate Event');
  });

  it(`issue 42: the startupProbe spares a slow-starting replica the liveness probe's failures (${version})`, async (t: TestContext) => {
    const { core } = suite();
    const seen = await events(core, release?.namespace ?? '');
    const of = (prefix: string): CoreV1Event[] => seen.filter((event) => event.reason === 'Unhealthy' && (event.message ?? '').startsWith(prefix));
    // The start really was slow: the startupProbe failed first (its first check comes 2 s in, the process listens after 15).
    t.diagnostic(`start-up checks failed: ${of('Startup probe failed').reduce((sum, event) => sum + (event.count ?? 1), 0)}`);
    // Probed before it listens, the liveness check is refused; a check that timed out later (a loaded machine stalling
    // the process past timeoutSeconds) is not what the startupProbe is for, and is only reported.
    const liveness = of('Liveness probe failed').map((event) => `${event.involvedObject.name}: ${event.message ?? ''}`);
    t.diagnostic(`liveness failures: ${liveness.length === 0 ? 'none' : liveness.join(' | ')}`);
    assert.deepEqual(liveness.filter((message) => /connection refused/.test(message)), [], 'no "Liveness probe failed ... connection refused" Event');
    for (const pod of await injectorPods()) assert.equal(statuses(pod).get('envoy-injector')?.restartCount, 0, describePod(pod));
    assert.ok(of('Startup probe failed').length > 0, 'the startupProbe saw the slow start');
  });

  it(`issue 42: helm install counted one Node and made no budget, and the drain of this node finishes (${version})`, async (t: TestContext) => {
    const { plane, core } = suite();
    assert.ok(release !== undefined);
    const budgets = (await plane.kubeConfig.makeApiClient(PolicyV1Api).listNamespacedPodDisruptionBudget({ namespace: release.namespace })).items;
    t.diagnostic(`budgets in ${release.namespace}: ${budgets.length}`);
    const before = (await injectorPods()).map((pod) => pod.metadata?.name ?? '');
    assert.equal(before.length, 2);
    const drain = await startDrain(core, NODE_NAME, DRAIN_MS);
    await drain.done;
    assert.equal((await injectorPods()).filter((pod) => before.includes(pod.metadata?.name ?? '')).length, 0, 'both replicas evicted');
    assert.deepEqual(budgets.map((budget) => budget.metadata?.name), [], 'no PodDisruptionBudget on a one-Node cluster');
  });
}, { injector: 'none' });

/** `kubectl rollout status deployment/NAME`: the latest generation observed, every replica updated and available, no old one left. */
async function rolloutStatus(apps: AppsV1Api, namespace: string, name: string, timeoutMs: number): Promise<void> {
  await eventually(`the rollout of Deployment ${namespace}/${name}`, async () => {
    const { metadata, spec, status } = await apps.readNamespacedDeployment({ name, namespace });
    const wanted = spec?.replicas ?? 1;
    const done = (status?.observedGeneration ?? 0) >= (metadata?.generation ?? 1) && status?.updatedReplicas === wanted && status.replicas === wanted && status.availableReplicas === wanted;
    return done ? true : undefined;
  }, timeoutMs, 500);
}

/** The Events of NAMESPACE. */
async function events(core: CoreV1Api, namespace: string): Promise<CoreV1Event[]> {
  return (await core.listNamespacedEvent({ namespace })).items;
}
