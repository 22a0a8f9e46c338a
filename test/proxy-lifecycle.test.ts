import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import {
  admitPod,
  applyPodPatch,
  drainScript,
  parseTemplateData,
  waitReadyScript,
  type Admission,
  type JsonObject,
  type LifecycleSettings,
  type TemplateSet,
} from '../src/injection/index.js';
import { TemplateError } from '../src/errors.js';
import { applyIndependently } from './helpers/patch.js';

const LIFECYCLE = 'proxyLifecycle: {adminPort: 9901, readyPort: 9902, drainSeconds: 5}';
const templates: TemplateSet = parseTemplateData({
  config: `containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6"}, {name: helper, image: "busybox:1"}]\n${LIFECYCLE}\nvolumes: [{name: scratch, emptyDir: {}}, {name: shm, emptyDir: {medium: Memory}}, {name: conf, configMap: {name: envoy}}]`,
  off: `containers: [{name: envoy, image: "e:1"}]\nproxyLifecycle: {adminPort: 9901, readyPort: 9902, holdApplication: false}\nsafeToEvictLocalVolumes: false\nvolumes: [{name: scratch, emptyDir: {}}]`,
  own: `containers: [{name: envoy, image: "e:1", startupProbe: {tcpSocket: {port: 9902}}, lifecycle: {preStop: {exec: {command: ["/x"]}}}}]\n${LIFECYCLE}`,
  bare: 'containers: [{name: envoy, image: "e:1"}]\nvolumes: [{name: node, hostPath: {path: /var/log}}]',
});

type Obj = Record<string, unknown>;

function pod(annotations: Record<string, string> = {}, spec: Obj = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec },
  } as JsonObject;
}

function admit(received: JsonObject, native: boolean): Admission & { injected: Obj; spec: Obj; annotations: Record<string, string> } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  const injected = applyPodPatch(received, admission.injection.patch) as Obj;
  assert.deepEqual(applyIndependently(received, admission.injection.patch), injected, 'an independent JSON Patch gives the same Pod');
  const metadata = injected['metadata'] as Obj;
  return { ...admission, injected, spec: injected['spec'] as Obj, annotations: metadata['annotations'] as Record<string, string> };
}

const named = (list: unknown, name: string): Obj | undefined => ((list as Obj[] | undefined) ?? []).find((entry) => entry['name'] === name);
const names = (list: unknown): string[] => ((list as Obj[] | undefined) ?? []).map((entry) => String(entry['name']));

describe('the proxy in the Pod life: native sidecars', () => {
  it('the proxy gets a startupProbe on the health listener /ready, period 1 s, 60 failures allowed; no hooks', () => {
    const { spec, warnings } = admit(pod(), true);
    const envoy = named(spec['initContainers'], 'envoy');
    assert.deepEqual(envoy?.['startupProbe'], { httpGet: { path: '/ready', port: 9902 }, periodSeconds: 1, failureThreshold: 60 });
    assert.equal(envoy?.['lifecycle'], undefined, 'the kubelet stops a native sidecar after the app: no drain hook');
    assert.equal(named(spec['initContainers'], 'helper')?.['startupProbe'], undefined, 'only the proxy');
    assert.deepEqual(warnings, []);
  });

  it('hold-application "false" leaves the probe out; a template holdApplication false too, and the annotation "true" beats it', () => {
    assert.equal(named(admit(pod({ 'envoy-injector.io/hold-application': 'false' }), true).spec['initContainers'], 'envoy')?.['startupProbe'], undefined);
    const off = { 'envoy-injector.io/template': 'off' };
    assert.equal(named(admit(pod(off), true).spec['initContainers'], 'envoy')?.['startupProbe'], undefined);
    assert.ok(named(admit(pod({ ...off, 'envoy-injector.io/hold-application': 'true' }), true).spec['initContainers'], 'envoy')?.['startupProbe']);
  });

  it('an invalid hold-application value is ignored with a warning: the template holds', () => {
    const { spec, warnings } = admit(pod({ 'envoy-injector.io/hold-application': 'yes' }), true);
    assert.ok(named(spec['initContainers'], 'envoy')?.['startupProbe']);
    assert.deepEqual(warnings, ['envoy-injector.io/hold-application: "yes" is not "true" or "false"; ignored']);
  });

  it("a template's own startupProbe and hooks are kept as written", () => {
    const { spec } = admit(pod({ 'envoy-injector.io/template': 'own' }), true);
    assert.deepEqual(named(spec['initContainers'], 'envoy')?.['startupProbe'], { tcpSocket: { port: 9902 } });
  });

  it('a template without proxyLifecycle is untouched; a hold-application annotation on its Pods gets a warning', () => {
    const { spec, warnings } = admit(pod({ 'envoy-injector.io/template': 'bare', 'envoy-injector.io/hold-application': 'false' }), false);
    assert.deepEqual(names(spec['containers']), ['app', 'envoy']);
    assert.equal(named(spec['containers'], 'envoy')?.['lifecycle'], undefined);
    assert.deepEqual(warnings, ['envoy-injector.io/hold-application: the template has no proxyLifecycle section; ignored']);
  });
});

