import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseServeArgs } from '../src/commands/serve.js';
import { renderChart, type Manifest } from './helpers/helm.js';
import { schemaProblems } from './helpers/kube-schema.js';

/**
 * The chart's rollout by budget (docs/fleet.md): off by default, with none of
 * its RBAC; on, the Deployment's environment and exactly the rules the
 * controller calls (test/e2e/rollout.test.ts runs it as this ServiceAccount).
 */

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
const rulesOf = (manifests: readonly Manifest[], kind: 'ClusterRole' | 'Role'): Rule[] =>
  manifests.filter((manifest) => manifest.kind === kind && !manifest.metadata.name.includes('cni-agent')).flatMap((manifest) => (manifest as unknown as { rules?: Rule[] }).rules ?? []);
const grants = (rules: readonly Rule[]): string[] =>
  rules.flatMap((rule) => rule.resources.map((resource) => `${rule.apiGroups.join('')}/${resource}${rule.resourceNames === undefined ? '' : `[${rule.resourceNames.join(',')}]`}: ${rule.verbs.join(',')}`)).sort();
const env = (manifests: readonly Manifest[]): Record<string, string> => {
  const deployment = manifests.find((manifest) => manifest.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: { name: string; env: { name: string; value?: string }[] }[] } } } };
  const container = deployment.spec.template.spec.containers.find((entry) => entry.name === 'envoy-injector');
  return Object.fromEntries((container?.env ?? []).filter((variable) => variable.value !== undefined).map((variable) => [variable.name, variable.value ?? '']));
};

describe('chart: the rollout by budget', () => {
  it('off by default: no ROLLOUT variable, no Lease, Pod, ReplicaSet list or workload patch rule', async () => {
    const manifests = await renderChart({});
    assert.equal(env(manifests)['ROLLOUT'], undefined);
    const granted = [...grants(rulesOf(manifests, 'ClusterRole')), ...grants(rulesOf(manifests, 'Role'))].join('\n');
    assert.doesNotMatch(granted, /leases|\/pods|deployments|statefulsets|daemonsets/);
    assert.doesNotMatch(granted, /replicasets: .*list/);
  });

  it('on: the environment serve reads, and the rules the controller calls', async () => {
    const manifests = await renderChart({ rollout: { enabled: true, maxConcurrent: 3, readyTimeout: '300s', fieldManager: 'flux-client-side-apply' } });
    assert.deepEqual(manifests.flatMap(schemaProblems), []);
    const variables = env(manifests);
    assert.equal(variables['ROLLOUT'], 'on');
    assert.equal(variables['ROLLOUT_MAX_CONCURRENT'], '3');
    assert.equal(variables['ROLLOUT_READY_TIMEOUT'], '300s');
    assert.match(variables['ROLLOUT_LEASE'] ?? '', /-rollout$/);
    const settings = parseServeArgs([], variables);
    assert.deepEqual(settings?.rollout, { enabled: true, maxConcurrent: 3, readyTimeoutMs: 300_000, leaseName: variables['ROLLOUT_LEASE'], fieldManager: 'flux-client-side-apply' });
    const cluster = grants(rulesOf(manifests, 'ClusterRole'));
    for (const expected of ['/pods: list,watch', 'apps/replicasets: list,watch', 'apps/deployments: list,watch,patch', 'apps/statefulsets: list,watch,patch', 'apps/daemonsets: list,watch,patch', 'events.k8s.io/events: create', '/pods: get,patch', '/pods/resize: patch']) {
      assert.ok(cluster.includes(expected), `ClusterRole grants ${expected}: ${cluster.join('; ')}`);
    }
    const role = grants(rulesOf(manifests, 'Role'));
    assert.ok(role.includes('coordination.k8s.io/leases: create'));
    assert.ok(role.includes(`coordination.k8s.io/leases[${variables['ROLLOUT_LEASE'] ?? ''}]: get,patch`));
  });

  it('serve refuses --rollout in policy mode, another word than on or off, a ready timeout under a second', () => {
    assert.throws(() => parseServeArgs(['--mode', 'policy', '--rollout', 'on'], {}), /--rollout on runs in webhook mode only/);
    assert.throws(() => parseServeArgs(['--rollout', 'yes'], {}), /--rollout: must be on or off/);
    assert.throws(() => parseServeArgs(['--rollout', 'on', '--rollout-ready-timeout', '500ms'], {}), /at least 1s/);
    assert.deepEqual(parseServeArgs([], {})?.rollout, { enabled: false, maxConcurrent: 1, readyTimeoutMs: 600_000, leaseName: 'envoy-injector-rollout', fieldManager: 'envoy-injector' });
  });

  it('refused in policy mode, and a bad value by the schema', async () => {
    await assert.rejects(renderChart({ mode: 'policy', rollout: { enabled: true } }), /rollout.enabled runs in webhook mode only/);
    await assert.rejects(renderChart({ rollout: { enabled: true, readyTimeout: '10m' } }), /readyTimeout/);
    await assert.rejects(renderChart({ rollout: { enabled: true, maxConcurrent: 0 } }), /maxConcurrent/);
  });
});
