import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { ApiextensionsV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi, KubernetesObjectApi, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { parseTemplateData } from '../../src/injection/index.js';
import { runStatusCli } from '../helpers/fleet-fixture.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, envoyImage, eventually, helmInstall, helmUninstall, plainPod, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { guideRbac } from './fleet-rbac.js';

interface StatusJson {
  workloads: { namespace: string; apiVersion: string; kind: string; name: string; current: number; outdated: number; notInjected: number }[];
  totals: { pods: number; current: number; outdated: number; notInjected: number; unknown?: number; copied?: number; tcpProbes?: number; proxyProtocol?: number; tproxy?: number };
  restart?: { restarted: { kind: string; name: string }[]; notRestartable: { apiVersion: string; kind: string; name: string; why: string }[] };
}

const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

/** A Deployment kind in another group, as OpenKruise and others have: only so that an owner of that group can exist. */
const EXAMPLE_DEPLOYMENT_CRD = {
  metadata: { name: 'deployments.example.com' },
  spec: {
    group: 'example.com',
    scope: 'Namespaced',
    names: { plural: 'deployments', singular: 'deployment', kind: 'Deployment', listKind: 'DeploymentList' },
    versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }],
  },
};

/** Which of the namespace's workloads `status` reports, as `Kind/name current/outdated/notInjected`. */
function rows(report: StatusJson, namespace: string): string[] {
  return report.workloads.filter((workload) => workload.namespace === namespace).map((w) => `${w.kind}/${w.name} ${w.current}/${w.outdated}/${w.notInjected}`);
}