describe('the proxy in the Pod life: classic sidecars', () => {
  it('holding: the proxy goes first in containers with a postStart wait and a preStop drain; other sidecars are appended', () => {
    const { spec, warnings } = admit(pod(), false);
    assert.deepEqual(names(spec['containers']), ['envoy', 'app', 'helper']);
    const lifecycle = named(spec['containers'], 'envoy')?.['lifecycle'] as Obj;
    assert.deepEqual(Object.keys(lifecycle), ['postStart', 'preStop']);
    assert.deepEqual((lifecycle['postStart'] as Obj)['exec'], { command: ['/bin/bash', '-c', waitReadyScript(settings(60))] });
    assert.deepEqual((lifecycle['preStop'] as Obj)['exec'], { command: ['/bin/bash', '-c', drainScript(settings(60), 5)] });
    assert.equal(named(spec['containers'], 'envoy')?.['startupProbe'], undefined);
    assert.deepEqual(warnings, []);
  });

  it('a Pod without containers (invalid, but admission runs first) still gets the proxy first', () => {
    const { spec } = admit(pod({}, { containers: undefined }), false);
    assert.deepEqual(names(spec['containers']), ['envoy', 'helper']);
  });

  it('not holding: the proxy is appended, without postStart; the drain stays', () => {
    const { spec } = admit(pod({ 'envoy-injector.io/hold-application': 'false' }), false);
    assert.deepEqual(names(spec['containers']), ['app', 'envoy', 'helper']);
    assert.deepEqual(Object.keys(named(spec['containers'], 'envoy')?.['lifecycle'] as Obj), ['preStop']);
  });

  it('a drain that does not fit the grace period is shortened with a warning; the grace period is not changed', () => {
    const { spec, warnings } = admit(pod({}, { terminationGracePeriodSeconds: 3 }), false);
    assert.equal(spec['terminationGracePeriodSeconds'], 3);
    const preStop = (named(spec['containers'], 'envoy')?.['lifecycle'] as Obj)['preStop'] as Obj;
    assert.deepEqual(preStop['exec'], { command: ['/bin/bash', '-c', drainScript(settings(60), 2)] });
    assert.deepEqual(warnings, [
      "the proxy's drain of 5 s does not fit the Pod's terminationGracePeriodSeconds of 3 s: shortened to 2 s (raise terminationGracePeriodSeconds to at least 6 for the whole drain)",
    ]);
    const fits = admit(pod({}, { terminationGracePeriodSeconds: 6 }), false);
    assert.deepEqual(fits.warnings, []);
  });

  it('a grace period of 0 or 1 s leaves no time to drain: no preStop, a warning', () => {
    for (const grace of [0, 1]) {
      const { spec, warnings } = admit(pod({}, { terminationGracePeriodSeconds: grace }), false);
      assert.deepEqual(Object.keys(named(spec['containers'], 'envoy')?.['lifecycle'] as Obj), ['postStart']);
      assert.equal(warnings.length, 1);
    }
  });

  it("a template's own preStop is kept; the postStart is still added", () => {
    const { spec } = admit(pod({ 'envoy-injector.io/template': 'own' }), false);
    const lifecycle = named(spec['containers'], 'envoy')?.['lifecycle'] as Obj;
    assert.deepEqual(lifecycle['preStop'], { exec: { command: ['/x'] } });
    assert.ok(lifecycle['postStart']);
  });
});

