import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHART_DIR, helm, only, renderChart, valuesArgs, type Manifest } from './helpers/helm.js';
import { schemaProblems } from './helpers/kube-schema.js';

/**
 * The chart's OpenShift switch (issue 53, docs/install.md "OpenShift"):
 * `platform: openshift` leaves the injector's user and groups to the SCC,
 * which assigns them from its namespace's range and refuses fixed ones
 * outside it, and lets the CNI agent's ServiceAccount use the privileged SCC.
 */

type Obj = Record<string, unknown>;
const podSpec = (manifests: readonly Manifest[], kind: string): Obj => ((only(manifests, kind)['spec'] as Obj)['template'] as Obj)['spec'] as Obj;
const injectorContexts = (manifests: readonly Manifest[]): [Obj, Obj] => {
  const spec = podSpec(manifests, 'Deployment');
  return [spec['securityContext'] as Obj, ((spec['containers'] as Obj[])[0] as Obj)['securityContext'] as Obj];
};
const sccBindings = (manifests: readonly Manifest[]): Manifest[] =>
  manifests.filter((manifest) => manifest.kind === 'RoleBinding' && (manifest['roleRef'] as Obj)['name'] === 'system:openshift:scc:privileged');

describe('chart: platform openshift', () => {
  it('by default the injector runs as 65532, as before', async () => {
    const [pod, container] = injectorContexts(await renderChart({}));
    assert.deepEqual([pod['runAsUser'], pod['runAsGroup'], pod['fsGroup'], container['runAsUser'], container['runAsGroup']], [65532, 65532, 65532, 65532, 65532]);
  });

  it("openshift: no fixed user or group on the injector; the rest of restricted's fields kept", async () => {
    const manifests = await renderChart({ platform: 'openshift' });
    assert.deepEqual(manifests.flatMap(schemaProblems), []);
    const [pod, container] = injectorContexts(manifests);
    assert.deepEqual(pod, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    assert.deepEqual(container, { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, privileged: false, readOnlyRootFilesystem: true, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    // A user's own choice is dropped too: a fixed id outside the namespace's range is what the SCC refuses.
    const [own] = injectorContexts(await renderChart({ platform: 'openshift', podSecurityContext: { runAsNonRoot: true, runAsUser: 1000 } }));
    assert.deepEqual(own, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
  });

  it("openshift with the CNI agent: its ServiceAccount may use the privileged SCC, in the release's namespace", async () => {
    const manifests = await renderChart({ platform: 'openshift', proxy: { capture: { mode: 'auto' } } });
    assert.deepEqual(manifests.flatMap(schemaProblems), []);
    const [binding] = sccBindings(manifests);
    assert.ok(binding !== undefined);
    assert.equal(binding.metadata.name, 'mesh-envoy-injector-cni-agent-scc');
    assert.equal(binding.metadata.namespace, 'injector-system');
    assert.deepEqual(binding['roleRef'], { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:openshift:scc:privileged' });
    const agent = (podSpec(manifests, 'DaemonSet')['serviceAccountName'] as string | undefined) ?? '';
    assert.deepEqual(binding['subjects'], [{ kind: 'ServiceAccount', name: agent, namespace: 'injector-system' }]);
  });

  it('no binding without the agent, nor off OpenShift', async () => {
    assert.deepEqual(sccBindings(await renderChart({ platform: 'openshift' })), []);
    assert.deepEqual(sccBindings(await renderChart({ proxy: { capture: { mode: 'cni' } } })), []);
  });

  it('the schema refuses another platform', async () => {
    const result = await helm(['template', 'mesh', CHART_DIR, ...(await valuesArgs({ platform: 'OpenShift' }))]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /platform/);
  });
});
