import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { parseTemplateData, type JsonObject } from '../../src/injection/index.js';
import { forEachKubeVersion } from './control-plane.js';
import type { Release } from './cluster.js';
import { installCaptureChart, type CaptureInstall } from './capture-setup.js';
import { kubeCall, warningText } from './policy-parity.js';

/**
 * Traffic capture on a real API server (issue 26): the chart with
 * proxy.capture.enabled=true, Pods created in a privileged namespace and in
 * one whose Pod Security admission enforces baseline. What policy mode
 * stores for the same Pods is compared with the webhook's by
 * policy-parity.test.ts (its capture cases, a baseline namespace among them).
 * TPROXY (issue 41): the proxy as root with NET_ADMIN is stored where Pod
 * Security is privileged, and left out with capture where it is baseline.
 * Issue 50: only where the platform team allows it (here the namespace label
 * envoy-injector.io/allow-tproxy), with NET_ADMIN its only capability and no
 * privilege escalation whatever the template says; a Pod asking elsewhere is
 * stored captured by REDIRECT, and its creator hears why.
 * The patch memo (issue 50): a Pod holding a name the patch adds never
 * shapes another's patch, in two namespaces or one.
 */

/** A template of one's own whose proxy asks for more than TPROXY needs: the injector gives it exactly NET_ADMIN. */
const OWN_TEMPLATE = [
  'containers:',
  '  - name: envoy',
  '    image: registry.example/envoy:1.0',
  '    securityContext: {runAsUser: 1337, allowPrivilegeEscalation: true, capabilities: {add: [NET_RAW, SETUID]}, readOnlyRootFilesystem: true}',
  'capture:',
  '  image: registry.example/envoy-injector-init:1.0',
  '  outboundPort: 15001',
  '  inboundPort: 15006',
  '  proxyPorts: [9901]',
  '  tproxyPort: 15007',
  '',
].join('\n');
/** The proxy of a TPROXY Pod, as stored: root in the proxy's group with NET_ADMIN only (beside what the template says otherwise). */
const HARDENED = { runAsUser: 0, runAsGroup: 1337, runAsNonRoot: false, privileged: false, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } };

type Obj = Record<string, unknown>;

