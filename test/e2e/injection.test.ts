import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { AdmissionregistrationV1Api, AppsV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { isJsonObject, parseYaml, parseYamlDocuments } from '../../src/injection/index.js';
import { repoFile } from '../helpers/fixtures.js';
import { largePod } from '../helpers/large-pod.js';
import { forEachKubeVersion, type KubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, envoyImage, eventually, followLiveChange, helmInstall, helmUninstall, LIVE_CHANGE_TARGET_MS, plainPod, type Release, sidecar, uniqueName, webhookNames } from './cluster.js';
import { forbiddenLines, startChartInjector, type ChartInjector } from './injector-process.js';

/** 1.29+ has native sidecars: the chart's `nativeSidecar: auto` must pick them there and only there. */
const expectedPlacement = (version: KubeVersion): 'native' | 'classic' => (version === '1.28' ? 'classic' : 'native');

forEachKubeVersion('the injector as the chart\'s ServiceAccount, called by the API server through the chart\'s Service', (plane, version) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const ns = { enabled: uniqueName('enabled'), disabled: uniqueName('disabled'), plain: uniqueName('plain'), later: uniqueName('later') };
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const create = (namespace: string, pod: V1Pod, dryRun?: 'All') => core().createNamespacedPod({ namespace, body: pod, ...(dryRun === undefined ? {} : { dryRun }) });
  const probeName = (() => {
    let count = 0;
    return (prefix: string) => `${prefix}-${++count}`;
  })();

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') });
    await Promise.all([
      createNamespace(plane(), ns.enabled, { 'envoy-injector.io/inject': 'enabled' }),
      createNamespace(plane(), ns.disabled, { 'envoy-injector.io/inject': 'disabled' }),
      createNamespace(plane(), ns.plain),
      createNamespace(plane(), ns.later),
    ]);
    injector = await startChartInjector(plane(), release);
    // Ready once the API server can call it: the first Pod of an enabled namespace is injected.
    await eventually('a first Pod injected through the API server', async () => {
      const pod = await create(ns.enabled, plainPod(probeName('warmup')), 'All');
      return sidecar(pod) === 'none' ? undefined : true;
    }, 30_000, 200);
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), Object.values(ns));
  });

  it('certificates.mode=auto: the injector made its Secret and put its CA in every webhook\'s caBundle', async () => {
    assert.ok(release !== undefined && injector !== undefined);
    const secretName = injector.env['CERT_SECRET'];
    const webhookName = injector.env['WEBHOOK_CONFIG_NAME'];
    assert.ok(secretName !== undefined && webhookName !== undefined, 'the Deployment sets CERT_SECRET and WEBHOOK_CONFIG_NAME');
    const secret = await core().readNamespacedSecret({ name: secretName, namespace: release.namespace });
    const ca = secret.data?.['ca.crt'];
    assert.ok(ca !== undefined && ca !== '', `Secret ${secretName} holds ca.crt`);
    const config = await plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: webhookName });
    // Each release's own names: the API server's metrics (label name) tell two releases' webhooks apart.
    assert.deepEqual(config.webhooks?.map((webhook) => webhook.name), ['enabled-namespaces', 'opted-in-pods', 'other-pods'].map((purpose) => `${purpose}.${webhookName}.envoy-injector.io`));
    assert.deepEqual(config.webhooks?.map((webhook) => webhook.name), webhookNames(release));
    for (const webhook of config.webhooks ?? []) {
      assert.ok(Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString('utf8').includes(Buffer.from(ca, 'base64').toString('utf8').trim()), `${webhook.name} trusts the Secret's CA`);
      assert.equal(webhook.clientConfig.url, undefined, `${webhook.name} still calls the Service`);
    }
  });

  it(`an enabled namespace's Pod is stored injected (${expectedPlacement(version)} sidecar on ${version})`, async () => {
    const pod = await create(ns.enabled, plainPod('injected'));
    assert.equal(sidecar(pod), expectedPlacement(version));
    const stored = await core().readNamespacedPod({ name: 'injected', namespace: ns.enabled });
    assert.equal(sidecar(stored), expectedPlacement(version));
    assert.match(envoyImage(stored) ?? '', /^envoyproxy\/envoy:v\d/);
    // Classic sidecars hold the app: the proxy goes first (issue 25); native ones leave containers to the app.
    assert.deepEqual(stored.spec?.containers.map((container) => container.name), expectedPlacement(version) === 'classic' ? ['envoy', 'app'] : ['app']);
  });

  it('the stored Envoy\'s health listener is "::" with ipv4_compat, on the port of its probe and containerPort (issue 15)', async () => {
    const stored = await core().readNamespacedPod({ name: 'injected', namespace: ns.enabled });
    const envoy = [...(stored.spec?.initContainers ?? []), ...(stored.spec?.containers ?? [])].find((container) => container.name === 'envoy');
    assert.ok(envoy !== undefined, 'the stored Pod has the envoy container');
    const args = envoy.args ?? [];
    assert.equal(args[0], '--config-yaml');
    const bootstrap = parseYaml(args[1] ?? '') as { static_resources: { listeners: { name: string; address: { socket_address: Record<string, unknown> } }[] } };
    // Then the capture listeners (issue 26), idle unless the Pod's traffic is captured.
    assert.deepEqual(bootstrap.static_resources.listeners.map((listener) => listener.name), ['health', 'outbound', 'inbound']);
    assert.deepEqual(bootstrap.static_resources.listeners[0]?.address.socket_address, { address: '::', port_value: 9902, ipv4_compat: true });
    assert.equal(envoy.readinessProbe?.httpGet?.port, 9902);
    assert.deepEqual(envoy.ports?.map((port) => port.containerPort), [9902]);
  });

  it(`the proxy in the Pod's life as stored (issue 25): ${expectedPlacement(version) === 'native' ? 'a startupProbe, no hooks' : 'envoy first, postStart and preStop, the drain fitted to the grace period'}; the autoscaler list extended`, async () => {
    const evict = 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes';
    // Capture adds the envoy-init-xtables-lock emptyDir: a local volume cluster-autoscaler must be told about.
    const pod = plainPod('lifecycle', { annotations: { 'envoy-injector.io/capture': 'true', [evict]: 'cache' } });
    pod.spec = { ...pod.spec, containers: pod.spec?.containers ?? [], terminationGracePeriodSeconds: 3, volumes: [{ name: 'cache', emptyDir: {} }] };
    await create(ns.enabled, pod);
    const stored = await core().readNamespacedPod({ name: 'lifecycle', namespace: ns.enabled });
    assert.equal(stored.metadata?.annotations?.[evict], 'cache,envoy-init-xtables-lock');
    assert.equal(stored.spec?.terminationGracePeriodSeconds, 3, 'the grace period is the Pod\'s own');
    if (expectedPlacement(version) === 'native') {
      const envoy = stored.spec?.initContainers?.find((container) => container.name === 'envoy');
      assert.deepEqual(JSON.parse(JSON.stringify(envoy?.startupProbe ?? null)), { httpGet: { path: '/ready', port: 9902, scheme: 'HTTP' }, periodSeconds: 1, failureThreshold: 60, timeoutSeconds: 1, successThreshold: 1 });
      assert.equal(envoy?.lifecycle, undefined, 'the kubelet stops a native sidecar after the app');
    } else {
      assert.deepEqual(stored.spec?.containers.map((container) => container.name), ['envoy', 'app']);
      const envoy = stored.spec?.containers[0];
      assert.equal(envoy?.startupProbe, undefined);
      assert.deepEqual(envoy?.lifecycle?.postStart?.exec?.command?.slice(0, 2), ['/bin/bash', '-c']);
      assert.match(envoy?.lifecycle?.postStart?.exec?.command?.[2] ?? '', /GET \/ready HTTP\/1\.1/);
      const preStop = envoy?.lifecycle?.preStop?.exec?.command?.[2] ?? '';
      assert.match(preStop, /POST \/drain_listeners\?graceful HTTP\/1\.1/);
      assert.match(preStop, /\nsleep 2$/, 'the 5 s drain shortened to fit the 3 s grace period');
    }
    // Opted out of holding: no startupProbe (native); envoy after the app and no postStart (classic).
    const optedOut = await create(ns.enabled, plainPod('no-hold', { annotations: { 'envoy-injector.io/hold-application': 'false' } }));
    if (expectedPlacement(version) === 'native') assert.equal(optedOut.spec?.initContainers?.find((container) => container.name === 'envoy')?.startupProbe, undefined);
    else {
      assert.deepEqual(optedOut.spec?.containers.map((container) => container.name), ['app', 'envoy']);
      assert.deepEqual(Object.keys(optedOut.spec?.containers[1]?.lifecycle ?? {}), ['preStop']);
    }
  });

  it('opted out by annotation, in a disabled namespace, kube-system or the release namespace: stored untouched', async () => {
    assert.ok(release !== undefined);
    const optIn = { annotations: { 'envoy-injector.io/inject': 'true' } };
    const cases: [string, string, V1Pod][] = [
      ['opted out in an enabled namespace', ns.enabled, plainPod('opted-out', { annotations: { 'envoy-injector.io/inject': 'false' } })],
      ['annotated, in a disabled namespace', ns.disabled, plainPod('in-disabled', optIn)],
      ['annotated, in kube-system', 'kube-system', plainPod(uniqueName('in-kube-system'), optIn)],
      ['annotated, in the release namespace', release.namespace, plainPod('in-release', optIn)],
      ['not annotated, in a plain namespace', ns.plain, plainPod('plain')],
    ];
    for (const [what, namespace, pod] of cases) {
      const created = await create(namespace, pod);
      assert.equal(sidecar(created), 'none', what);
      assert.deepEqual(created.spec?.containers.map((container) => container.name), ['app'], what);
    }
    await core().deleteNamespacedPod({ name: cases[2]?.[2].metadata?.name ?? '', namespace: 'kube-system' });
  });

  it('opted in by annotation, and by the seed\'s legacy annotation, in a plain namespace', async () => {
    const annotated = await create(ns.plain, plainPod('opted-in', { annotations: { 'envoy-injector.io/inject': 'true' } }));
    assert.equal(sidecar(annotated), expectedPlacement(version));
    const legacy = await create(ns.plain, plainPod('legacy', { annotations: { 'initializer.kubernetes.io/envoy': 'true' } }));
    assert.equal(sidecar(legacy), expectedPlacement(version));
  });

  it('server-side dry-run: answered injected, nothing stored', async () => {
    const answer = await create(ns.enabled, plainPod('dry-run'), 'All');
    assert.equal(sidecar(answer), expectedPlacement(version));
    const found = await core().readNamespacedPod({ name: 'dry-run', namespace: ns.enabled }).then(() => true, (error: { code?: number }) => (error.code === 404 ? false : Promise.reject(error)));
    assert.equal(found, false, 'a dry-run Pod is not stored');
  });

  it('a Deployment of 3 replicas gives 3 injected Pods, made by the controllers with generateName', async () => {
    const apps = plane().kubeConfig.makeApiClient(AppsV1Api);
    const labels = { app: 'web' };
    await apps.createNamespacedDeployment({
      namespace: ns.enabled,
      body: { metadata: { name: 'web' }, spec: { replicas: 3, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] } } } },
    });
    const pods = await eventually('3 Pods of Deployment web', async () => {
      const list = await core().listNamespacedPod({ namespace: ns.enabled, labelSelector: 'app=web' });
      return list.items.length === 3 ? list.items : undefined;
    }, 30_000);
    for (const pod of pods) {
      assert.equal(sidecar(pod), expectedPlacement(version), pod.metadata?.name);
      assert.match(pod.metadata?.generateName ?? '', /^web-[a-z0-9]+-$/);
    }
  });

  it(`helm upgrade --set proxy.image.tag reaches the next Pod (target ${LIVE_CHANGE_TARGET_MS / 1000} s)`, async (t: TestContext) => {
    assert.ok(release !== undefined);
    await helmInstall(plane(), release, { proxy: { image: { tag: 'v1.99.0' } } }, { upgrade: true });
    await followLiveChange(t, 'the new Envoy image in a dry-run Pod', performance.now(), async () => {
      const pod = await create(ns.enabled, plainPod(probeName('tag')), 'All');
      return envoyImage(pod) === 'envoyproxy/envoy:v1.99.0' ? true : undefined;
    });
  });

  it("a Pod another mesh injected (Istio, Linkerd, Kuma, Consul) or with its own envoy is stored as written, not labeled injected (issue 50)", async () => {
    const fixtures = parseYamlDocuments(repoFile('test/fixtures/other-mesh-pods.yaml')).filter(isJsonObject);
    const names = (pod: V1Pod): string[][] => [pod.spec?.containers.map((container) => container.name) ?? [], pod.spec?.initContainers?.map((container) => container.name) ?? []];
    for (const fixture of fixtures) {
      const written = fixture as unknown as V1Pod;
      const expect = written.metadata?.annotations?.['envoy-injector.example/expect'];
      const stored = await create(ns.enabled, { ...written, metadata: { ...written.metadata, name: probeName('mesh') } }, 'All');
      const title = `${String(written.metadata?.name)} (expects ${String(expect)})`;
      if (expect === 'inject') {
        assert.notEqual(sidecar(stored), 'none', `${title}: injected`);
        continue;
      }
      assert.equal(stored.metadata?.annotations?.['envoy-injector.io/status'], undefined, `${title}: no status`);
      assert.equal(stored.metadata?.labels?.['envoy-injector.io/injected'], undefined, `${title}: not labeled injected`);
      assert.deepEqual(names(stored), names(written), `${title}: its containers as written`);
    }
  });

  it(`labeling a namespace enabled is followed (target ${LIVE_CHANGE_TARGET_MS / 1000} s)`, async (t: TestContext) => {
    assert.equal(sidecar(await create(ns.later, plainPod('before-label'), 'All')), 'none');
    await core().patchNamespace({ name: ns.later, body: [{ op: 'add', path: '/metadata/labels/envoy-injector.io~1inject', value: 'enabled' }] });
    await followLiveChange(t, 'a Pod of the newly enabled namespace injected', performance.now(), async () => {
      const pod = await create(ns.later, plainPod(probeName('label')), 'All');
      return sidecar(pod) === 'none' ? undefined : true;
    });
  });

  it('an invalid template, then a deleted ConfigMap: the last good template keeps serving', async () => {
    assert.ok(release !== undefined && injector !== undefined);
    const running = injector;
    const name = injector.env['TEMPLATE_CONFIGMAP'] ?? 'envoy-initializer';
    await core().patchNamespacedConfigMap({
      name,
      namespace: release.namespace,
      body: [{ op: 'replace', path: '/data/config', value: 'containers: [{name: envoy, image: "e:2", ports: [{containerPort: 99999}]}]\n' }],
    });
    await eventually('the injector to reject the invalid template', async () => (running.logs.some((line) => String(line['msg']).startsWith('invalid sidecar template')) ? true : undefined), 10_000);
    assert.equal(envoyImage(await create(ns.enabled, plainPod('after-invalid'))), 'envoyproxy/envoy:v1.99.0');

    await core().deleteNamespacedConfigMap({ name, namespace: release.namespace });
    await eventually('the injector to see the ConfigMap deleted', async () => (running.logs.some((line) => String(line['msg']).includes('was deleted; keeping the last good')) ? true : undefined), 10_000);
    assert.equal(envoyImage(await create(ns.enabled, plainPod('after-delete'))), 'envoyproxy/envoy:v1.99.0');
  });

  it('a Pod near the API server\'s size limit (~1 MiB of spec) is injected and stored', async () => {
    const big = largePod() as V1Pod;
    big.metadata = { name: 'big', labels: { app: 'big' } };
    assert.ok(JSON.stringify(big).length > 1_000_000);
    await create(ns.enabled, big);
    const stored = await core().readNamespacedPod({ name: 'big', namespace: ns.enabled });
    assert.equal(sidecar(stored), expectedPlacement(version));
    assert.equal(stored.spec?.containers.filter((container) => container.name.startsWith('app-')).length, 40);
  });

  it('nothing the injector asked the API server was forbidden (no 403 in its log)', () => {
    assert.ok(injector !== undefined);
    assert.deepEqual(forbiddenLines(injector), []);
    assert.ok(injector.logs.length > 0, 'the log was captured');
  });

  it('helm uninstall: the webhook configuration is gone and Pods are admitted untouched', async () => {
    assert.ok(release !== undefined && injector !== undefined);
    const webhookName = injector.env['WEBHOOK_CONFIG_NAME'] ?? '';
    await helmUninstall(plane(), release);
    release = undefined;
    const gone = await plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api).readMutatingWebhookConfiguration({ name: webhookName }).then(() => false, (error: { code?: number }) => error.code === 404);
    assert.ok(gone, `MutatingWebhookConfiguration ${webhookName} is deleted`);
    const pod = await create(ns.enabled, plainPod('after-uninstall'));
    assert.equal(sidecar(pod), 'none');
  });
});
