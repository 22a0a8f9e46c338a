/**
 * The five admission paths of the cluster figures, side by side in one real
 * API server (with its controller manager): a namespace each, and what acts
 * on it.
 *
 * - none: labeled `envoy-injector.io/inject=disabled`, excluded by every
 *   webhook and policy: no injection at all.
 * - floor: the floor webhook only (floor-webhook.ts), registered like the
 *   chart's (reinvocationPolicy IfNeeded) and reached like ours, through a
 *   Service of its own (its ClusterIP, where it listens); one webhook, a
 *   label namespaceSelector, no objectSelector and no matchConditions: those
 *   are our choices, counted as ours (bench/FINDINGS.md, issue 27).
 * - webhook: our injector as the chart installs and registers it (mode
 *   webhook, certificates auto), run as the chart's ServiceAccount and reached
 *   through the chart's Service (test/e2e/injector-process.ts).
 * - policy: the chart in mode policy, its controller applying the
 *   MutatingAdmissionPolicy.
 * - constant: a constant MutatingAdmissionPolicy adding what the policy
 *   path added to the same Pod (constant-policy.ts), bound to its namespace
 *   alone: what any policy injecting this sidecar costs (issue 39).
 *
 * Both releases exclude the other paths' namespaces (`excludedNamespaces`),
 * so each namespace sees its own path only.
 */
import { writeFileSync } from 'node:fs';
import { Agent } from 'node:https';
import { join } from 'node:path';
import { AdmissionregistrationV1Api, CoreV1Api } from '@kubernetes/client-node';
import { makeCa, makeServingCertificate } from '../src/tls/certificates.js';
import { createNamespace, eventually, helmInstall, sidecar } from '../test/e2e/cluster.js';
import { servedPolicyApiVersion, startControlPlane, type KubeVersion, type OwnedControlPlane } from '../test/e2e/control-plane.js';
import { startChartInjector, type ChartInjector } from '../test/e2e/injector-process.js';
import { startPolicyController, type PolicyController } from '../test/e2e/policy-controller-process.js';
import { bindConstantLike } from './constant-policy.js';
import { compileBenchScript, log, work } from './harness.js';
import { httpsRequest } from './https-client.js';
import { seedPodBody } from './pod-load.js';
import { startServer, type ServerProcess } from './processes.js';

export const PATHS = ['none', 'floor', 'webhook', 'policy', 'constant'] as const;
export type PathName = (typeof PATHS)[number];

export const PATH_DESCRIPTIONS: Record<PathName, string> = {
  none: 'no injection',
  floor: 'a no-work webhook answering our answer',
  webhook: 'envoy-injector (webhook, the chart\'s registration)',
  policy: 'envoy-injector (policy mode)',
  constant: 'a constant MutatingAdmissionPolicy applying our patch',
};

/** The webhooks each path's Pods reach, by the names the API server's metric uses. */
export const PATH_WEBHOOKS: Record<PathName, readonly string[]> = {
  none: [],
  floor: ['floor.bench.envoy-injector.io'],
  // The chart names a release's webhooks after its configuration (release bench in bench-system).
  webhook: ['enabled-namespaces', 'opted-in-pods', 'other-pods'].map((purpose) => `${purpose}.bench-envoy-injector-bench-system.envoy-injector.io`),
  policy: [],
  constant: [],
};

export interface BenchPaths {
  readonly plane: OwnedControlPlane;
  readonly namespaces: Record<PathName, string>;
  /** The Pod every path creates: the seed's (examples/myapp-pod.yaml), named by generateName. */
  readonly pod: Record<string, unknown>;
  readonly processes: { readonly injector: ChartInjector; readonly policy: PolicyController; readonly floor: ServerProcess };
  stop(): Promise<void>;
}

