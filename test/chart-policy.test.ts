import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { parseTemplateData, type JsonObject } from '../src/injection/index.js';
import { compilePolicy } from '../src/policy/compile-policy.js';
import { CHART_DIR, ensureHelm, helm, KUBE_VERSION, NAMESPACE, only, RELEASE, renderChart, valuesArgs, type Manifest } from './helpers/helm.js';

/** What `helm template` must be told a 1.34 cluster with the feature gate serves. */
const MAP_API = 'admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy';
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
    manifests = await renderChart({ mode: 'policy', excludedNamespaces: ['legacy'] }, { apiVersions: [MAP_API] });
  });

  it('installs no webhook configuration, Service or certificate, and the binding', () => {
    const kinds = manifests.map((manifest) => manifest.kind).sort();
    assert.deepEqual(kinds, ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'Deployment', 'MutatingAdmissionPolicyBinding', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'ServiceAccount']);
  });

  it('the binding is the one the compiler makes for the same settings', () => {
    const binding = only(manifests, 'MutatingAdmissionPolicyBinding');
    const configMap = only(manifests, 'ConfigMap');
    const templates = parseTemplateData(configMap['data'] as Record<string, string>);
    const compiled = compilePolicy(templates, { name: POLICY_NAME_OF_RELEASE, injectorNamespace: NAMESPACE, excludedNamespaces: ['legacy'] }).binding;
    assert.equal(binding.apiVersion, compiled['apiVersion']);
    assert.equal(binding.metadata.name, POLICY_NAME_OF_RELEASE);
    assert.deepEqual(binding['spec'], compiled['spec']);
  });

  it('RBAC: the template ConfigMap and this release\'s policy by name, nothing else', () => {
    assert.deepEqual(only(manifests, 'ClusterRole')['rules'], [
      { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingadmissionpolicies'], resourceNames: [POLICY_NAME_OF_RELEASE], verbs: ['get', 'create', 'patch'] },
    ]);
    assert.deepEqual(only(manifests, 'Role')['rules'], [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['envoy-initializer'], verbs: ['get', 'list', 'watch'] }]);
  });

  it('runs the injector in policy mode, probed over plain HTTP, without certificates', () => {
    const variables = env(manifests);
    assert.equal(variables['MODE'], 'policy');
    assert.equal(variables['POLICY_NAME'], POLICY_NAME_OF_RELEASE);
    assert.equal(variables['FAILURE_POLICY'], 'Fail');
    for (const name of ['CERT_MODE', 'CERT_SECRET', 'TLS_CERT_FILE', 'WEBHOOK_CONFIG_NAME']) assert.equal(name in variables, false, `${name} is not set`);
    const main = container(manifests);
    assert.deepEqual(main['ports'], [{ name: 'http', containerPort: 8443, protocol: 'TCP' }]);
    for (const probe of ['livenessProbe', 'readinessProbe']) {
      const httpGet = (main[probe] as JsonObject)['httpGet'] as JsonObject;
      assert.equal(httpGet['scheme'], 'HTTP');
      assert.equal(httpGet['port'], 'http');
    }
    assert.deepEqual((main['volumeMounts'] as JsonObject[]).map((mount) => mount['name']), ['tmp']);
  });

  it('webhook.failurePolicy becomes the policy\'s', async () => {
    const ignore = await renderChart({ mode: 'policy', webhook: { failurePolicy: 'Ignore' } }, { apiVersions: [MAP_API] });
    assert.equal(env(ignore)['FAILURE_POLICY'], 'Ignore');
  });

  it('refuses a cluster that does not serve the API, naming the API and the feature gate', async () => {
    const result = await helm(['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...(await valuesArgs({ mode: 'policy' }))]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /mode: policy needs the MutatingAdmissionPolicy API \(admissionregistration\.k8s\.io\/v1beta1\)/);
    assert.match(result.stderr, /--feature-gates=MutatingAdmissionPolicy=true/);
  });

  it('webhook mode is unchanged by the API being served', async () => {
    const webhook = await renderChart({}, { apiVersions: [MAP_API] });
    assert.equal(webhook.some((manifest) => manifest.kind === 'MutatingAdmissionPolicyBinding'), false);
    assert.equal(only(webhook, 'MutatingWebhookConfiguration').kind, 'MutatingWebhookConfiguration');
  });

  it('the schema refuses another mode', async () => {
    const result = await helm(['template', RELEASE, CHART_DIR, '--set', 'mode=sidecarless']);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /mode/);
  });
});