forEachKubeVersion('traffic capture: Pods stored with envoy-init, or without it where Pod Security forbids NET_ADMIN', (plane, version) => {
  let setup: CaptureInstall<'privileged' | 'baseline' | 'allowed' | 'tenant'> | undefined;
  let release: Release | undefined;
  let ns = { privileged: '', baseline: '', allowed: '', tenant: '' };
  const pod = (name: string, annotations: Record<string, string> = {}): JsonObject => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, annotations },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0', ports: [{ containerPort: 8080 }] }] },
  });
  const create = async (namespace: string, body: JsonObject): Promise<{ stored: Obj; warnings: readonly string[] }> => {
    const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, body);
    assert.equal(response.status, 201, `${namespace}: ${String(response.body['message'])}`);
    return { stored: response.body, warnings: response.warnings.map(warningText) };
  };
  const initContainers = (stored: Obj): Obj[] => ((stored['spec'] as Obj)['initContainers'] as Obj[] | undefined) ?? [];
  const names = (list: Obj[] | undefined): unknown[] => (list ?? []).map((entry) => entry['name']);

  before(async () => {
    const allowTproxy = { 'envoy-injector.io/allow-tproxy': 'true' };
    setup = await installCaptureChart(plane(), {
      proxy: { capture: { enabled: true, excludeOutboundCidrs: ['169.254.169.254/32'], excludeInboundPorts: [15090] } },
      templates: { named: { own: OWN_TEMPLATE } },
    }, { privileged: 'privileged', baseline: { level: 'baseline', labels: allowTproxy }, allowed: { level: 'privileged', labels: allowTproxy }, tenant: 'privileged' }, pod('warmup'));
    ({ release } = setup);
    ns = setup.namespaces;
  });
  after(async () => {
    await setup?.teardown();
  });

  it(`a privileged namespace: stored with envoy-init exactly as described (${version})`, async () => {
    assert.ok(release !== undefined);
    const { stored, warnings } = await create(ns.privileged, pod('captured', { 'envoy-injector.io/capture-exclude-outbound-ports': '5432' }));
    assert.deepEqual(warnings, []);
    const inits = initContainers(stored);
    const init = inits.find((container) => container['name'] === 'envoy-init');
    assert.ok(init !== undefined, `envoy-init stored: ${JSON.stringify(names(inits))}`);
    // Classic sidecars (1.28): envoy-init after the Pod's own; native (1.29+): first, before the proxy.
    assert.deepEqual(names(inits), version === '1.28' ? ['envoy-init'] : ['envoy-init', 'envoy']);
    const template = parseTemplateData((release.manifests.find((manifest) => manifest.kind === 'ConfigMap') as unknown as { data: Record<string, string> }).data);
    assert.equal(init['image'], template.defaultTemplate.capture?.image);
    assert.equal(init['imagePullPolicy'], 'IfNotPresent');
    assert.deepEqual(init['args'], [
      '--proxy-uid=1337',
      '--outbound-port=15001',
      '--inbound-port=15006',
      '--proxy-ports=9901,9902,15020',
      '--exclude-outbound-cidrs=169.254.169.254/32',
      '--exclude-outbound-ports=5432',
      '--exclude-inbound-ports=15090',
      '--include-inbound-ports=',
    ]);
    assert.deepEqual(init['resources'], { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } });
    assert.deepEqual(init['securityContext'], {
      runAsUser: 0,
      runAsGroup: 0,
      runAsNonRoot: false,
      privileged: false,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
    });
    // Then the ServiceAccount token the API server mounts into every container.
    assert.deepEqual((init['volumeMounts'] as Obj[])[0], { name: 'envoy-init-xtables-lock', mountPath: '/run' });
    assert.equal(init['restartPolicy'], undefined, 'envoy-init runs once, it is no sidecar');
    const volumes = ((stored['spec'] as Obj)['volumes'] as Obj[]).filter((volume) => volume['name'] === 'envoy-init-xtables-lock');
    assert.deepEqual(volumes, [{ name: 'envoy-init-xtables-lock', emptyDir: {} }]);
  });

  it(`issue 50: a Pod holding a volume named as the one the patch adds does not shape another namespace's Pods, in either order (${version})`, async () => {
    // Team A's Pod has its own emptyDir named as the per-Pod bootstrap's volume; team B's is ordinary. A tcpSocket
    // probe under capture makes the patch add that volume. Each order with a shape no Pod had before (its probe's port).
    const tenantPod = (name: string, volume: string, port: number): JsonObject => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, annotations: {} },
      spec: {
        containers: [{ name: 'app', image: 'registry.example/app:1.0', ports: [{ containerPort: port }], livenessProbe: { tcpSocket: { port }, periodSeconds: 10 } }],
        volumes: [{ name: volume, emptyDir: {} }],
      },
    });
    const volumesNamed = (stored: Obj, name: string): Obj[] => ((stored['spec'] as Obj)['volumes'] as Obj[]).filter((volume) => volume['name'] === name);
    // Two namespaces (the tenants), then one (the names alone must tell the Pods apart).
    const cases = [
      { a: ns.privileged, b: ns.tenant, port: 8080 },
      { a: ns.tenant, b: ns.tenant, port: 8082 },
    ];
    for (const { a, b, port } of cases) {
      // A's first, then B's: B's Pod is stored, with the volume its proxy mounts.
      await create(a, tenantPod(`team-a-first-${port}`, 'envoy-proxy-config', port));
      const second = await create(b, tenantPod(`team-b-second-${port}`, 'cache', port));
      assert.deepEqual(volumesNamed(second.stored, 'envoy-proxy-config').map((volume) => Object.keys(volume).sort()), [['downwardAPI', 'name']]);
      // B's first, then A's: A's Pod is stored with its own volume of that name, once.
      await create(b, tenantPod(`team-b-first-${port}`, 'cache', port + 1));
      const own = await create(a, tenantPod(`team-a-second-${port}`, 'envoy-proxy-config', port + 1));
      assert.deepEqual(volumesNamed(own.stored, 'envoy-proxy-config'), [{ name: 'envoy-proxy-config', emptyDir: {} }]);
      assert.ok(own.warnings.some((warning) => warning.includes('volumes "envoy-proxy-config" from template')), JSON.stringify(own.warnings));
    }
  });

  it(`a baseline namespace: stored injected but without capture, with the warning (${version})`, async () => {
    const { stored, warnings } = await create(ns.baseline, pod('not-captured', { 'envoy-injector.io/capture': 'true' }));
    const all = [...initContainers(stored), ...((stored['spec'] as Obj)['containers'] as Obj[])];
    assert.ok(names(all).includes('envoy'), `the proxy is injected: ${JSON.stringify(names(all))}`);
    assert.ok(!names(all).includes('envoy-init'), 'no envoy-init');
    assert.equal(((stored['spec'] as Obj)['volumes'] as Obj[] | undefined)?.some((volume) => volume['name'] === 'envoy-init-xtables-lock') ?? false, false);
    assert.ok(
      warnings.some((warning) => warning.includes(`namespace "${ns.baseline}" enforces Pod Security "baseline" (pod-security.kubernetes.io/enforce), which forbids the NET_ADMIN capability traffic capture needs: the Pod was injected without traffic capture`)),
      `warnings: ${JSON.stringify(warnings)}`,
    );
  });

  it(`TPROXY (issue 41, 50): a privileged namespace that allows it stores the proxy as root with NET_ADMIN only and envoy-init in TPROXY mode; baseline stores the Pod without capture, and refuses that proxy (${version})`, async () => {
    const tproxy = { 'envoy-injector.io/capture-interception': 'tproxy' };
    const { stored, warnings } = await create(ns.allowed, pod('tproxy', tproxy));
    assert.deepEqual(warnings, []);
    const proxyOf = (from: Obj): Obj | undefined => [...initContainers(from), ...((from['spec'] as Obj)['containers'] as Obj[])].find((container) => container['name'] === 'envoy');
    const context = proxyOf(stored)?.['securityContext'] as Obj;
    // The chart's template keeps its read-only root and seccomp profile; the privileges are the injector's.
    assert.deepEqual(context, { ...HARDENED, readOnlyRootFilesystem: true, seccompProfile: { type: 'RuntimeDefault' } });
    const args = initContainers(stored).find((container) => container['name'] === 'envoy-init')?.['args'] as string[];
    assert.deepEqual(args.filter((arg) => arg.startsWith('--inbound-port') || arg.startsWith('--interception')), ['--inbound-port=15007', '--interception=tproxy']);
    const annotations = (stored['metadata'] as Obj)['annotations'] as Record<string, string>;
    assert.equal((JSON.parse(annotations['envoy-injector.io/status'] ?? '{}') as Obj)['interception'], 'tproxy');
    assert.ok((annotations['envoy-injector.io/proxy-config'] ?? '').includes('"transparent":true'));
    // A template of one's own that asks for NET_RAW, SETUID and privilege escalation: stored with NET_ADMIN only.
    const own = await create(ns.allowed, pod('tproxy-own', { ...tproxy, 'envoy-injector.io/template': 'own', 'envoy-injector.io/capture': 'true' }));
    assert.deepEqual(proxyOf(own.stored)?.['securityContext'], { ...HARDENED, readOnlyRootFilesystem: true }, JSON.stringify(own.warnings));
    // Pod Security baseline, even where TPROXY is allowed: injected without capture.
    const baseline = await create(ns.baseline, pod('tproxy-baseline', { 'envoy-injector.io/capture': 'true', ...tproxy }));
    assert.ok(!names(initContainers(baseline.stored)).includes('envoy-init'), 'no envoy-init');
    assert.ok(baseline.warnings.some((warning) => warning.includes('the Pod was injected without traffic capture')), JSON.stringify(baseline.warnings));
    // What the rule spares Pods: that proxy, by hand, is what baseline refuses.
    const refused = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${ns.baseline}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'tproxy-by-hand', annotations: { 'envoy-injector.io/inject': 'false' } },
      spec: { containers: [{ name: 'envoy', image: 'registry.example/envoy:1.0', securityContext: context }] },
    });
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.match(String(refused.body['message']), /violates PodSecurity "baseline:latest": non-default capabilities/);
  });

  it(`TPROXY asked for by a Pod alone (issue 50): where nothing allows it, stored captured by REDIRECT, with the warning (${version})`, async () => {
    const { stored, warnings } = await create(ns.privileged, pod('tproxy-alone', { 'envoy-injector.io/capture-interception': 'tproxy' }));
    assert.deepEqual(warnings, [
      `envoy-injector.io/capture-interception: tproxy is not allowed for this Pod: its proxy would run as root with NET_ADMIN, which neither template "config" (capture.allowTproxy, capture.interception: tproxy) nor the label envoy-injector.io/allow-tproxy: "true" of namespace "${ns.privileged}" allows; captured by REDIRECT instead (the app sees its own Pod as the client)`,
    ]);
    const args = initContainers(stored).find((container) => container['name'] === 'envoy-init')?.['args'] as string[] | undefined;
    assert.ok(args?.includes('--inbound-port=15006') === true && !args.some((arg) => arg.startsWith('--interception')), `captured by REDIRECT: ${JSON.stringify(args)}`);
    const proxy = [...initContainers(stored), ...((stored['spec'] as Obj)['containers'] as Obj[])].find((container) => container['name'] === 'envoy');
    const context = proxy?.['securityContext'] as Obj;
    assert.deepEqual([context['runAsUser'], context['runAsNonRoot'], (context['capabilities'] as Obj)['add']], [1337, true, undefined]);
    const annotations = (stored['metadata'] as Obj)['annotations'] as Record<string, string>;
    assert.equal((JSON.parse(annotations['envoy-injector.io/status'] ?? '{}') as Obj)['interception'], undefined);
  });

  it(`a baseline namespace refuses the very init container we leave out (${version})`, async () => {
    // What the rule spares Pods: the same Pod with envoy-init added by hand is refused by Pod Security.
    const { stored } = await create(ns.privileged, pod('reference'));
    const init = initContainers(stored).find((container) => container['name'] === 'envoy-init');
    assert.ok(init !== undefined);
    const refused = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${ns.baseline}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'by-hand', annotations: { 'envoy-injector.io/inject': 'false' } },
      spec: { initContainers: [{ ...init, volumeMounts: [{ name: 'envoy-init-xtables-lock', mountPath: '/run' }] }], containers: [{ name: 'app', image: 'registry.example/app:1.0' }], volumes: [{ name: 'envoy-init-xtables-lock', emptyDir: {} }] },
    });
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.match(String(refused.body['message']), /violates PodSecurity "baseline:latest": non-default capabilities/);
  });
});