describe('cluster-autoscaler: safe-to-evict-local-volumes', () => {
  const key = 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes';
  it("names the template's emptyDir and hostPath volumes, not memory-backed or ConfigMap ones", () => {
    assert.equal(admit(pod(), true).annotations[key], 'scratch');
    assert.equal(admit(pod({ 'envoy-injector.io/template': 'bare' }), true).annotations[key], 'node');
  });

  it("keeps and extends the Pod's own list, never replacing it, and adds nothing twice", () => {
    assert.equal(admit(pod({ [key]: 'cache,tmp' }), true).annotations[key], 'cache,tmp,scratch');
    assert.equal(admit(pod({ [key]: 'scratch, cache' }), true).annotations[key], 'scratch, cache');
    assert.equal(admit(pod({ [key]: '' }), true).annotations[key], 'scratch');
  });

  it("a volume of the Pod's own name is the Pod's: not named; a Pod without annotations gets the map whole", () => {
    const own = admit(pod({}, { volumes: [{ name: 'scratch', configMap: { name: 'x' } }] }), true);
    assert.equal(own.annotations[key], undefined);
    const received = pod();
    delete (received['metadata'] as Obj)['annotations'];
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, pod: received, templates, options: { nativeSidecar: true } });
    const injected = applyPodPatch(received, admission.injection?.patch ?? []) as Obj;
    assert.equal(((injected['metadata'] as Obj)['annotations'] as Obj)[key], 'scratch');
  });

  it('safeToEvictLocalVolumes: false leaves it out', () => {
    assert.equal(admit(pod({ 'envoy-injector.io/template': 'off' }), true).annotations[key], undefined);
  });
});

describe('proxyLifecycle: the template section', () => {
  it('needs a proxy container', () => {
    assert.throws(() => parseTemplateData({ config: 'initContainers: [{name: setup, image: "e:1"}]\nproxyLifecycle: {adminPort: 9901, readyPort: 9902}' }), {
      message: "config: proxyLifecycle: needs a proxy, the template's first entry of containers",
    });
  });

  it('refuses bad fields with their path', () => {
    assert.throws(
      () => parseTemplateData({ config: 'containers: [{name: envoy, image: "e:1"}]\nproxyLifecycle: {adminPort: 0, drainSeconds: -1, holdApplication: "no", extra: 1}\nsafeToEvictLocalVolumes: "yes"' }),
      (error: unknown) => {
        assert.ok(error instanceof TemplateError);
        assert.deepEqual(error.problems, [
          'config: safeToEvictLocalVolumes: must be true or false',
          'config: proxyLifecycle.extra: unknown field (proxyLifecycle may hold holdApplication, adminPort, readyPort, readyPath, drainSeconds, startupSeconds)',
          'config: proxyLifecycle.holdApplication: must be true or false',
          'config: proxyLifecycle.adminPort: 0 is not a port (1-65535)',
          'config: proxyLifecycle.readyPort: required',
          'config: proxyLifecycle.drainSeconds: -1 is not a whole number of seconds from 0 to 3600',
        ]);
        return true;
      },
    );
  });
});