/** Starts the control plane and the five paths; every path injects (or not) a probe Pod before this resolves. */
export async function startBenchPaths(version: KubeVersion): Promise<BenchPaths> {
  // The controller manager's client is rate limited (20/s) by default: a Deployment's scale-up would measure that limit.
  const plane = await startControlPlane(version, { controllerManagerArgs: ['--kube-api-qps=2000', '--kube-api-burst=2000'] });
  const stops: (() => Promise<unknown>)[] = [() => plane.stop()];
  const stop = async (): Promise<void> => {
    for (const step of stops.reverse()) await step().catch(() => undefined);
  };
  try {
    const namespaces: Record<PathName, string> = { none: 'bench-none', floor: 'bench-floor', webhook: 'bench-webhook', policy: 'bench-policy', constant: 'bench-constant' };
    await Promise.all([
      createNamespace(plane, namespaces.none, { 'envoy-injector.io/inject': 'disabled' }),
      createNamespace(plane, namespaces.floor, { 'bench-path': 'floor' }),
      createNamespace(plane, namespaces.webhook, { 'envoy-injector.io/inject': 'enabled' }),
      createNamespace(plane, namespaces.policy, { 'envoy-injector.io/inject': 'enabled' }),
      // Our label, so that our matchConstraints, which the constant policy takes, match it.
      createNamespace(plane, namespaces.constant, { 'envoy-injector.io/inject': 'enabled' }),
    ]);
    const others = (path: PathName): string[] => PATHS.filter((other) => other !== path).map((other) => namespaces[other]);
    log('bench: installing the chart (webhook) and starting the injector');
    const webhookRelease = await helmInstall(plane, { name: 'bench', namespace: 'bench-system' }, { excludedNamespaces: others('webhook') });
    const injector = await startChartInjector(plane, webhookRelease);
    stops.push(() => injector.stop());
    log('bench: installing the chart (policy mode) and starting its controller');
    const policyRelease = await helmInstall(plane, { name: 'bench-policy', namespace: 'bench-policy-system' }, { mode: 'policy', excludedNamespaces: others('policy') });
    const policy = await startPolicyController(plane, policyRelease);
    stops.push(() => policy.stop());
    const pod = seedPodBody();
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    const dryRun = async (namespace: string) => core.createNamespacedPod({ namespace, body: pod as never, dryRun: 'All' });
    for (const path of ['webhook', 'policy'] as const) {
      await eventually(`a Pod injected on the ${path} path`, async () => (sidecar(await dryRun(namespaces[path])) === 'none' ? undefined : true), 60_000, 200);
    }
    await bindConstantPolicy(plane, namespaces.policy, namespaces.constant);
    const floor = await startFloorWebhook(plane, injector, webhookRelease.namespace, await dryRun(namespaces.none), namespaces.webhook);
    stops.push(() => floor.stop());
    await eventually('a Pod patched by the floor webhook', async () => (sidecar(await dryRun(namespaces.floor)) === 'none' ? undefined : true), 30_000, 200);
    if (sidecar(await dryRun(namespaces.none)) !== 'none') throw new Error('the none path injected a Pod');
    return { plane, namespaces, pod, processes: { injector, policy, floor }, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * The constant policy of the fifth path: what our policy mode stored for the
 * seed's Pod in POLICY (a dry run), as literals, bound to CONSTANT; resolves
 * once it injects a Pod there alike.
 */
async function bindConstantPolicy(plane: OwnedControlPlane, policy: string, constant: string): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 2 });
  try {
    const group = `admissionregistration.k8s.io/${servedPolicyApiVersion(plane.version) ?? 'v1'}`;
    await bindConstantLike(plane, agent, group, { ours: policy, constant }, 'bench-constant', seedPodBody());
  } finally {
    agent.destroy();
  }
}

/** The floor's Service: in its own path's namespace, on the chart's Service port. */
const FLOOR_SERVICE = { name: 'floor-webhook', namespace: 'bench-floor', port: 443 } as const;

