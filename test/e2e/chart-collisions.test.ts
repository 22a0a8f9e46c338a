import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, it } from 'node:test';
import { AdmissionregistrationV1Api, AppsV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { CHART_DIR } from '../helpers/helm.js';
import { forEachKubeVersion } from './control-plane.js';
import { eventually, helmInstall, helmUninstall, readBack, uniqueName, webhookNames, type Release } from './cluster.js';
import { forbiddenLines, startChartInjector, waitReady, type ChartInjector } from './injector-process.js';

const CLUSTER_SCOPED = ['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration'];

/**
 * The chart as it was before cluster-scoped objects took the namespace in
 * their name (`<fullname>`) and before each release's webhooks had names of
 * their own (`<purpose>.envoy-injector.io`): this chart with every use of
 * those names put back, in a temporary directory.
 */
async function formerChart(): Promise<string> {
  const chart = join(await mkdtemp(join(tmpdir(), 'ei-former-chart-')), 'envoy-injector');
  await cp(CHART_DIR, chart, { recursive: true });
  const templates = join(chart, 'templates');
  for (const file of await readdir(templates)) {
    const path = join(templates, file);
    const text = await readFile(path, 'utf8');
    await writeFile(path, text.replaceAll('include "envoy-injector.clusterScopedName"', 'include "envoy-injector.fullname"').replaceAll('{{ $webhook }}.{{ $nameSuffix }}', '{{ $webhook }}.envoy-injector.io'));
  }
  return chart;
}

/** Kind → name of RELEASE's cluster-scoped objects, as helm installed them. */
function clusterScopedNames(release: Release): Record<string, string> {
  return Object.fromEntries(release.manifests.filter((manifest) => CLUSTER_SCOPED.includes(manifest.kind)).map((manifest) => [manifest.kind, manifest.metadata.name]));
}

const sameName = (name: string): Record<string, string> => Object.fromEntries(CLUSTER_SCOPED.map((kind) => [kind, name]));

/** Chart installs that must not step on each other, and an upgrade that must not scale the injector down. */
forEachKubeVersion('chart releases side by side, and upgrades', (plane) => {
  const releases: Release[] = [];
  const install = async (...args: Parameters<typeof helmInstall> extends [unknown, ...infer Rest] ? Rest : never): Promise<Release> => {
    const release = await helmInstall(plane(), ...args);
    releases.push(release);
    return release;
  };
  const injectors: ChartInjector[] = [];
  const temporary: string[] = [];
  after(async () => {
    for (const injector of injectors.splice(0)) await injector.stop().catch(() => undefined);
    for (const release of releases.splice(0)) await helmUninstall(plane(), release).catch(() => undefined);
    for (const path of temporary.splice(0)) await rm(path, { recursive: true, force: true });
  });

  it('one release name in two namespaces: both install, each with its own cluster-scoped objects', async () => {
    const name = uniqueName('twin');
    const [a, b] = [await install({ name, namespace: uniqueName('twin-a') }), await install({ name, namespace: uniqueName('twin-b') })];
    const rbac = plane().kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const release of [a, b]) {
      const role = release.manifests.find((manifest) => manifest.kind === 'ClusterRole');
      assert.ok(role !== undefined);
      const stored = await rbac.readClusterRole({ name: role.metadata.name });
      assert.equal(stored.metadata?.annotations?.['meta.helm.sh/release-namespace'], release.namespace, `ClusterRole ${role.metadata.name} is ${release.namespace}'s`);
    }
  });

  it('a second release in one namespace: refused, naming the shared ConfigMap and the value to change', async () => {
    const namespace = uniqueName('shared');
    const first = await install({ name: uniqueName('first'), namespace });
    const second = uniqueName('second');
    await assert.rejects(install({ name: second, namespace }), (error: Error) => {
      assert.match(error.message, new RegExp(`ConfigMap ${namespace}/envoy-initializer already exists and belongs to release ${first.name}: .*set templates\\.configMapName to another name for release ${second}`));
      return true;
    });
    await install({ name: second, namespace }, { templates: { configMapName: 'second-templates' } });
  });

  it('turning the HPA on in an upgrade keeps the running replicas', async () => {
    const release = await install({ name: uniqueName('scale'), namespace: uniqueName('scale') }, { replicaCount: 3 });
    const deployment = release.manifests.find((manifest) => manifest.kind === 'Deployment');
    assert.ok(deployment !== undefined);
    const apps = plane().kubeConfig.makeApiClient(AppsV1Api);
    const replicas = async () => (await apps.readNamespacedDeployment({ name: deployment.metadata.name, namespace: release.namespace })).spec?.replicas;
    assert.equal(await replicas(), 3);
    await helmInstall(plane(), release, { autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 5 } }, { upgrade: true });
    assert.equal(await replicas(), 3, 'not reset to 1 (nor to minReplicas) by the upgrade');
  });

  it('an upgrade from a release with the former names keeps them: the webhook configuration and its caBundle stay, no duplicate is made', async () => {
    const chart = await formerChart();
    temporary.push(join(chart, '..'));
    const admission = plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const caBundles = async (name: string) => (await admission.readMutatingWebhookConfiguration({ name })).webhooks?.map((webhook) => webhook.clientConfig.caBundle ?? '');
    const start = async (release: Release) => {
      const injector = await startChartInjector(plane(), release, { listen: { host: '127.0.0.1', port: 0 } });
      injectors.push(injector);
      return injector;
    };

    const name = uniqueName('former');
    const former = await install({ name, namespace: uniqueName('former') }, {}, { chart });
    const fullname = former.manifests.find((manifest) => manifest.kind === 'Service')?.metadata.name ?? '';
    assert.deepEqual(clusterScopedNames(former), sameName(fullname), 'the former chart names them <fullname>');
    // Its replica fills the caBundle on first start, as in the cluster being upgraded.
    const first = await start(former);
    const bundles = await eventually(`a caBundle in MutatingWebhookConfiguration ${fullname}`, async () => {
      const found = await caBundles(fullname);
      return found !== undefined && found.length > 0 && found.every((bundle) => bundle !== '') ? found : undefined;
    }, 30_000);
    await first.stop();

    // The same name in another namespace: the <fullname> objects are not its own, so it takes the new names.
    const twin = await install({ name, namespace: uniqueName('former-twin') });
    assert.deepEqual(clusterScopedNames(twin), sameName(`${fullname}-${twin.namespace}`));

    const formerWebhooks = ['enabled-namespaces', 'opted-in-pods', 'other-pods'].map((purpose) => `${purpose}.envoy-injector.io`);
    assert.deepEqual(webhookNames(former), formerWebhooks);
    const upgraded = await helmInstall(plane(), former, {}, { upgrade: true });
    assert.deepEqual(clusterScopedNames(upgraded), sameName(fullname), 'the upgrade keeps the former names');
    // Renaming them would drop entries whose caBundle the injector co-owns: Helm 4's server-side apply refuses that.
    assert.deepEqual(webhookNames(upgraded), formerWebhooks, 'and the former webhook names');
    assert.deepEqual(webhookNames(twin), ['enabled-namespaces', 'opted-in-pods', 'other-pods'].map((purpose) => `${purpose}.${fullname}-${twin.namespace}.envoy-injector.io`), 'a new release names its own');
    assert.deepEqual(await caBundles(fullname), bundles, 'the webhook configuration kept its caBundle');
    for (const kind of CLUSTER_SCOPED) {
      const duplicate = await readBack(plane(), { apiVersion: kind === 'MutatingWebhookConfiguration' ? 'admissionregistration.k8s.io/v1' : 'rbac.authorization.k8s.io/v1', kind, metadata: { name: `${fullname}-${former.namespace}` } });
      assert.equal(duplicate, undefined, `no ${kind} ${fullname}-${former.namespace}`);
    }

    // The upgraded replica is told the name that exists and may read and patch it.
    const second = await start(upgraded);
    assert.equal(second.env['WEBHOOK_CONFIG_NAME'], fullname);
    await waitReady(second, 'the upgraded injector ready (its CA in the caBundle it reads)');
    assert.deepEqual(forbiddenLines(second), []);
  });
});