forEachKubeVersion('envoy-injector status and --restart against the API server and its controllers', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const ns = { enabled: uniqueName('fleet'), disabled: uniqueName('fleet-off'), users: uniqueName('fleet-users'), many: uniqueName('fleet-many'), kinds: uniqueName('fleet-kinds'), copied: uniqueName('fleet-copied') };
  // Who may list Pods (and StatefulSets) in ns.kinds only, and read the templates: no get on namespaces.
  const namespaceReader = uniqueName('ns-reader');
  const reader = uniqueName('status-reader');
  const restarter = uniqueName('status-restarter');
  const kubeconfigs = { reader: '', restarter: '', namespaceReader: '' };
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const apps = () => plane().kubeConfig.makeApiClient(AppsV1Api);
  const podsOf = async (namespace: string): Promise<V1Pod[]> => (await core().listNamespacedPod({ namespace })).items.filter((pod) => pod.metadata?.deletionTimestamp === undefined);
  const status = (who: 'reader' | 'restarter' | 'namespaceReader', args: string[], stdin?: string) =>
    runStatusCli(['--kubeconfig', kubeconfigs[who], '--injector-namespace', release?.namespace ?? '', ...args], stdin === undefined ? {} : { stdin });
  const statusJson = async (args: string[]) => {
    const result = await status('reader', [...args, '-o', 'json']);
    assert.ok(result.code === 0 || result.code === 3, `status ${args.join(' ')}: exit ${result.code}: ${result.stderr}`);
    return { code: result.code, report: JSON.parse(result.stdout) as StatusJson };
  };
  /** Until every Pod of the namespace is created and injected with IMAGE (or none, for the disabled one). */
  const settled = (namespace: string, count: number, image?: string) =>
    eventually(`${count} Pods in ${namespace}${image === undefined ? '' : ` with ${image}`}`, async () => {
      const pods = await podsOf(namespace);
      return pods.length === count && (image === undefined || pods.every((pod) => envoyImage(pod) === image)) ? pods : undefined;
    }, 60_000, 250);

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('fleet'), namespace: uniqueName('fleet-system') }, { proxy: { image: { tag: 'v1.39.0' } } });
    await Promise.all([
      createNamespace(plane(), ns.enabled, { 'envoy-injector.io/inject': 'enabled' }),
      createNamespace(plane(), ns.disabled, { 'envoy-injector.io/inject': 'disabled' }),
      createNamespace(plane(), ns.users),
      createNamespace(plane(), ns.many),
      createNamespace(plane(), ns.kinds, { 'envoy-injector.io/inject': 'enabled' }),
      createNamespace(plane(), ns.copied, { 'envoy-injector.io/inject': 'enabled' }),
    ]);
    injector = await startChartInjector(plane(), release);
    await eventually('a first Pod injected through the API server', async () => {
      const pod = await core().createNamespacedPod({ namespace: ns.enabled, body: plainPod('warmup'), dryRun: 'All' });
      return envoyImage(pod) === undefined ? undefined : true;
    }, 30_000, 200);

    // Two users: one with the guide's read rules, one with the restart rules as well.
    const objects = KubernetesObjectApi.makeApiClient(plane().kubeConfig);
    const rbac = plane().kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const object of guideRbac(release.namespace)) {
      const named = { ...object, metadata: { ...object.metadata, name: `${object.metadata?.name ?? ''}-${ns.users}` } };
      await objects.create(named);
    }
    for (const [user, roles] of [[reader, ['envoy-injector-status']], [restarter, ['envoy-injector-status', 'envoy-injector-restart']]] as const) {
      await core().createNamespacedServiceAccount({ namespace: ns.users, body: { metadata: { name: user } } });
      for (const role of roles) {
        await rbac.createClusterRoleBinding({
          body: { metadata: { name: `${role}-${user}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${role}-${ns.users}` }, subjects: [{ kind: 'ServiceAccount', name: user, namespace: ns.users }] },
        });
      }
      await rbac.createNamespacedRoleBinding({
        namespace: release.namespace,
        body: { metadata: { name: `status-${user}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `envoy-injector-status-${ns.users}` }, subjects: [{ kind: 'ServiceAccount', name: user, namespace: ns.users }] },
      });
    }
    // Only what status -n truly needs in ns.kinds: its Pods, and the outdated StatefulSet's kind; no namespaces.
    await core().createNamespacedServiceAccount({ namespace: ns.users, body: { metadata: { name: namespaceReader } } });
    await rbac.createNamespacedRole({ namespace: ns.kinds, body: { metadata: { name: 'status-pods' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }, { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['list'] }] } });
    for (const [namespace, kind, name] of [[ns.kinds, 'Role', 'status-pods'], [release.namespace, 'Role', `envoy-injector-status-${ns.users}`]] as const) {
      await rbac.createNamespacedRoleBinding({ namespace, body: { metadata: { name: `status-${namespaceReader}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind, name }, subjects: [{ kind: 'ServiceAccount', name: namespaceReader, namespace: ns.users }] } });
    }
    kubeconfigs.namespaceReader = await plane().serviceAccountKubeconfig(ns.users, namespaceReader);
    kubeconfigs.reader = await plane().serviceAccountKubeconfig(ns.users, reader);
    kubeconfigs.restarter = await plane().serviceAccountKubeconfig(ns.users, restarter);

    // The fleet, injected with the first template.
    const labels = (app: string) => ({ app });
    const template = (app: string) => ({ metadata: { labels: labels(app) }, spec: { containers: [{ name: app, image: `registry.example/${app}:1` }] } });
    // Recreate, and one StatefulSet replica: without a kubelet no Pod ever becomes ready, so a rolling update would stop after its first new Pod.
    await apps().createNamespacedDeployment({ namespace: ns.enabled, body: { metadata: { name: 'web' }, spec: { replicas: 2, strategy: { type: 'Recreate' }, selector: { matchLabels: labels('web') }, template: template('web') } } });
    await apps().createNamespacedStatefulSet({ namespace: ns.enabled, body: { metadata: { name: 'db' }, spec: { replicas: 1, serviceName: 'db', podManagementPolicy: 'Parallel', selector: { matchLabels: labels('db') }, template: template('db') } } });
    await core().createNamespacedPod({ namespace: ns.enabled, body: plainPod('solo') });
    await core().createNamespacedPod({ namespace: ns.disabled, body: plainPod('untouched') });
    await settled(ns.enabled, 4, 'envoyproxy/envoy:v1.39.0');
    await settled(ns.disabled, 1);

    // ns.kinds: a Pod owned by example.com/v1 Deployment web beside an apps/v1 Deployment web (no Pods), and an OnDelete StatefulSet.
    // The owner exists (a CRD and its object, uid and all), so the garbage collector keeps the Pod.
    await plane().kubeConfig.makeApiClient(ApiextensionsV1Api).createCustomResourceDefinition({ body: EXAMPLE_DEPLOYMENT_CRD });
    const foreign = await eventually('the example.com Deployment CRD established', () =>
      plane().kubeConfig.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ group: 'example.com', version: 'v1', namespace: ns.kinds, plural: 'deployments', body: { apiVersion: 'example.com/v1', kind: 'Deployment', metadata: { name: 'web' } } })
        .then((created) => created as KubernetesObject, () => undefined), 30_000, 250);
    await apps().createNamespacedDeployment({ namespace: ns.kinds, body: { metadata: { name: 'web' }, spec: { replicas: 0, selector: { matchLabels: labels('web') }, template: template('web') } } });
    await core().createNamespacedPod({ namespace: ns.kinds, body: { ...plainPod('web-foreign'), metadata: { name: 'web-foreign', ownerReferences: [{ apiVersion: 'example.com/v1', kind: 'Deployment', name: 'web', uid: foreign.metadata?.uid ?? '', controller: true }] } } });
    await apps().createNamespacedStatefulSet({ namespace: ns.kinds, body: { metadata: { name: 'ondel' }, spec: { replicas: 1, serviceName: 'ondel', updateStrategy: { type: 'OnDelete' }, selector: { matchLabels: labels('ondel') }, template: template('ondel') } } });
    await settled(ns.kinds, 2, 'envoyproxy/envoy:v1.39.0');
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), Object.values(ns));
    await plane().kubeConfig.makeApiClient(ApiextensionsV1Api).deleteCustomResourceDefinition({ name: EXAMPLE_DEPLOYMENT_CRD.metadata.name }).catch(() => undefined);
    const rbac = plane().kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const name of ['envoy-injector-status', 'envoy-injector-restart', 'envoy-injector-resize']) await rbac.deleteClusterRole({ name: `${name}-${ns.users}` }).catch(() => undefined);
    for (const name of [`envoy-injector-status-${reader}`, `envoy-injector-status-${restarter}`, `envoy-injector-restart-${restarter}`]) await rbac.deleteClusterRoleBinding({ name }).catch(() => undefined);
  });

  it('before any change: every injected Pod is current (exit 0), the disabled namespace has nothing to report', async () => {
    const { code, report } = await statusJson(['-n', ns.enabled]);
    assert.equal(code, 0);
    assert.deepEqual(rows(report, ns.enabled), ['Deployment/web 2/0/0', 'Pod/solo 1/0/0', 'StatefulSet/db 1/0/0']);
    const disabled = await statusJson(['-n', ns.disabled]);
    assert.equal(disabled.code, 0);
    assert.deepEqual(disabled.report.workloads, []);
  });

  it('after a template change: the old Pods are outdated, a Pod made since is current, exit 3 (one namespace and all)', async () => {
    assert.ok(release !== undefined);
    await helmInstall(plane(), release, { proxy: { image: { tag: 'v1.39.1' } } }, { upgrade: true });
    await eventually('the new template in a dry-run Pod', async () => {
      const pod = await core().createNamespacedPod({ namespace: ns.enabled, body: plainPod('probe'), dryRun: 'All' });
      return envoyImage(pod) === 'envoyproxy/envoy:v1.39.1' ? true : undefined;
    });
    await core().createNamespacedPod({ namespace: ns.enabled, body: plainPod('late') });
    const expected = ['Deployment/web 0/2/0', 'Pod/late 1/0/0', 'Pod/solo 0/1/0', 'StatefulSet/db 0/1/0'];
    const { code, report } = await statusJson(['-n', ns.enabled]);
    assert.equal(code, 3);
    assert.deepEqual(rows(report, ns.enabled), expected);
    // Cluster-wide, with the guide's ClusterRole: the same rows (other tests' namespaces may add theirs).
    const everywhere = await statusJson([]);
    assert.equal(everywhere.code, 3);
    assert.deepEqual(rows(everywhere.report, ns.enabled), expected);
    assert.deepEqual(rows(everywhere.report, ns.disabled), []);
    const table = await status('reader', ['-n', ns.enabled]);
    assert.equal(table.code, 3);
    assert.match(table.stdout, /--restart would restart: Deployment \S+\/web, StatefulSet \S+\/db\./);
  });

  it('another group\'s Deployment and an OnDelete StatefulSet: listed to recreate by hand with why, nothing patched, no ControllerRevision added', async () => {
    const revisions = async () => (await apps().listNamespacedControllerRevision({ namespace: ns.kinds })).items.length;
    const before = { web: await apps().readNamespacedDeployment({ name: 'web', namespace: ns.kinds }), ondel: await apps().readNamespacedStatefulSet({ name: 'ondel', namespace: ns.kinds }), revisions: await revisions() };
    const result = await status('restarter', ['-n', ns.kinds, '--restart', '--yes', '-o', 'json']);
    assert.equal(result.code, 3, result.stderr);
    const { restart, workloads } = JSON.parse(result.stdout) as StatusJson;
    assert.deepEqual(workloads.map((w) => `${w.apiVersion} ${w.kind}/${w.name} ${w.outdated}`), ['example.com/v1 Deployment/web 1', 'apps/v1 StatefulSet/ondel 1']);
    assert.deepEqual(restart?.restarted, []);
    assert.deepEqual(restart?.notRestartable.map((ref) => `${ref.apiVersion} ${ref.kind}/${ref.name}: ${ref.why}`), [
      'example.com/v1 Deployment/web: not an apps/v1 workload',
      'apps/v1 StatefulSet/ondel: updateStrategy OnDelete: a restart changes no Pod',
    ]);
    const web = await apps().readNamespacedDeployment({ name: 'web', namespace: ns.kinds });
    const ondel = await apps().readNamespacedStatefulSet({ name: 'ondel', namespace: ns.kinds });
    assert.equal(web.metadata?.resourceVersion, before.web.metadata?.resourceVersion, 'apps/v1 Deployment web is not restarted for another group\'s');
    assert.equal(ondel.metadata?.generation, before.ondel.metadata?.generation, 'the OnDelete StatefulSet is not patched');
    assert.equal(await revisions(), before.revisions, 'no ControllerRevision added');
    const table = await status('restarter', ['-n', ns.kinds, '--restart', '--dry-run']);
    assert.match(table.stdout, /Not restarted \(not an apps\/v1 workload; recreate them by hand\): Deployment\.example\.com \S+\/web \(group example\.com\)\./);
  });

  it('status -n NS with list pods in NS only (no get namespaces): a note naming the namespace and the permission, the report, exit 3', async () => {
    const result = await status('namespaceReader', ['-n', ns.kinds, '-o', 'json']);
    assert.equal(result.code, 3, result.stderr);
    const notes = result.stderr.split('\n').filter((line) => line !== '');
    assert.equal(notes.length, 1, result.stderr);
    assert.match(notes[0] ?? '', new RegExp(`^envoy-injector: note: no permission to get namespace ${ns.kinds} \\(HTTP 403: .*cannot get resource "namespaces".*\\): its labels are unknown`));
    const report = JSON.parse(result.stdout) as StatusJson;
    assert.deepEqual(report.totals, { pods: 2, current: 0, outdated: 2, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
  });

  it('--restart --dry-run changes nothing; without patch permission each restart fails with a 403 (exit 1)', async () => {
    const before = await Promise.all([apps().readNamespacedDeployment({ name: 'web', namespace: ns.enabled }), apps().readNamespacedStatefulSet({ name: 'db', namespace: ns.enabled })]);
    const dryRun = await status('reader', ['-n', ns.enabled, '--restart', '--dry-run']);
    assert.equal(dryRun.code, 3, dryRun.stderr);
    const after = await Promise.all([apps().readNamespacedDeployment({ name: 'web', namespace: ns.enabled }), apps().readNamespacedStatefulSet({ name: 'db', namespace: ns.enabled })]);
    assert.deepEqual(after.map((object) => object.metadata?.resourceVersion), before.map((object) => object.metadata?.resourceVersion));
    const forbidden = await status('reader', ['-n', ns.enabled, '--restart', '--yes']);
    assert.equal(forbidden.code, 1);
    assert.match(forbidden.stdout, /FAILED +Deployment \S+\/web: restarting Deployment \S+\/web: HTTP 403/);
  });

  it('--restart --yes patches the outdated Deployment and StatefulSet only; their new Pods are injected and reported current', async () => {
    const solo = await core().readNamespacedPod({ name: 'solo', namespace: ns.enabled });
    const result = await status('restarter', ['-n', ns.enabled, '--restart', '--yes', '-o', 'json']);
    assert.equal(result.code, 3, result.stderr);
    const { restart } = JSON.parse(result.stdout) as StatusJson;
    assert.deepEqual(restart?.restarted.map((ref) => `${ref.kind}/${ref.name}`), ['Deployment/web', 'StatefulSet/db']);
    assert.deepEqual(restart?.notRestartable.map((ref) => `${ref.kind}/${ref.name}`), ['Pod/solo']);
    const web = await apps().readNamespacedDeployment({ name: 'web', namespace: ns.enabled });
    const db = await apps().readNamespacedStatefulSet({ name: 'db', namespace: ns.enabled });
    assert.ok(web.spec?.template.metadata?.annotations?.[RESTARTED_AT]);
    assert.ok(db.spec?.template.metadata?.annotations?.[RESTARTED_AT]);
    const { report } = await eventually('the controllers to replace the outdated Pods', async () => {
      const seen = await statusJson(['-n', ns.enabled]);
      return rows(seen.report, ns.enabled).join() === ['Deployment/web 2/0/0', 'Pod/late 1/0/0', 'Pod/solo 0/1/0', 'StatefulSet/db 1/0/0'].join() ? seen : undefined;
    }, 60_000, 500);
    assert.equal(report.totals.outdated, 1, 'only the bare Pod is left outdated');
    const soloAfter = await core().readNamespacedPod({ name: 'solo', namespace: ns.enabled });
    assert.equal(soloAfter.metadata?.uid, solo.metadata?.uid, 'the bare Pod was not touched');
    assert.equal(envoyImage((await settled(ns.enabled, 5)).find((pod) => pod.metadata?.name?.startsWith('web-')) ?? {}), 'envoyproxy/envoy:v1.39.1');
    await core().deleteNamespacedPod({ name: 'solo', namespace: ns.enabled });
    const { code } = await eventually('the bare Pod gone', async () => {
      const seen = await statusJson(['-n', ns.enabled]);
      return seen.report.totals.outdated === 0 ? seen : undefined;
    });
    assert.equal(code, 0, 'all current: exit 0');
  });

  it('1,200 stored Pods in pages of 500: each counted once, current or outdated by its hash', async () => {
    assert.ok(release !== undefined);
    const configMap = await core().readNamespacedConfigMap({ name: 'envoy-initializer', namespace: release.namespace });
    const live = parseTemplateData(configMap.data ?? {}).defaultTemplate.hash;
    const statusOf = (hash: string) => JSON.stringify({ template: 'config', hash, containers: ['envoy'], initContainers: [], volumes: [], imagePullSecrets: [] });
    // A namespace without the label: no webhook call, the Pods are stored as sent (no kubelet runs them), the container their status names with them.
    const withEnvoy = (pod: V1Pod): V1Pod => ({ ...pod, spec: { containers: [...(pod.spec?.containers ?? []), { name: 'envoy', image: 'envoyproxy/envoy:v1.39.0' }] } });
    const names = Array.from({ length: 1200 }, (_, index) => `pod-${String(index).padStart(4, '0')}`);
    for (let start = 0; start < names.length; start += 40) {
      await Promise.all(names.slice(start, start + 40).map((name, offset) =>
        core().createNamespacedPod({ namespace: ns.many, body: withEnvoy(plainPod(name, { annotations: { 'envoy-injector.io/status': statusOf((start + offset) % 3 === 0 ? 'sha256:0000000000000000' : live) } })) }),
      ));
    }
    const { code, report } = await statusJson(['-n', ns.many, '--page-size', '500']);
    assert.equal(code, 3);
    assert.deepEqual(report.totals, { pods: 1200, current: 800, outdated: 400, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
    assert.deepEqual(new Set(report.workloads.map((workload) => workload.name)).size, 1200);
  });

  it("Pod templates copied from an injected Pod: their Pods start without the sidecar, and status counts them copied, with the marks to remove", async () => {
    assert.ok(release !== undefined);
    const configMap = await core().readNamespacedConfigMap({ name: 'envoy-initializer', namespace: release.namespace });
    const hash = parseTemplateData(configMap.data ?? {}).defaultTemplate.hash;
    // What a running injected Pod's YAML holds: the status naming the proxy, and (for "both") the label.
    const statusText = JSON.stringify({ template: 'config', hash, containers: ['envoy'], initContainers: [], volumes: [], imagePullSecrets: [] });
    const copy = (name: string, labels: Record<string, string>) => ({
      metadata: { name },
      spec: {
        replicas: 1,
        selector: { matchLabels: { app: name } },
        template: { metadata: { labels: { app: name, ...labels }, annotations: { 'envoy-injector.io/status': statusText } }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] } },
      },
    });
    await apps().createNamespacedDeployment({ namespace: ns.copied, body: copy('both', { 'envoy-injector.io/injected': 'true' }) });
    await apps().createNamespacedDeployment({ namespace: ns.copied, body: copy('status-only', {}) });
    const pods = await settled(ns.copied, 2);
    // The API server's objectSelector keeps "both" from the injector; the injector skips "status-only" (status_copied): neither gets the sidecar.
    assert.deepEqual(pods.map((pod) => `${pod.metadata?.labels?.['app']}: ${pod.spec?.containers.map((container) => container.name).join(',')}`).sort(), ['both: app', 'status-only: app']);
    const { code, report } = await statusJson(['-n', ns.copied]);
    assert.equal(code, 3, 'copied marks: exit 3');
    const copied = report.workloads as unknown as { name: string; current: number; notInjected: number; copied: number; copiedMarks: string[] }[];
    assert.deepEqual(copied.map((w) => `${w.name} ${w.current}/${w.notInjected}/${w.copied} ${w.copiedMarks.join(',')}`), ['both 0/0/1 injectedLabel,statusAnnotation', 'status-only 0/0/1 statusAnnotation']);
    const table = await status('reader', ['-n', ns.copied, '--restart', '--dry-run']);
    assert.match(table.stdout, new RegExp(`^Copied marks, no sidecar: Deployment ${ns.copied}/both \\(label envoy-injector\\.io/injected, annotation envoy-injector\\.io/status\\), Deployment ${ns.copied}/status-only \\(annotation envoy-injector\\.io/status\\)\\.`, 'm'));
    assert.match(table.stdout, /Nothing to restart/);
    assert.match(table.stdout, /Not restarted \(its Pod template carries a copied envoy-injector\.io\/status: remove it; recreate them by hand\)/);
  });
});