/**
 * Asks our injector (as the API server would, through its Service's address,
 * its certificate checked for the Service's name) for its answer to PROBE,
 * an uninjected Pod as the API server hands it to webhooks, in the webhook
 * path's namespace; starts the floor webhook with that answer and registers it.
 */
async function startFloorWebhook(plane: OwnedControlPlane, injector: ChartInjector, releaseNamespace: string, probe: unknown, namespace: string): Promise<ServerProcess> {
  const core = plane.kubeConfig.makeApiClient(CoreV1Api);
  const secret = await core.readNamespacedSecret({ name: injector.env['CERT_SECRET'] ?? '', namespace: releaseNamespace });
  const ca = Buffer.from(secret.data?.['ca.crt'] ?? '', 'base64').toString('utf8');
  const service = injector.env['SERVICE_NAME'];
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'bench-floor', kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, namespace, operation: 'CREATE', userInfo: { username: 'admin' }, object: probe },
  };
  const answer = await postJson(`https://${injector.host}:${injector.port}/mutate`, review, ca, service === undefined ? undefined : `${service}.${releaseNamespace}.svc`);
  const volume = (probe as { spec?: { volumes?: { name: string }[] } }).spec?.volumes?.find((entry) => entry.name.startsWith('kube-api-access-'))?.name ?? 'kube-api-access-none';
  const answerFile = join(work, 'floor-webhook-answer.json');
  writeFileSync(answerFile, answer);
  // A Service of its own, as every in-cluster webhook has and as the chart's is reached: the API
  // server resolves it to its ClusterIP (loopback here, see control-plane.ts), where the floor listens.
  const floorService = await core.createNamespacedService({
    namespace: FLOOR_SERVICE.namespace,
    body: { metadata: { name: FLOOR_SERVICE.name }, spec: { type: 'ClusterIP', ports: [{ port: FLOOR_SERVICE.port, protocol: 'TCP' }] } },
  });
  const clusterIP = floorService.spec?.clusterIP;
  if (clusterIP === undefined) throw new Error(`Service ${FLOOR_SERVICE.namespace}/${FLOOR_SERVICE.name} has no clusterIP`);
  const floorCa = await makeCa({ commonName: 'bench-floor-ca', validDays: 1 });
  const serving = await makeServingCertificate({ ca: floorCa, hosts: [`${FLOOR_SERVICE.name}.${FLOOR_SERVICE.namespace}.svc`, clusterIP], validDays: 1 });
  const [certFile, keyFile] = [join(work, 'floor-webhook.crt'), join(work, 'floor-webhook.key')];
  writeFileSync(certFile, serving.cert);
  writeFileSync(keyFile, serving.key, { mode: 0o600 });
  const floor = await startServer([compileBenchScript('floor-webhook'), certFile, keyFile, answerFile, volume, clusterIP, String(FLOOR_SERVICE.port)], 'floor webhook serving https');
  await plane.kubeConfig.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: 'bench-floor' },
      webhooks: [
        {
          name: PATH_WEBHOOKS.floor[0] ?? '',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          reinvocationPolicy: 'IfNeeded',
          matchPolicy: 'Equivalent',
          failurePolicy: 'Fail',
          timeoutSeconds: 5,
          clientConfig: { service: { ...FLOOR_SERVICE, path: '/mutate' }, caBundle: Buffer.from(floorCa.cert).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
          namespaceSelector: { matchLabels: { 'bench-path': 'floor' } },
        },
      ],
    },
  });
  return floor;
}

async function postJson(url: string, body: unknown, ca: string, servername: string | undefined): Promise<string> {
  const answer = await httpsRequest(url, { method: 'POST', ca, servername, body: Buffer.from(JSON.stringify(body)) });
  const text = answer.body.toString('utf8');
  if (answer.status !== 200) throw new Error(`POST ${url}: ${answer.status}: ${text.slice(0, 300)}`);
  return text;
}
