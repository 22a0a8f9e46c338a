/**
 * A constant MutatingAdmissionPolicy: one that adds to the seed's Pod, as
 * CEL literals, exactly what our policy mode added to it, matched as ours
 * is (our matchConstraints, IfNeeded), with a `not-injected` condition of
 * its own: ours has none since it reorders init containers on reinvocation
 * (issue 34), and a constant must not add its literals twice. The price of any policy
 * injecting this sidecar, against which ours is judged (issue 39): used by
 * the `apiserver` part's fifth path (cluster-paths.ts) and by the
 * policy-cost.ts diagnostic.
 */
import type { Agent } from 'node:https';
import { Annotations, BUNDLED_TEMPLATE_DATA, InjectedLabel, jsonPointer, parseTemplateData, type JsonObject, type JsonValue } from '../src/injection/index.js';
import { celValue } from '../src/policy/cel-literal.js';
import { compilePolicy } from '../src/policy/compile-policy.js';
import { eventually } from '../test/e2e/cluster.js';
import { apiCall, type ApiAccess } from './pod-load.js';

/** A Pod as the API server stored it after a policy injected it. */
export interface InjectedPod {
  readonly metadata: { readonly labels?: Record<string, string>; readonly annotations: Record<string, string> };
  readonly spec: { readonly containers: readonly JsonObject[]; readonly initContainers?: readonly JsonObject[]; readonly volumes: readonly JsonObject[] };
}

/** Whether POD holds the containers and init containers STORED holds, by name and in order: a policy injected it alike. */
export function injectedAlike(pod: InjectedPod, stored: InjectedPod): boolean {
  const names = (list: readonly JsonObject[] | undefined): string => JSON.stringify((list ?? []).map((entry) => entry['name']));
  return names(pod.spec.containers) === names(stored.spec.containers) && names(pod.spec.initContainers) === names(stored.spec.initContainers);
}

export type NamedPolicy = JsonObject & { metadata: { name: string }; spec: { matchConstraints: JsonObject; matchConditions: JsonObject[] } };

/** Our policy (compilePolicy, as the policy controller applies it) for the bundled template, named NAME. */
export function compiledOurs(name: string): NamedPolicy {
  return compilePolicy(parseTemplateData(BUNDLED_TEMPLATE_DATA), { name }).policy as NamedPolicy;
}

/** POST PATH as admin; the answer's JSON, or an error naming the status. */
export async function postAsAdmin(access: ApiAccess, agent: Agent, path: string, body: unknown): Promise<JsonObject> {
  const answer = await apiCall(access, agent, 'POST', path, body);
  if (answer.status >= 300) throw new Error(`POST ${path}: ${answer.status}: ${answer.body.slice(0, 300)}`);
  return JSON.parse(answer.body) as JsonObject;
}

/** Creates POLICY and a binding of it to NAMESPACE alone, in the API group GROUP (`admissionregistration.k8s.io/<version>`). */
export async function bindPolicy(access: ApiAccess, agent: Agent, group: string, policy: JsonObject & { metadata: { name: string } }, namespace: string): Promise<void> {
  await postAsAdmin(access, agent, `/apis/${group}/mutatingadmissionpolicies`, { ...policy, apiVersion: group });
  await postAsAdmin(access, agent, `/apis/${group}/mutatingadmissionpolicybindings`, {
    apiVersion: group,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: policy.metadata.name },
    spec: { policyName: policy.metadata.name, matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
  });
}

/**
 * What a policy added to SEED (which has no init containers, volumes or annotations), from
 * STORED: the Pod of the injected shape less what the API server adds itself
 * (the token mount and volume, defaults), and the JSONPatch operations that
 * add it.
 */
