import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { JsonObject } from '../../src/injection/index.js';
import { deleteNamespaces, eventually, uniqueName } from './cluster.js';
import { forEachKubeVersion, type ControlPlane } from './control-plane.js';
import { installCaptureChart, type CaptureInstall } from './capture-setup.js';
import { kubeCall, warningText } from './policy-parity.js';

/**
 * The proxy's uid from the namespace's OpenShift range on a real API server
 * (issue 53), the chart installed with proxy.capture.mode=auto: in a
 * namespace annotated openshift.io/sa.scc.uid-range the stored Pod names no
 * id outside the ranges (the proxy the last uid, the check the one below,
 * captured in CNI mode); elsewhere 1337 and envoy-init as before; a
 * malformed range is a warning and the template's uid, never a refused Pod.
 * These API servers have no SCC admission: 1.28 is upstream, and the
 * OpenShift fork of 1.34 and 1.36 registers its SCC plugins only with
 * --openshift-config (asserted below), so what an SCC would refuse is the
 * test's own assertion here; docs/install.md says what needs a real
 * OpenShift cluster. Policy mode's Pods are compared in policy-parity.test.ts
 * (its `openshift` namespaces).
 */

type Obj = Record<string, unknown>;

const RANGE = { 'openshift.io/sa.scc.uid-range': '1000620000/10000', 'openshift.io/sa.scc.supplemental-groups': '1000620000/10000', 'openshift.io/sa.scc.mcs': 's0:c25,c10' };
const FIRST = 1000620000;
const LAST = 1000629999;

function appPod(name: string): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations: { 'envoy-injector.io/capture': 'true' } },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0', ports: [{ containerPort: 8080 }] }] },
  };
}

/** Every user and group id the Pod names, as "container.field=id". */
function ids(stored: Obj): string[] {
  const spec = stored['spec'] as Obj;
  const found: string[] = [];
  const add = (where: string, context: unknown): void => {
    for (const field of ['runAsUser', 'runAsGroup', 'fsGroup']) {
      const id = (context as Obj | undefined)?.[field];
      if (id !== undefined) found.push(`${where}.${field}=${String(id)}`);
    }
  };
  add('Pod', spec['securityContext']);
  for (const list of ['initContainers', 'containers']) for (const entry of (spec[list] as Obj[] | undefined) ?? []) add(String(entry['name']), entry['securityContext']);
  return found;
}

const named = (stored: Obj, name: string): Obj | undefined =>
  ['initContainers', 'containers'].flatMap((list) => ((stored['spec'] as Obj)[list] as Obj[] | undefined) ?? []).find((entry) => entry['name'] === name);
const proxyUidArg = (entry: Obj | undefined): string | undefined => ((entry?.['args'] as string[] | undefined) ?? []).find((arg) => arg.startsWith('--proxy-uid='));
const status = (stored: Obj): Obj => JSON.parse(String(((stored['metadata'] as Obj)['annotations'] as Obj)['envoy-injector.io/status'])) as Obj;