function settings(startupSeconds: number): LifecycleSettings {
  return { holdApplication: true, adminPort: 9901, readyPort: 9902, readyPath: '/ready', drainSeconds: 5, startupSeconds };
}

/** Envoy's admin API as the hooks see it: /ready 503 until `readyAfter` asks, then 200; POST-only drain. */
async function fakeAdmin(readyAfter: number): Promise<{ server: Server; port: number; requests: string[] }> {
  const requests: string[] = [];
  let asked = 0;
  const server = createServer((request: IncomingMessage, response) => {
    requests.push(`${request.method} ${request.url} HTTP/${request.httpVersion}`);
    if (request.url === '/ready') {
      asked += 1;
      response.writeHead(asked > readyAfter ? 200 : 503).end(asked > readyAfter ? 'LIVE\n' : 'PRE_INITIALIZING\n');
    } else if (request.url === '/drain_listeners?graceful' && request.method === 'POST') response.writeHead(200).end('OK\n');
    else response.writeHead(405).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, requests };
}

function runBash(script: string): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('/bin/bash', ['-c', script], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('close', (code) => resolve({ code, stderr }));
  });
}

describe('the classic hooks, run by bash against an admin API', () => {
  it('postStart returns 0 once /ready answers 200, having asked until then', async () => {
    const admin = await fakeAdmin(2);
    try {
      const result = await runBash(waitReadyScript({ ...settings(30), adminPort: admin.port }));
      assert.deepEqual(result, { code: 0, stderr: '' });
      assert.deepEqual(admin.requests, ['GET /ready HTTP/1.1', 'GET /ready HTTP/1.1', 'GET /ready HTTP/1.1']);
    } finally {
      admin.server.close();
    }
  });

  it('postStart fails, saying why, when Envoy never becomes ready within startupSeconds', async () => {
    const admin = await fakeAdmin(Number.MAX_SAFE_INTEGER);
    try {
      const result = await runBash(waitReadyScript({ ...settings(2), adminPort: admin.port }));
      assert.equal(result.code, 1);
      assert.equal(result.stderr, `envoy-injector: Envoy was not ready after 2 s (GET 127.0.0.1:${admin.port}/ready)\n`);
      // A try a second (503 at once): two, or one when the wait's first second of bash's whole-second clock was short.
      assert.ok(admin.requests.length >= 1 && admin.requests.length <= 2, `${admin.requests.length} tries`);
    } finally {
      admin.server.close();
    }
  });

  it('postStart gives up within startupSeconds in total, even when every try waits on an admin API that never answers', async () => {
    // Connections accepted, no answer: each try's read waits its whole timeout.
    const silent = createNetServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    try {
      const started = performance.now();
      const result = await runBash(waitReadyScript({ ...settings(3), adminPort: port }));
      const seconds = (performance.now() - started) / 1000;
      assert.equal(result.code, 1);
      // The bound is the script's own clock (bash's SECONDS, whole seconds: under one more), not this machine's speed:
      // the waits are timeouts, and bash's own work is milliseconds, so a slower machine stays far inside it.
      assert.ok(seconds < 3 + 1.5, `the wait took ${seconds.toFixed(1)} s for startupSeconds 3`);
    } finally {
      silent.close();
    }
  });

  it('preStop POSTs the graceful drain, then waits; without an admin API it says so and still waits', async () => {
    const admin = await fakeAdmin(0);
    try {
      assert.deepEqual(await runBash(drainScript({ ...settings(60), adminPort: admin.port }, 0)), { code: 0, stderr: '' });
      assert.deepEqual(admin.requests, ['POST /drain_listeners?graceful HTTP/1.1']);
    } finally {
      admin.server.close();
    }
    const closed = admin.port;
    const result = await runBash(drainScript({ ...settings(60), adminPort: closed }, 0));
    assert.deepEqual(result, { code: 0, stderr: `envoy-injector: could not start the graceful drain (POST 127.0.0.1:${closed}/drain_listeners?graceful)\n` });
  });
});
