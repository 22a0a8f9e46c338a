import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { parityCases } from './policy-parity-cases.js';
import { kubeCall, ParityRun } from './policy-parity.js';

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
});
