import assert from 'node:assert/strict';
import { it } from 'node:test';
import { parseTemplateData, type JsonObject } from '../../src/injection/index.js';
import { compilePolicy } from '../../src/policy/compile-policy.js';
import { MAX_EXPRESSION_CODE_POINTS } from '../../src/policy/policy-limits.js';
import { seedTemplates } from '../helpers/fixtures.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { uniqueName } from './cluster.js';
import { kubeCall } from './policy-parity.js';

/**
 * The CEL limits the compiler refuses templates for are the API server's own:
 * a dry-run create of a compiled policy with one more variable whose
 * expression is exactly at, or one past, the limit; and a string holding a
 * lone surrogate.
 */
forEachKubeVersion('policy mode: the compiler knows the API server\'s CEL limits', (plane, version) => {
  const served = servedPolicyApiVersion(version);
  if (served === undefined) return;
  const apiVersion = served;

  async function dryRunCreate(extra: string): Promise<{ status: number; message: string }> {
    const { policy } = compilePolicy(seedTemplates(), { name: uniqueName('limits'), apiVersion });
    const spec = policy['spec'] as { variables: JsonObject[] };
    spec.variables.push({ name: 'extra', expression: extra });
    const response = await kubeCall(plane(), 'POST', `/apis/admissionregistration.k8s.io/${apiVersion}/mutatingadmissionpolicies?dryRun=All`, policy);
    return { status: response.status, message: String(response.body['message'] ?? '') };
  }

  it(`an expression of ${MAX_EXPRESSION_CODE_POINTS.toLocaleString('en-US')} code points is accepted, one more is refused`, async () => {
    // A string literal: two quotes around the rest; multi-byte characters count once each, as code points.
    const literal = (size: number): string => `"${'é'.repeat(size - 2)}"`;
    const at = await dryRunCreate(literal(MAX_EXPRESSION_CODE_POINTS));
    assert.equal(at.status, 201, at.message);
    const past = await dryRunCreate(literal(MAX_EXPRESSION_CODE_POINTS + 1));
    assert.equal(past.status, 422);
    assert.match(past.message, /expression code point size exceeds limit: size: 100001, limit 100000/);
    // And the compiler refuses a template that would need it.
    assert.throws(() => compilePolicy(parseTemplateData({ config: `containers:\n  - name: envoy\n    image: e:1\n    args: ["${'x'.repeat(MAX_EXPRESSION_CODE_POINTS)}"]\n` })), /over 100,000/);
  });

  it('a lone surrogate in a string is refused; the compiler refuses the template that holds one', async () => {
    const refused = await dryRunCreate('"\\ud800"');
    assert.equal(refused.status, 422);
    assert.match(refused.message, /invalid unicode code point/);
    assert.throws(() => compilePolicy(parseTemplateData({ config: 'containers:\n  - name: envoy\n    image: e:1\n    args: ["\\uD800"]\n' })), /lone UTF-16 surrogate/);
    // A character beyond the BMP is one code point, written as is (JSON.stringify, which the compiler uses, does so).
    const pair = await dryRunCreate(JSON.stringify('\u{1F600}'));
    assert.equal(pair.status, 201, pair.message);
  });
});
