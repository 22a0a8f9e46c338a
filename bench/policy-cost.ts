/**
 * A diagnostic, not part of `npm run bench`: what a MutatingAdmissionPolicy
 * costs the API server per Pod, to tell the price of any policy from the part
 * that is ours (bench/FINDINGS.md, issue 27). One real kube-apiserver
 * (with its controller manager), one namespace per case, Pods created one at a
 * time in alternating rounds:
 *
 * - none: the seed's Pod, no policy binds the namespace;
 * - injected shape: the Pod as our policy stores it (less the token mount the
 *   ServiceAccount plugin adds), created as such: the price of its size alone;
 * - constant policy: the seed's Pod, a policy whose JSONPatch adds that very
 *   content as CEL literals (our matchConstraints, with the objectSelector on
 *   our injected label, our `not-injected` condition and IfNeeded, as ours):
 *   the price of any policy injecting this sidecar;
 * - ours: the seed's Pod, our compiled policy (compilePolicy, as the policy
 *   controller applies it) bound to its namespace.
 *
 *   KUBE_ASSETS=<folder> node --import tsx bench/policy-cost.ts [--kube-version 1.34|1.36] [--pods N] [--rounds N]
 */
import { Agent } from 'node:https';
import { parseArgs } from 'node:util';
import { BUNDLED_TEMPLATE_DATA, InjectedLabel, jsonPointer, parseTemplateData, type JsonObject, type JsonValue } from '../src/injection/index.js';
import { celValue } from '../src/policy/cel-literal.js';
import { compilePolicy } from '../src/policy/compile-policy.js';
import { createNamespace, eventually } from '../test/e2e/cluster.js';
import { servedPolicyApiVersion, startControlPlane } from '../test/e2e/control-plane.js';
import { missingAssets } from '../test/e2e/kube-binaries.js';
import { fmt, table } from './format.js';
import { apiCall, createPods, percentile, seedPodBody } from './pod-load.js';
import { readCpuSeconds } from './processes.js';

const { values } = parseArgs({ options: { 'kube-version': { type: 'string', default: '1.34' }, pods: { type: 'string', default: '600' }, rounds: { type: 'string', default: '6' } } });
const version = values['kube-version'] === '1.36' ? '1.36' : '1.34';
const [podsPerCase, rounds] = [Number(values.pods), Number(values.rounds)];
const missing = missingAssets();
if (missing !== undefined) {
  process.stderr.write(`${missing}\n`);
  process.exit(2);
}

const CASES = ['none', 'injected shape', 'constant policy', 'ours'] as const;
type Case = (typeof CASES)[number];
const NAMESPACES: Record<Case, string> = { none: 'cost-none', 'injected shape': 'cost-shape', 'constant policy': 'cost-constant', ours: 'cost-ours' };

