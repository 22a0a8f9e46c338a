import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import type { JsonObject } from '../../src/injection/index.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, followLiveChange, helmInstall, helmUninstall, LIVE_CHANGE_TARGET_MS, uniqueName, type Release } from './cluster.js';
import { forbiddenLines, startChartInjector, type ChartInjector } from './injector-process.js';
import { kubeCall, warningText } from './policy-parity.js';

/**
 * Namespace owners in control (issue 28), through the chart's webhook on a
 * real API server: a namespace's envoy-injector.io/template label, its
 * envoy-injector.io/proxy-* annotations as its Pods' defaults, the central
 * selectors, and a relabeled namespace followed live. What policy mode
 * stores for the same namespaces is compared with the webhook's by
 * policy-parity.test.ts (its namespace cases).
 */

type Obj = Record<string, unknown>;

const CANARY_IMAGE = 'envoyproxy/envoy:v1.99.0-canary';
const CANARY_TEMPLATE = `containers:
  - name: envoy
    image: ${CANARY_IMAGE}
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: "1", memory: 256Mi}
`;

forEachKubeVersion('a namespace picks its template and its proxy defaults; central selectors', (plane, version) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const ns = { canary: uniqueName('ns-canary'), defaults: uniqueName('ns-defaults'), bad: uniqueName('ns-bad'), relabeled: uniqueName('ns-relabeled'), plain: uniqueName('ns-plain') };
  const enabled = { 'envoy-injector.io/inject': 'enabled' };
  const pod = (name: string, annotations: Record<string, string> = {}, labels: Record<string, string> = {}): JsonObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations, labels },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }] },
  });
  const create = async (namespace: string, body: JsonObject, dryRun = false): Promise<{ stored: Obj; warnings: readonly string[] }> => {
    const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods${dryRun ? '?dryRun=All' : ''}`, body);
    assert.equal(response.status, 201, `${namespace}: ${String(response.body['message'])}`);
    return { stored: response.body, warnings: response.warnings.map(warningText) };
  };
  const envoy = (stored: Obj): Obj | undefined =>
    [...(((stored['spec'] as Obj)['initContainers'] as Obj[] | undefined) ?? []), ...((stored['spec'] as Obj)['containers'] as Obj[])].find((container) => container['name'] === 'envoy');
  const status = (stored: Obj): { template?: string } | undefined => {
    const text = ((stored['metadata'] as Obj)['annotations'] as Record<string, string> | undefined)?.['envoy-injector.io/status'];
    return text === undefined ? undefined : (JSON.parse(text) as { template?: string });
  };
  const counter = (() => {
    let count = 0;
    return (prefix: string) => `${prefix}-${++count}`;
  })();

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') }, {
      templates: { named: { canary: CANARY_TEMPLATE } },
      neverInjectSelector: [{ matchLabels: { app: 'etcd' } }],
      alwaysInjectSelector: [{ matchExpressions: [{ key: 'mesh.example.com/member', operator: 'Exists' }] }],
    });
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    await Promise.all([
      createNamespace(plane(), ns.canary, { ...enabled, 'envoy-injector.io/template': 'canary' }),
      createNamespace(plane(), ns.defaults, enabled),
      createNamespace(plane(), ns.bad, enabled),
      createNamespace(plane(), ns.relabeled, enabled),
      createNamespace(plane(), ns.plain),
    ]);
    await core.patchNamespace({ name: ns.defaults, body: [{ op: 'add', path: '/metadata/annotations', value: { 'envoy-injector.io/proxy-cpu': '250m', 'envoy-injector.io/proxy-memory-limit': '512Mi', 'example.com/unrelated': 'x'.repeat(10_000) } }] });
    await core.patchNamespace({ name: ns.bad, body: [{ op: 'add', path: '/metadata/annotations', value: { 'envoy-injector.io/proxy-cpu': 'lots', 'envoy-injector.io/proxy-memory': '128Mi' } }] });
    injector = await startChartInjector(plane(), release);
    await eventually('a first Pod injected through the API server', async () => {
      const { stored } = await create(ns.defaults, pod(counter('warmup')), true);
      return status(stored) === undefined ? undefined : true;
    }, 30_000, 200);
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), Object.values(ns));
  });

  it(`a namespace labeled with a second template gets it; a Pod naming its own wins (${version})`, async () => {
    const { stored } = await create(ns.canary, pod('by-namespace'));
    assert.equal(status(stored)?.template, 'canary');
    assert.equal(envoy(stored)?.['image'], CANARY_IMAGE);
    const { stored: own } = await create(ns.canary, pod('own-template', { 'envoy-injector.io/template': 'config' }));
    assert.equal(status(own)?.template, 'config');
    assert.match(String(envoy(own)?.['image']), /^envoyproxy\/envoy:v1\.\d+/);
    assert.notEqual(envoy(own)?.['image'], CANARY_IMAGE);
  });

  it("the namespace's proxy-* annotations are its Pods' defaults; a Pod's own win", async () => {
    const { stored, warnings } = await create(ns.defaults, pod('defaulted'));
    assert.deepEqual(warnings, []);
    const resources = envoy(stored)?.['resources'] as { requests: Record<string, string>; limits: Record<string, string> };
    assert.equal(resources.requests['cpu'], '250m');
    assert.equal(resources.limits['memory'], '512Mi');
    const { stored: own } = await create(ns.defaults, pod('own-cpu', { 'envoy-injector.io/proxy-cpu': '300m' }));
    const ownResources = envoy(own)?.['resources'] as { requests: Record<string, string>; limits: Record<string, string> };
    assert.equal(ownResources.requests['cpu'], '300m');
    assert.equal(ownResources.limits['memory'], '512Mi');
  });

  it('an invalid namespace annotation is ignored with a warning, and the Pod is injected', async () => {
    const { stored, warnings } = await create(ns.bad, pod('with-bad-default'));
    assert.ok(status(stored) !== undefined, 'injected');
    const resources = envoy(stored)?.['resources'] as { requests: Record<string, string> };
    assert.equal(resources.requests['memory'], '128Mi', 'the valid default applies');
    assert.notEqual(resources.requests['cpu'], 'lots');
    assert.ok(
      warnings.some((warning) => warning.startsWith(`envoy-injector.io/proxy-cpu (namespace "${ns.bad}"): "lots" is not a quantity`)),
      `warnings: ${JSON.stringify(warnings)}`,
    );
  });

  it(`relabeling a namespace with another template is followed (target ${LIVE_CHANGE_TARGET_MS / 1000} s), and so is a new proxy default`, async (t: TestContext) => {
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    assert.equal(status((await create(ns.relabeled, pod(counter('before')), true)).stored)?.template, 'config');
    await core.patchNamespace({ name: ns.relabeled, body: [{ op: 'add', path: '/metadata/labels/envoy-injector.io~1template', value: 'canary' }] });
    await followLiveChange(t, 'a Pod of the relabeled namespace gets the canary template', performance.now(), async () => {
      const { stored } = await create(ns.relabeled, pod(counter('label')), true);
      return status(stored)?.template === 'canary' ? true : undefined;
    });
    await core.patchNamespace({ name: ns.relabeled, body: [{ op: 'add', path: '/metadata/annotations', value: { 'envoy-injector.io/proxy-memory': '100Mi' } }] });
    await followLiveChange(t, 'a Pod of the reannotated namespace gets its memory default', performance.now(), async () => {
      const { stored } = await create(ns.relabeled, pod(counter('annotation')), true);
      return (envoy(stored)?.['resources'] as { requests?: Record<string, string> } | undefined)?.requests?.['memory'] === '100Mi' ? true : undefined;
    });
    await core.patchNamespace({ name: ns.relabeled, body: [{ op: 'replace', path: '/metadata/labels/envoy-injector.io~1template', value: 'nope' }] });
    await followLiveChange(t, 'a Pod of a namespace picking an unknown template is skipped with a warning', performance.now(), async () => {
      const { stored, warnings } = await create(ns.relabeled, pod(counter('unknown')), true);
      return status(stored) === undefined && warnings.some((warning) => warning.includes('picks the template "nope"')) ? true : undefined;
    });
  });

  it('central selectors: never keeps a Pod plain in an enabled namespace, always injects one elsewhere; the Pod\'s annotation wins', async () => {
    assert.equal(status((await create(ns.defaults, pod('etcd', {}, { app: 'etcd' }))).stored), undefined, 'never');
    assert.ok(status((await create(ns.defaults, pod('etcd-asked', { 'envoy-injector.io/inject': 'true' }, { app: 'etcd' }))).stored) !== undefined, 'never, but asked');
    assert.ok(status((await create(ns.plain, pod('member', {}, { 'mesh.example.com/member': '' }))).stored) !== undefined, 'always, through the opted-in-pods webhook');
    assert.equal(status((await create(ns.plain, pod('member-out', { 'envoy-injector.io/inject': 'false' }, { 'mesh.example.com/member': '' }))).stored), undefined, 'always, but opted out');
    assert.equal(status((await create(ns.plain, pod('not-member'))).stored), undefined, 'neither');
  });

  it('nothing the injector asked the API server was forbidden (no 403 in its log)', () => {
    assert.ok(injector !== undefined);
    assert.deepEqual(forbiddenLines(injector), []);
  });
});
