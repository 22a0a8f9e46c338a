import { Readable } from 'node:stream';
import { runCli } from '../../src/cli.js';
import { applyPodPatch, injectPod, parseTemplateData, type TemplateSet } from '../../src/injection/index.js';
import type { FakeApiServer } from './fake-api-server.js';

/**
 * A small fleet in the fake API server, for `status`: the templates changed
 * (config v1 -> v2; lite unchanged) after some Pods were injected.
 */
export const INJECTOR_NAMESPACE = 'envoy-injector-system';
export const OLD_DATA = { config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.0.0"}]', lite: 'containers: [{name: tiny, image: "tiny:1"}]' };
export const LIVE_DATA = { config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v2.0.0"}]', lite: OLD_DATA.lite };
export const OLD = parseTemplateData(OLD_DATA);
export const LIVE = parseTemplateData(LIVE_DATA);

/** The annotations of a Pod the webhook injected with `templates`' template `name` (by the injector's own code). */
export function injectedAnnotations(templates: TemplateSet, name = 'config'): Record<string, string> {
  const template = templates.templates.get(name);
  if (template === undefined) throw new Error(`no template ${name}`);
  // A Pod injected with a named template names it (the other way, its namespace's label, is the caller's to set up).
  const received = { metadata: name === templates.defaultTemplate.name ? {} : { annotations: { 'envoy-injector.io/template': name } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } };
  const injected = applyPodPatch(received, injectPod(received, template, { nativeSidecar: false }).patch);
  return (injected['metadata'] as { annotations: Record<string, string> }).annotations;
}

const controller = (kind: string, name: string, apiVersion = 'apps/v1') => [{ apiVersion, kind, name, uid: `uid-${name}`, controller: true }];

export function addPod(
  fake: FakeApiServer,
  namespace: string,
  name: string,
  options: { owner?: { kind: string; name: string; apiVersion?: string }; annotations?: Record<string, string>; labels?: Record<string, string>; phase?: string; hostNetwork?: boolean; deleting?: boolean; copied?: boolean } = {},
): void {
  fake.apply('pods', {
    metadata: {
      name,
      namespace,
      labels: options.labels ?? {},
      annotations: options.annotations ?? {},
      ...(options.owner === undefined ? {} : { ownerReferences: controller(options.owner.kind, options.owner.name, options.owner.apiVersion) }),
      ...(options.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    },
    spec: { ...injectedContainers(options.annotations ?? {}, options.copied === true), ...(options.hostNetwork ? { hostNetwork: true } : {}) },
    status: { phase: options.phase ?? 'Running' },
  });
}

/** The app's container, and those the Pod's status names, as the webhook's patch added them (none when the status was COPIED). */
function injectedContainers(annotations: Record<string, string>, copied: boolean): { containers: { name: string; image: string }[]; initContainers?: { name: string; image: string }[] } {
  let named: { containers?: unknown; initContainers?: unknown } = {};
  try {
    named = copied ? {} : (JSON.parse(annotations['envoy-injector.io/status'] ?? '{}') as typeof named);
  } catch {
    named = {};
  }
  const entries = (list: unknown) => (Array.isArray(list) ? list.filter((name): name is string => typeof name === 'string').map((name) => ({ name, image: `${name}:1` })) : []);
  const init = entries(named.initContainers);
  return { containers: [{ name: 'app', image: 'app:1' }, ...entries(named.containers)], ...(init.length > 0 ? { initContainers: init } : {}) };
}

/**
 * shop (enabled): Deployment web (one current Pod, two outdated in an older
 * ReplicaSet, one never injected), StatefulSet db (outdated), DaemonSet agent
 * (current), Deployment api (current), CronJob report (outdated), bare Pod
 * debug (outdated), bare Pod fresh (not injected), and Pods that do not
 * count: opted out, hostNetwork, finished, terminating. quiet (disabled): a
 * Pod without the sidecar. legacy (no label): an annotated bare Pod, current.
 */
export function seedFleet(fake: FakeApiServer): void {
  fake.apply('namespaces', { metadata: { name: INJECTOR_NAMESPACE } });
  fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
  fake.apply('namespaces', { metadata: { name: 'quiet', labels: { 'envoy-injector.io/inject': 'disabled' } } });
  fake.apply('namespaces', { metadata: { name: 'legacy' } });
  fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: INJECTOR_NAMESPACE }, data: LIVE_DATA });
  const live = injectedAnnotations(LIVE);
  const old = injectedAnnotations(OLD);

  for (const [resource, name] of [['deployments', 'web'], ['deployments', 'api'], ['statefulsets', 'db'], ['daemonsets', 'agent']] as const) {
    fake.apply(resource, { metadata: { name, namespace: 'shop' }, spec: { template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } } });
  }
  fake.apply('cronjobs', { metadata: { name: 'report', namespace: 'shop' }, spec: { schedule: '0 * * * *', jobTemplate: { spec: { template: { spec: { containers: [] } } } } } });
  fake.apply('replicasets', { metadata: { name: 'web-7c9d', namespace: 'shop', ownerReferences: controller('Deployment', 'web') } });
  fake.apply('replicasets', { metadata: { name: 'web-5b8f', namespace: 'shop', ownerReferences: controller('Deployment', 'web') } });
  fake.apply('replicasets', { metadata: { name: 'api-6d4c', namespace: 'shop', ownerReferences: controller('Deployment', 'api') } });
  fake.apply('jobs', { metadata: { name: 'report-29010', namespace: 'shop', ownerReferences: controller('CronJob', 'report', 'batch/v1') } });

  addPod(fake, 'shop', 'web-7c9d-aaaaa', { owner: { kind: 'ReplicaSet', name: 'web-7c9d' }, annotations: live, labels: { app: 'web' } });
  addPod(fake, 'shop', 'web-7c9d-bbbbb', { owner: { kind: 'ReplicaSet', name: 'web-7c9d' }, labels: { app: 'web' } });
  addPod(fake, 'shop', 'web-5b8f-ccccc', { owner: { kind: 'ReplicaSet', name: 'web-5b8f' }, annotations: old, labels: { app: 'web' } });
  addPod(fake, 'shop', 'web-5b8f-ddddd', { owner: { kind: 'ReplicaSet', name: 'web-5b8f' }, annotations: old, labels: { app: 'web' } });
  addPod(fake, 'shop', 'api-6d4c-eeeee', { owner: { kind: 'ReplicaSet', name: 'api-6d4c' }, annotations: live, labels: { app: 'api' } });
  addPod(fake, 'shop', 'db-0', { owner: { kind: 'StatefulSet', name: 'db' }, annotations: old, labels: { app: 'db' } });
  addPod(fake, 'shop', 'db-1', { owner: { kind: 'StatefulSet', name: 'db' }, annotations: old, labels: { app: 'db' } });
  addPod(fake, 'shop', 'agent-x1', { owner: { kind: 'DaemonSet', name: 'agent' }, annotations: live, labels: { app: 'agent' } });
  addPod(fake, 'shop', 'report-29010-fffff', { owner: { kind: 'Job', name: 'report-29010', apiVersion: 'batch/v1' }, annotations: old, labels: { app: 'report' } });
  addPod(fake, 'shop', 'debug', { annotations: old });
  addPod(fake, 'shop', 'fresh');
  addPod(fake, 'shop', 'opted-out', { annotations: { 'envoy-injector.io/inject': 'false' } });
  addPod(fake, 'shop', 'node-probe', { hostNetwork: true });
  addPod(fake, 'shop', 'report-29000-done', { owner: { kind: 'Job', name: 'report-29000', apiVersion: 'batch/v1' }, annotations: old, phase: 'Succeeded' });
  addPod(fake, 'shop', 'web-5b8f-going', { owner: { kind: 'ReplicaSet', name: 'web-5b8f' }, annotations: old, deleting: true });
  addPod(fake, 'quiet', 'plain');
  addPod(fake, 'legacy', 'tool', { annotations: { ...injectedAnnotations(LIVE, 'lite'), 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': 'lite' } });
}

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `envoy-injector status ARGS` in process, with no environment but `env`; stdin a terminal when `tty` is set. */
export async function runStatusCli(args: readonly string[], options: { stdin?: string; tty?: boolean; env?: NodeJS.ProcessEnv } = {}): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  const stdin = Readable.from(options.stdin === undefined ? [] : [options.stdin]);
  if (options.tty) Object.assign(stdin, { isTTY: true });
  const io = { stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: (chunk: string) => (stderr += chunk) } };
  const code = await runCli(['status', ...args], io, options.env ?? {});
  return { code, stdout, stderr };
}