export function injectedShape(stored: InjectedPod, seed: Record<string, unknown>): { shape: Record<string, unknown>; operations: { path: string; value: unknown }[] } {
  const containers = withoutTokenMounts(stored.spec.containers);
  // Native sidecars (the chart's default where every kubelet is 1.29+) are init containers.
  const initContainers = withoutTokenMounts(stored.spec.initContainers ?? []);
  const volumes = stored.spec.volumes.filter((volume) => !String(volume['name']).startsWith('kube-api-access-'));
  const { annotations } = stored.metadata;
  const shape = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'myapp-', labels: stored.metadata.labels, annotations },
    spec: { ...(initContainers.length === 0 ? {} : { initContainers }), containers, volumes },
  };
  const seedContainers = new Set((seed as { spec: { containers: { name: string }[] } }).spec.containers.map((container) => container.name));
  const operations = [
    ...(initContainers.length === 0 ? [] : [{ path: '/spec/initContainers', value: initContainers }]),
    ...containers.filter((container) => !seedContainers.has(String(container['name']))).map((value) => ({ path: '/spec/containers/-', value })),
    ...volumes.map((value) => ({ path: '/spec/volumes/-', value })),
    { path: '/metadata/annotations', value: annotations },
    // The seed's Pod has labels: add ours to them, as our policy does.
    { path: jsonPointer('metadata', 'labels', InjectedLabel.key), value: InjectedLabel.value },
  ];
  return { shape, operations };
}

/** The constant policy NAME: OPERATIONS as CEL literals, matched as OURS is. */
export function constantPolicy(name: string, ours: NamedPolicy, operations: readonly { path: string; value: unknown }[]): JsonObject & { metadata: { name: string } } {
  const patch = operations.map(({ path, value }) => `JSONPatch{op: "add", path: ${JSON.stringify(path)}, value: ${celValue(value as JsonValue)}}`).join(', ');
  return {
    kind: 'MutatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      reinvocationPolicy: 'IfNeeded',
      // Ours, so the two are matched alike.
      matchConstraints: ours.spec.matchConstraints,
      matchConditions: [{ name: 'not-injected', expression: `!has(object.metadata.annotations) || !(${JSON.stringify(Annotations.status)} in object.metadata.annotations)` }],
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: `[${patch}]` } }],
    },
  };
}

/** A dry-run CREATE of BODY in NAMESPACE: the Pod as the API server would store it. */
export async function dryRunPod(access: ApiAccess, agent: Agent, namespace: string, body: Record<string, unknown>): Promise<InjectedPod> {
  return (await postAsAdmin(access, agent, `/api/v1/namespaces/${namespace}/pods?dryRun=All`, body)) as unknown as InjectedPod;
}

/**
 * Binds to CONSTANT, in the API group GROUP, the constant policy NAME of what
 * our policy stored for SEED in OURS (a dry run, once it injects there);
 * resolves with that Pod once the constant policy injects a Pod alike.
 */
export async function bindConstantLike(access: ApiAccess, agent: Agent, group: string, namespaces: { readonly ours: string; readonly constant: string }, name: string, seed: Record<string, unknown>): Promise<InjectedPod> {
  const stored = await eventually('a Pod injected by our policy', async () => {
    const pod = await dryRunPod(access, agent, namespaces.ours, seed);
    return pod.metadata.annotations?.[Annotations.status] === undefined ? undefined : pod;
  }, 60_000, 200);
  await bindPolicy(access, agent, group, constantPolicy(name, compiledOurs(name), injectedShape(stored, seed).operations), namespaces.constant);
  await eventually('a Pod injected by the constant policy', async () => (injectedAlike(await dryRunPod(access, agent, namespaces.constant, seed), stored) ? true : undefined), 60_000, 200);
  return stored;
}

/** The containers without the ServiceAccount token mount and what the API server defaults (it would add them again). */
function withoutTokenMounts(containers: readonly JsonObject[]): JsonObject[] {
  return containers.map((container) => {
    const { terminationMessagePath: _path, terminationMessagePolicy: _policy, imagePullPolicy: _pull, ...rest } = container;
    const mounts = (container['volumeMounts'] as { name: string }[] | undefined)?.filter((mount) => !mount.name.startsWith('kube-api-access-'));
    return { ...rest, ...(mounts === undefined ? {} : { volumeMounts: mounts }) } as JsonObject;
  });
}
