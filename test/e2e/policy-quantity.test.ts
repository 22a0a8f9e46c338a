import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { MAX_MILLI, renderMilli, toMilli, type JsonObject, type MilliFormat } from '../../src/injection/index.js';
import { celMilli, celRenderMilli } from '../../src/policy/compile-resources.js';
import { uniqueName } from './cluster.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { kubeCall } from './policy-parity.js';

/**
 * Policy mode pads Pod-level resources with the webhook's arithmetic in CEL
 * (docs/design.md §14): the CEL of toMilli and renderMilli, run by the real
 * API server on every text and value below, gives what the TypeScript
 * gives, in and out of the forms both take.
 */

const TEXTS = [
  '0', '1', '0.5', '500m', '1e3', '1Ki', '128974848', '129e6', '129M', '123Mi', '1536Mi', '1.5Gi', '1.001Gi', '1.0001Gi', '0.0001', '10e-3', '1e-30',
  '1e99', '0e99', '.5', '5.', '+1', '-1', '1E', '1E3', '1e+3', 'abc', '1 ', '999999999999999999m', '999999999999999', '1P', '888Ti', '909Ti', '910Ti',
  '1000000000000000000', '12345678901234567.8m', '1Ei', '7Pi', '1m', '0.1m', '100.5m', '2500', '1E-2', '3e15', '1e15',
];
const VALUES = [0n, 1n, 999n, 1000n, 1500n, 1023000n, 1024000n, 1025000n, 1048576000n, 1536000n, 123000n, 2000100n, 10n ** 17n, 5n * 10n ** 17n, MAX_MILLI];
const FORMATS: Record<MilliFormat, string> = { DecimalSI: '1', BinarySI: '1Ki', DecimalExponent: '1e3' };

forEachKubeVersion('policy mode: the CEL of the padding arithmetic is the webhook\'s', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) return;
  const collection = `/apis/admissionregistration.k8s.io/${apiVersion}`;
  const name = uniqueName('quantity');
  const namespace = uniqueName('quantity');
  before(async () => {
    const annotation = 'object.metadata.annotations';
    const milli = `${annotation}.filter(k, k.startsWith("in-")).map(k, JSONPatch{op: "add", path: "/metadata/annotations/out-" + k, value: string(${celMilli(`${annotation}[k]`)})})`;
    const render = `${annotation}.filter(k, k.startsWith("render-")).map(k, JSONPatch{op: "add", path: "/metadata/annotations/out-" + k, value: ${celRenderMilli(`int(${annotation}[k].split("|")[0])`, `${annotation}[k].split("|")[1]`)}})`;
    const policy = {
      apiVersion: `admissionregistration.k8s.io/${apiVersion}`,
      kind: 'MutatingAdmissionPolicy',
      metadata: { name },
      spec: {
        failurePolicy: 'Fail',
        reinvocationPolicy: 'Never',
        matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'] }], namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } },
        mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: `${milli} + ${render}` } }],
      },
    };
    for (const [path, body] of [
      [`${collection}/mutatingadmissionpolicies`, policy],
      [`${collection}/mutatingadmissionpolicybindings`, { apiVersion: policy.apiVersion, kind: 'MutatingAdmissionPolicyBinding', metadata: { name }, spec: { policyName: name } }],
      ['/api/v1/namespaces', { metadata: { name: namespace } }],
      [`/api/v1/namespaces/${namespace}/serviceaccounts`, { metadata: { name: 'default' } }],
    ] as const) {
      const response = await kubeCall(plane(), 'POST', path, body);
      // With controllers, the namespace's default ServiceAccount may be made first.
      assert.ok(response.status < 300 || (response.status === 409 && path.endsWith('/serviceaccounts')), `${path}: ${response.status} ${String(response.body['message'])}`);
    }
  });
  after(async () => {
    await kubeCall(plane(), 'DELETE', `${collection}/mutatingadmissionpolicybindings/${name}`);
    await kubeCall(plane(), 'DELETE', `${collection}/mutatingadmissionpolicies/${name}`);
    await kubeCall(plane(), 'DELETE', `/api/v1/namespaces/${namespace}`);
  });

  it(`${TEXTS.length} texts in thousandths and ${VALUES.length * 3} values as canonical text, as toMilli and renderMilli`, async () => {
    const annotations: Record<string, string> = {};
    TEXTS.forEach((text, index) => (annotations[`in-${index}`] = text));
    const renders = VALUES.flatMap((value) => Object.entries(FORMATS).map(([format, text]) => ({ value, format: format as MilliFormat, text })));
    renders.forEach(({ value, text }, index) => (annotations[`render-${index}`] = `${value}|${text}`));
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'quantities', annotations }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] } };
    // The new policy is enforced within seconds: until then the Pod comes back without the outputs.
    let stored: Record<string, string> = {};
    let answer = '';
    for (let attempt = 0; attempt < 150 && stored['out-in-0'] === undefined; attempt += 1) {
      const response = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, pod);
      answer = `${response.status} ${String(response.body['message'] ?? '')}`;
      stored = (response.status < 300 ? ((response.body['metadata'] as JsonObject)['annotations'] ?? {}) : {}) as Record<string, string>;
      if (stored['out-in-0'] === undefined) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    assert.ok(stored['out-in-0'] !== undefined, `the policy never acted on the Pod: ${answer}`);
    const problems: string[] = [];
    TEXTS.forEach((text, index) => {
      const expected = String(toMilli(text) ?? -1n);
      if (stored[`out-in-${index}`] !== expected) problems.push(`${JSON.stringify(text)}: CEL ${String(stored[`out-in-${index}`])}, TypeScript ${expected}`);
    });
    renders.forEach(({ value, format }, index) => {
      const expected = renderMilli(value, format);
      if (stored[`out-render-${index}`] !== expected) problems.push(`${value} (${format}): CEL ${String(stored[`out-render-${index}`])}, TypeScript ${expected}`);
    });
    assert.deepEqual(problems, []);
    // Neither side is trivially right: the texts cover both outcomes.
    assert.ok(TEXTS.filter((text) => toMilli(text) === undefined).length >= 10 && TEXTS.filter((text) => toMilli(text) !== undefined).length >= 20);
  });
});