const plane = await startControlPlane(version, { controllerManagerArgs: ['--kube-api-qps=2000', '--kube-api-burst=2000'] });
const agent = new Agent({ keepAlive: true, maxSockets: 4 });
try {
  const group = `admissionregistration.k8s.io/${servedPolicyApiVersion(version) ?? 'v1'}`;
  const post = async (path: string, body: unknown): Promise<JsonObject> => {
    const answer = await apiCall(plane, agent, 'POST', path, body);
    if (answer.status >= 300) throw new Error(`POST ${path}: ${answer.status}: ${answer.body.slice(0, 300)}`);
    return JSON.parse(answer.body) as JsonObject;
  };
  const bind = (policy: JsonObject & { metadata: { name: string } }, namespace: string): Promise<unknown> =>
    post(`/apis/${group}/mutatingadmissionpolicies`, { ...policy, apiVersion: group }).then(() =>
      post(`/apis/${group}/mutatingadmissionpolicybindings`, {
        apiVersion: group,
        kind: 'MutatingAdmissionPolicyBinding',
        metadata: { name: policy.metadata.name },
        spec: { policyName: policy.metadata.name, matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
      }),
    );
  // The injected namespace label on every case: only the bindings differ.
  for (const name of Object.values(NAMESPACES)) await createNamespace(plane, name, { 'envoy-injector.io/inject': 'enabled' });

  const seed = seedPodBody();
  const ours = compilePolicy(parseTemplateData(BUNDLED_TEMPLATE_DATA), { name: 'cost-ours' }).policy as JsonObject & {
    metadata: { name: string };
    spec: { matchConstraints: JsonObject; matchConditions: JsonObject[] };
  };
  await bind(ours, NAMESPACES.ours);
  const stored = await eventually('a Pod injected by our policy', async () => {
    const pod = (await post(`/api/v1/namespaces/${NAMESPACES.ours}/pods?dryRun=All`, seed)) as { spec: { containers: JsonObject[] } };
    return pod.spec.containers.length > 1 ? (pod as unknown as InjectedPod) : undefined;
  }, 60_000, 200);
  // The stored Pod less what the API server adds itself (the token mount and volume, defaults).
  const containers = withoutTokenMounts(stored.spec.containers);
  const volumes = stored.spec.volumes.filter((volume) => !String(volume['name']).startsWith('kube-api-access-'));
  const { annotations } = stored.metadata;
  const shape = { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'myapp-', labels: stored.metadata.labels, annotations }, spec: { containers, volumes } };
  // What our policy added to the seed's Pod (which has no volumes and no annotations).
  const seedContainers = new Set((seed as { spec: { containers: { name: string }[] } }).spec.containers.map((container) => container.name));
  const operations = [
    ...containers.filter((container) => !seedContainers.has(String(container['name']))).map((value) => ({ path: '/spec/containers/-', value })),
    ...volumes.map((value) => ({ path: '/spec/volumes/-', value })),
    { path: '/metadata/annotations', value: annotations },
    // The seed's Pod has labels: add ours to them, as our policy does.
    { path: jsonPointer('metadata', 'labels', InjectedLabel.key), value: InjectedLabel.value },
  ];
  await bind(
    {
      kind: 'MutatingAdmissionPolicy',
      metadata: { name: 'cost-constant' },
      spec: {
        failurePolicy: 'Fail',
        reinvocationPolicy: 'IfNeeded',
        // Ours, so the two are matched alike (the objectSelector on the injected label included).
        matchConstraints: ours.spec.matchConstraints,
        matchConditions: ours.spec.matchConditions.filter((condition) => condition['name'] === 'not-injected'),
        mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: `[${operations.map(({ path, value }) => `JSONPatch{op: "add", path: ${JSON.stringify(path)}, value: ${celValue(value as JsonValue)}}`).join(', ')}]` } }],
      },
    },
    NAMESPACES['constant policy'],
  );
  const bodies: Record<Case, Record<string, unknown>> = { none: seed, 'injected shape': shape, 'constant policy': seed, ours: seed };
  await eventually('a Pod injected by the constant policy', async () => {
    const pod = (await post(`/api/v1/namespaces/${NAMESPACES['constant policy']}/pods?dryRun=All`, seed)) as { spec: { containers: unknown[] } };
    return pod.spec.containers.length === stored.spec.containers.length ? true : undefined;
  }, 60_000, 200);

  const apiServerPid = plane.processes.find((managed) => managed.name === 'kube-apiserver')?.child.pid;
  if (apiServerPid === undefined) throw new Error('no kube-apiserver process');
  const latencies = Object.fromEntries(CASES.map((name) => [name, [] as number[]])) as Record<Case, number[]>;
  const cpuSeconds = Object.fromEntries(CASES.map((name) => [name, 0])) as Record<Case, number>;
  for (const name of CASES) await createPods(plane, NAMESPACES[name], bodies[name], 30, 1);
  const perRound = Math.max(1, Math.round(podsPerCase / rounds));
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? CASES : [...CASES].reverse()) {
      const before = readCpuSeconds(apiServerPid);
      const run = await createPods(plane, NAMESPACES[name], bodies[name], perRound, 1);
      if (run.refused.length > 0) throw new Error(`${name}: ${run.refused[0]}`);
      cpuSeconds[name] += readCpuSeconds(apiServerPid) - before;
      latencies[name].push(...run.latenciesMs);
    }
  }
  const p50 = (name: Case): number => percentile([...latencies[name]].sort((a, b) => a - b), 50);
  const cpuMs = (name: Case): number => (1000 * cpuSeconds[name]) / latencies[name].length;
  process.stdout.write(`kube-apiserver ${version}, ${perRound * rounds} Pods per case in ${rounds} alternating rounds, one client:\n`);
  process.stdout.write(
    `${table([
      ['case', 'p50 ms', 'p50 / none', 'kube-apiserver CPU ms per Pod', 'vs none'],
      ...CASES.map((name) => [name, fmt.ms(p50(name)), fmt.ratio(p50(name) / p50('none')), cpuMs(name).toFixed(2), `+${(cpuMs(name) - cpuMs('none')).toFixed(2)}`]),
    ])}\n`,
  );
} finally {
  agent.destroy();
  await plane.stop();
}

interface InjectedPod {
  readonly metadata: { readonly labels?: Record<string, string>; readonly annotations: Record<string, string> };
  readonly spec: { readonly containers: readonly JsonObject[]; readonly volumes: readonly JsonObject[] };
}

/** The containers without the ServiceAccount token mount and what the API server defaults (it would add them again). */
function withoutTokenMounts(containers: readonly JsonObject[]): JsonObject[] {
  return containers.map((container) => {
    const { terminationMessagePath: _path, terminationMessagePolicy: _policy, imagePullPolicy: _pull, ...rest } = container;
    const mounts = (container['volumeMounts'] as { name: string }[] | undefined)?.filter((mount) => !mount.name.startsWith('kube-api-access-'));
    return { ...rest, ...(mounts === undefined ? {} : { volumeMounts: mounts }) } as JsonObject;
  });
}
