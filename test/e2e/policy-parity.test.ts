import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { OTHER_MESH_EXPECT, otherMeshCases, parityCases } from './policy-parity-cases.js';
import { isInjected, kubeCall, ParityRun, Path, warningText } from './policy-parity.js';
import type { JsonObject } from '../../src/injection/index.js';

/** The floor for the number of Pods compared. */
const MIN_CASES = 30;

forEachKubeVersion('policy mode: the same Pods through the webhook and through the MutatingAdmissionPolicy', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) {
    it(`${version} does not serve MutatingAdmissionPolicy: the compiled policy cannot be created in either version`, async () => {
      for (const candidate of ['v1', 'v1beta1'] as const) {
        const run = new ParityRun(plane(), candidate);
        const response = await kubeCall(plane(), 'POST', `/apis/admissionregistration.k8s.io/${candidate}/mutatingadmissionpolicies`, run.policy.policy);
        assert.equal(response.status, 404, `expected 404 from ${version} for ${candidate}, got ${response.status}: ${String(response.body['message'])}`);
      }
    });
    return;
  }

  let run: ParityRun | undefined;
  before(async () => {
    run = new ParityRun(plane(), apiVersion);
    await run.start();
  });
  after(async () => {
    await run?.stop();
  });

  it(`stores equal Pods on both paths (at least ${MIN_CASES} Pods: golden corpus, every rule, random ones, 1 MiB ones)`, async (t) => {
    assert.ok(run !== undefined);
    const cases = parityCases();
    assert.ok(cases.length >= MIN_CASES);
    const report = await run.compare(cases);
    t.diagnostic(`policy parity (admissionregistration.k8s.io/${apiVersion}): ${report.compared} Pods compared, ${report.injected} injected by the webhook and ${report.policyInjected} by the policy, ${report.refused} refused alike, ${report.podResourcesPadded} of them with spec.resources padded, ${report.differences.length} differences`);
    for (const difference of report.differences.slice(0, 3)) {
      t.diagnostic(`${difference.title}\n  webhook: ${JSON.stringify(difference.webhook)}\n  policy:  ${JSON.stringify(difference.policy)}`);
    }
    assert.deepEqual(report.differences.map((difference) => difference.title), []);
    // A run where neither path injects would compare nothing that matters.
    assert.ok(report.injected >= 30, `only ${report.injected} Pods were injected`);
    assert.equal(report.policyInjected, report.injected);
    assert.ok(report.podResourcesPadded >= 20, `only ${report.podResourcesPadded} Pods with spec.resources were padded`);
  });

  it("leaves a Pod another mesh injected, or with its own container of the proxy's name, as it was written on both paths; the webhook says why (issue 50)", async () => {
    assert.ok(run !== undefined);
    const names = (pod: unknown, list: string): string[] => (((pod as JsonObject)['spec'] as JsonObject)[list] as JsonObject[] | undefined ?? []).map((entry) => String(entry['name']));
    for (const [index, { title, namespace, pod }] of otherMeshCases().entries()) {
      const expect = String(((pod['metadata'] as JsonObject)['annotations'] as JsonObject)[OTHER_MESH_EXPECT]);
      for (const path of [Path.webhook, Path.policy]) {
        const { stored, warnings } = await run.createIn(path, namespace, pod, `mesh-${index}`);
        assert.equal((stored as JsonObject)['refused'], undefined, `${title} (${path}): refused: ${JSON.stringify(stored)}`);
        if (expect === 'inject') {
          assert.ok(isInjected(stored), `${title} (${path}): injected`);
          continue;
        }
        assert.ok(!isInjected(stored), `${title} (${path}): not injected`);
        const labels = ((stored as JsonObject)['metadata'] as JsonObject)['labels'] as JsonObject | undefined;
        assert.equal(labels?.['envoy-injector.io/injected'], undefined, `${title} (${path}): not labeled injected`);
        assert.deepEqual([names(stored, 'containers'), names(stored, 'initContainers')], [names(pod, 'containers'), names(pod, 'initContainers')], `${title} (${path}): its containers as written`);
        if (path === Path.policy) continue;
        const said = warnings.map(warningText);
        const why = expect === 'proxy_name_taken' ? /the Pod already has a container named "envoy" that the injector did not add/ : new RegExp(`the Pod was already injected by ${expect} \\(`);
        assert.ok(said.some((warning) => why.test(warning)), `${title}: the webhook's warning says why (got ${JSON.stringify(said)})`);
      }
    }
  });
});
