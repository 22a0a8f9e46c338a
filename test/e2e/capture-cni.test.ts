import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { JsonObject } from '../../src/injection/index.js';
import { forEachKubeVersion } from './control-plane.js';
import { installCaptureChart, type CaptureInstall } from './capture-setup.js';
import { kubeCall, warningText } from './policy-parity.js';

/**
 * Capture in CNI mode on a real API server (issue 37): the chart with
 * proxy.capture.mode=auto. Where Pod Security enforces restricted, the
 * injected Pod carries the unprivileged check instead of envoy-init and the
 * API server's Pod Security admission accepts it whenever it accepts the app
 * alone; where it is privileged, envoy-init as before. What policy mode
 * stores for such Pods is compared by policy-parity.test.ts (its CNI cases).
 */

type Obj = Record<string, unknown>;

/** An application Pod `restricted` accepts as written. */
function restrictedPod(name: string, annotations: Record<string, string> = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations: { 'envoy-injector.io/capture': 'true', ...annotations } },
    spec: {
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
      containers: [{ name: 'app', image: 'registry.example/app:1.0', ports: [{ containerPort: 8080 }], securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    },
  };
}

forEachKubeVersion('capture in CNI mode: Pods a restricted namespace accepts, with the check instead of envoy-init', (plane, version) => {
  let setup: CaptureInstall<'privileged' | 'restricted'> | undefined;
  let ns = { privileged: '', restricted: '' };
  const create = async (namespace: string, body: JsonObject): Promise<{ status: number; stored: Obj; warnings: readonly string[] }> => {
    const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, body);
    return { status: response.status, stored: response.body, warnings: response.warnings.map(warningText) };
  };
  const spec = (stored: Obj): Obj => stored['spec'] as Obj;
  const names = (list: unknown): unknown[] => ((list as Obj[] | undefined) ?? []).map((entry) => entry['name']);
  const status = (stored: Obj): Obj => JSON.parse(String(((stored['metadata'] as Obj)['annotations'] as Obj)['envoy-injector.io/status'])) as Obj;

  before(async () => {
    setup = await installCaptureChart(plane(), { proxy: { capture: { mode: 'auto' } } }, { privileged: 'privileged', restricted: 'restricted' }, restrictedPod('warmup'));
    ns = setup.namespaces;
  });
  after(async () => {
    await setup?.teardown();
  });

  it(`a namespace enforcing restricted accepts the injected Pod: the check, no envoy-init, the status says cni (${version})`, async () => {
    const { status: code, stored, warnings } = await create(ns.restricted, restrictedPod('captured'));
    assert.equal(code, 201, JSON.stringify(stored));
    assert.deepEqual(warnings, []);
    const inits = spec(stored)['initContainers'] as Obj[];
    // Classic sidecars (1.28): the check after the Pod's own; native (1.29+): first, before the proxy.
    assert.deepEqual(names(inits), version === '1.28' ? ['migrate', 'envoy-capture-check'] : ['envoy-capture-check', 'envoy', 'migrate']);
    assert.ok(!names(spec(stored)['volumes']).includes('envoy-init-xtables-lock'), 'no lock volume');
    const check = inits.find((init) => init['name'] === 'envoy-capture-check');
    assert.ok(check !== undefined);
    assert.deepEqual(check['command'], ['/nodejs/bin/node', '/app/bin/envoy-injector.js', 'check-capture']);
    assert.deepEqual((check['securityContext'] as Obj)['capabilities'], { drop: ['ALL'] });
    assert.equal(status(stored)['captureMode'], 'cni');
  });

  it(`the same app that restricted refuses alone is refused injected, for the app's own fields only (${version})`, async () => {
    const bad = restrictedPod('refused');
    const app = (spec(bad as Obj)['containers'] as Obj[])[0] as Obj;
    app['securityContext'] = { allowPrivilegeEscalation: true, capabilities: { drop: ['ALL'] } };
    const { status: code, stored } = await create(ns.restricted, bad);
    assert.equal(code, 403, JSON.stringify(stored));
    const message = String(stored['message']);
    assert.match(message, /violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false \(container "app" must set securityContext.allowPrivilegeEscalation=false\)$/);
    assert.doesNotMatch(message, /envoy/);
  });

  it(`a privileged namespace: envoy-init as before, the status without captureMode (${version})`, async () => {
    const { status: code, stored } = await create(ns.privileged, restrictedPod('classic'));
    assert.equal(code, 201, JSON.stringify(stored));
    assert.ok(names(spec(stored)['initContainers']).includes('envoy-init'));
    assert.ok(!names(spec(stored)['initContainers']).includes('envoy-capture-check'));
    assert.equal(status(stored)['captureMode'], undefined);
  });

  it(`envoy-init itself is what restricted refuses (${version})`, async () => {
    // The Pod of the test above, as stored, in the restricted namespace and not injected again: refused for envoy-init's capabilities.
    const { stored } = await create(ns.privileged, restrictedPod('reference'));
    const copy = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'by-hand', annotations: { 'envoy-injector.io/inject': 'false' } }, spec: { ...spec(stored), nodeName: undefined } } as unknown as JsonObject;
    const refused = await create(ns.restricted, copy);
    assert.equal(refused.status, 403, JSON.stringify(refused.stored));
    assert.match(String(refused.stored['message']), /container "envoy-init"/);
  });
});