async function createAnnotatedNamespace(plane: ControlPlane, name: string, annotations: Record<string, string>): Promise<void> {
  const created = await kubeCall(plane, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels: { 'envoy-injector.io/inject': 'enabled' }, annotations } });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  await eventually(`ServiceAccount ${name}/default`, async () => ((await kubeCall(plane, 'GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)).status === 200 ? true : undefined));
}

forEachKubeVersion("the proxy's uid from the namespace's OpenShift range", (plane, version) => {
  let setup: CaptureInstall<'plain'> | undefined;
  const ranged = uniqueName('openshift');
  const malformed = uniqueName('openshift-bad');
  const create = async (namespace: string, name: string): Promise<{ code: number; stored: Obj; warnings: string[] }> => {
    const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, appPod(name));
    return { code: response.status, stored: response.body, warnings: response.warnings.map(warningText) };
  };

  before(async () => {
    setup = await installCaptureChart(plane(), { proxy: { capture: { mode: 'auto' } } }, { plain: 'privileged' }, appPod('warmup'));
    await createAnnotatedNamespace(plane(), ranged, RANGE);
    await createAnnotatedNamespace(plane(), malformed, { 'openshift.io/sa.scc.uid-range': 'abc' });
    // The webhook's Namespace watch may deliver the new namespaces a moment after they exist (it reads them directly till then).
    await eventually('a dry-run Pod of the ranged namespace injected', async () => {
      const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${ranged}/pods?dryRun=All`, appPod('probe'));
      return response.status === 201 && JSON.stringify(response.body).includes('envoy-injector.io/status') ? true : undefined;
    }, 30_000, 200);
  });
  after(async () => {
    await setup?.teardown();
    await deleteNamespaces(plane(), [ranged, malformed]);
  });

  it(`the API server keeps the annotations as written and serves no security.openshift.io (no SCC admission here) (${version})`, async () => {
    const groups = (await kubeCall(plane(), 'GET', '/apis')).body['groups'] as { name: string }[];
    assert.deepEqual(groups.map((group) => group.name).filter((name) => name.endsWith('openshift.io')), []);
    const namespace = (await kubeCall(plane(), 'GET', `/api/v1/namespaces/${ranged}`)).body;
    const annotations = (namespace['metadata'] as Obj)['annotations'] as Obj;
    for (const [key, value] of Object.entries(RANGE)) assert.equal(annotations[key], value);
    // A Pod of a uid outside the range is stored as written: nothing here enforces the range but our own assertions.
    const outside = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'outside', annotations: { 'envoy-injector.io/inject': 'false' } }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0', securityContext: { runAsUser: 1337 } }] } };
    const stored = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${ranged}/pods`, outside);
    assert.equal(stored.status, 201, JSON.stringify(stored.body));
    assert.deepEqual(ids(stored.body), ['app.runAsUser=1337']);
  });

  it(`a ranged namespace: captured in CNI mode, no id outside the range, the proxy the last uid, the check the one below (${version})`, async () => {
    const { code, stored, warnings } = await create(ranged, 'ranged');
    assert.equal(code, 201, JSON.stringify(stored));
    assert.deepEqual(warnings, []);
    for (const entry of ids(stored)) {
      const id = Number(entry.split('=')[1]);
      assert.ok(id >= FIRST && id <= LAST, `${entry} is outside 1000620000/10000`);
    }
    assert.deepEqual(ids(stored).sort(), [`envoy-capture-check.runAsGroup=${LAST}`, `envoy-capture-check.runAsUser=${LAST - 1}`, `envoy.runAsGroup=${LAST}`, `envoy.runAsUser=${LAST}`]);
    assert.equal(named(stored, 'envoy-init'), undefined);
    assert.equal(proxyUidArg(named(stored, 'envoy-capture-check')), `--proxy-uid=${LAST}`);
    assert.equal(status(stored)['captureMode'], 'cni');
    assert.equal(status(stored)['proxyUid'], LAST);
  });

  it(`a namespace without a range: the template's 1337 and envoy-init, as before (${version})`, async () => {
    const { code, stored } = await create(setup?.namespaces.plain ?? '', 'plain');
    assert.equal(code, 201, JSON.stringify(stored));
    assert.equal(proxyUidArg(named(stored, 'envoy-init')), '--proxy-uid=1337');
    assert.equal((named(stored, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
    assert.equal(status(stored)['proxyUid'], undefined);
  });

  it(`a malformed range: the Pod is stored, injected with the template's uid, and the warning says why (${version})`, async () => {
    const { code, stored, warnings } = await create(malformed, 'malformed');
    assert.equal(code, 201, JSON.stringify(stored));
    assert.equal((named(stored, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
    assert.ok(warnings.some((warning) => warning.startsWith(`namespace "${malformed}" annotation openshift.io/sa.scc.uid-range: "abc" is not`)), JSON.stringify(warnings));
  });
});
