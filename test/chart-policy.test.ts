import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import type { JsonObject } from '../src/injection/index.js';
import { CHART_DIR, ensureHelm, helm, KUBE_VERSION, NAMESPACE, only, RELEASE, renderChart, valuesArgs, type Manifest } from './helpers/helm.js';

/**
 * What `helm template` is told to stand for a live cluster: discovery lists
 * kinds (`apps/v1/Deployment`), which helm's offline defaults never do.
 */
const LIVE_CLUSTER = 'apps/v1/Deployment';
const V1_API = 'admissionregistration.k8s.io/v1/MutatingAdmissionPolicyBinding';
const V1BETA1_API = 'admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicyBinding';
/** The policy and its binding are cluster-scoped: their name carries the release namespace. */
const POLICY_NAME_OF_RELEASE = `${RELEASE}-envoy-injector-${NAMESPACE}`;

function container(manifests: readonly Manifest[]): JsonObject {
  const deployment = only(manifests, 'Deployment');
  const podSpec = ((deployment['spec'] as JsonObject)['template'] as JsonObject)['spec'] as JsonObject;
  return (podSpec['containers'] as JsonObject[])[0] as JsonObject;
}

function env(manifests: readonly Manifest[]): Record<string, string | undefined> {
  return Object.fromEntries((container(manifests)['env'] as JsonObject[]).map((variable) => [String(variable['name']), variable['value'] as string | undefined]));
}

describe('Helm chart, mode: policy', { timeout: 120_000 }, () => {
  let manifests: Manifest[] = [];
  before(async () => {
    await ensureHelm();
    manifests = await renderChart({ mode: 'policy', excludedNamespaces: ['legacy'] }, { apiVersions: [LIVE_CLUSTER, V1_API] });
  });

  it('installs no webhook configuration, Service or certificate, and no admission policy object: the injector makes those', () => {
    const kinds = manifests.map((manifest) => manifest.kind).sort();
    assert.deepEqual(kinds, ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'Deployment', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'ServiceAccount']);
  });

  it('RBAC: the template ConfigMap, this release\'s policy and binding by name, and its own ClusterRole (the owner), nothing else', () => {
    assert.deepEqual(only(manifests, 'ClusterRole')['rules'], [
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'], resourceNames: [POLICY_NAME_OF_RELEASE], verbs: ['get', 'create', 'patch'] },
      { apiGroups: ['rbac.authorization.k8s.io'], resources: ['clusterroles'], resourceNames: [POLICY_NAME_OF_RELEASE], verbs: ['get'] },
    ]);
    assert.equal(only(manifests, 'ClusterRole').metadata.name, POLICY_NAME_OF_RELEASE, 'the ClusterRole the policy names as its owner');
    assert.deepEqual(only(manifests, 'Role')['rules'], [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['envoy-initializer'], verbs: ['get', 'list', 'watch'] }]);
  });

  it('runs the injector in policy mode, probed over plain HTTP, without certificates', () => {
    const variables = env(manifests);
    assert.equal(variables['MODE'], 'policy');
    assert.equal(variables['POLICY_NAME'], POLICY_NAME_OF_RELEASE);
    assert.equal(variables['FAILURE_POLICY'], 'Fail');
    assert.equal(variables['POLICY_API_VERSION'], 'auto');
    assert.equal(variables['POLICY_OWNER'], POLICY_NAME_OF_RELEASE);
    for (const name of ['CERT_MODE', 'CERT_SECRET', 'TLS_CERT_FILE', 'WEBHOOK_CONFIG_NAME']) assert.equal(name in variables, false, `${name} is not set`);
    const main = container(manifests);
    assert.deepEqual(main['ports'], [{ name: 'http', containerPort: 8443, protocol: 'TCP' }]);
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      const httpGet = (main[probe] as JsonObject)['httpGet'] as JsonObject;
      assert.equal(httpGet['scheme'], 'HTTP');
      assert.equal(httpGet['port'], 'http');
    }
    assert.deepEqual((main['volumeMounts'] as JsonObject[]).map((mount) => mount['name']), ['tmp']);
  });

  it('webhook.failurePolicy becomes the policy\'s', async () => {
    const ignore = await renderChart({ mode: 'policy', webhook: { failurePolicy: 'Ignore' } }, { apiVersions: [LIVE_CLUSTER, V1_API] });
    assert.equal(env(ignore)['FAILURE_POLICY'], 'Ignore');
  });

  const render = async (values: Record<string, unknown>, apiVersions: readonly string[]) =>
    helm(['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...apiVersions.flatMap((api) => ['--api-versions', api]), ...(await valuesArgs(values))]);

  it('installs on a cluster that serves v1 only, v1beta1 only, or both; and with helm template offline', async () => {
    for (const apis of [[LIVE_CLUSTER, V1_API], [LIVE_CLUSTER, V1BETA1_API], [LIVE_CLUSTER, V1_API, V1BETA1_API], []]) {
      const result = await render({ mode: 'policy' }, apis);
      assert.equal(result.code, 0, `${apis.join(' ') || 'offline'}: ${result.stderr}`);
    }
  });

  it('refuses a cluster that serves neither version, saying what 1.34-1.35 need and that 1.36 needs nothing', async () => {
    const result = await render({ mode: 'policy' }, [LIVE_CLUSTER]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /mode: policy needs the MutatingAdmissionPolicy API, which this cluster does not serve/);
    assert.match(result.stderr, /Kubernetes 1\.36\+ serves admissionregistration\.k8s\.io\/v1 with no flag/);
    assert.match(result.stderr, /1\.34-1\.35 the API server needs --feature-gates=MutatingAdmissionPolicy=true and --runtime-config=admissionregistration\.k8s\.io\/v1beta1=true/);
  });

  it('policy.apiVersion: passed to the injector, and refused when the cluster does not serve it', async () => {
    assert.equal(env(await renderChart({ mode: 'policy', policy: { apiVersion: 'v1beta1' } }, { apiVersions: [LIVE_CLUSTER, V1BETA1_API] }))['POLICY_API_VERSION'], 'v1beta1');
    const refused = await render({ mode: 'policy', policy: { apiVersion: 'v1beta1' } }, [LIVE_CLUSTER, V1_API]);
    assert.notEqual(refused.code, 0);
    assert.match(refused.stderr, /policy\.apiVersion: v1beta1, but this cluster does not serve admissionregistration\.k8s\.io\/v1beta1/);
    const typo = await render({ mode: 'policy', policy: { apiVersion: 'v2' } }, []);
    assert.notEqual(typo.code, 0);
  });

  it('webhook mode is unchanged by the API being served', async () => {
    const webhook = await renderChart({}, { apiVersions: [LIVE_CLUSTER, V1_API] });
    assert.equal(webhook.some((manifest) => manifest.kind === 'MutatingAdmissionPolicyBinding'), false);
    assert.equal(only(webhook, 'MutatingWebhookConfiguration').kind, 'MutatingWebhookConfiguration');
  });

  it('the schema refuses another mode', async () => {
    const result = await helm(['template', RELEASE, CHART_DIR, '--set', 'mode=sidecarless']);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /mode/);
  });
});
