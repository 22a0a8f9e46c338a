import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { admitPod, applyPodPatch, MAX_PADDED_CONTAINERS, MAX_PADDED_INIT_CONTAINERS, parseTemplateData, Reason, Rule, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { applyIndependently } from './helpers/patch.js';

/**
 * Pod-level resources (spec.resources) padded by what the injected
 * containers add, as the API server aggregates them; each expected value is
 * what kube-apiserver 1.34 and 1.36 accept (test/e2e/pod-features.test.ts
 * creates such Pods for real).
 */

const PROXY = 'resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: "1", memory: 256Mi}}';
const templates: TemplateSet = parseTemplateData({
  config: `containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6", ${PROXY}}]`,
  capture: `containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6", securityContext: {runAsUser: 101}, ${PROXY}}]\ncapture: {image: "example.com/init:1", outboundPort: 15001, inboundPort: 15006, enabled: true}`,
  huge: 'containers: [{name: envoy, image: "e:1", resources: {limits: {memory: 2Pi}}}]',
  bare: 'containers: [{name: envoy, image: "e:1"}]',
  tiny: 'containers: [{name: envoy, image: "e:1", resources: {requests: {memory: "0.0001"}}}]',
});

type Resources = Record<string, Record<string, string>>;

function pod(resources: Resources, spec: JsonObject = {}, annotations: Record<string, string> = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } },
    spec: { containers: [{ name: 'app', image: 'app:1', resources: { requests: { cpu: '100m', memory: '64Mi' } } }], ...spec, resources },
  };
}

function admit(received: JsonObject, native = false) {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options: { nativeSidecar: native } });
  if (admission.injection === undefined) return { admission, resources: undefined };
  const injected = applyPodPatch(received, admission.injection.patch);
  assert.deepEqual(applyIndependently(received, admission.injection.patch), injected);
  return { admission, resources: (injected['spec'] as JsonObject)['resources'] as Resources };
}

describe('Pod-level resources are padded by what the injected containers add', () => {
  it('requests only: the proxy\'s requests are added, the app keeps what it asked for', () => {
    const { admission, resources } = admit(pod({ requests: { cpu: '100m', memory: '64Mi' } }));
    assert.deepEqual(resources, { requests: { cpu: '200m', memory: '128Mi' } });
    assert.deepEqual(admission.injection?.podResources, [
      { field: 'spec.resources.requests.cpu', before: '100m', after: '200m' },
      { field: 'spec.resources.requests.memory', before: '64Mi', after: '128Mi' },
    ]);
    assert.ok(admission.warnings.some((warning) => warning.startsWith('spec.resources: padded by what the injected containers add')), admission.warnings.join('\n'));
  });

  it('a request equal to its limit (Guaranteed at the Pod level) stays equal: both padded by the larger of the two additions', () => {
    // What the API server sends for `limits: {cpu: 1, memory: 1Gi}` on containers without requests: the requests defaulted from the limits.
    const { resources } = admit(pod({ requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } }, { containers: [{ name: 'app', image: 'app:1' }] }));
    assert.deepEqual(resources, { requests: { cpu: '2', memory: '1280Mi' }, limits: { cpu: '2', memory: '1280Mi' } });
  });

  it('requests and limits that differ: each by its own addition', () => {
    const app = { name: 'app', image: 'app:1', resources: { requests: { cpu: '500m' }, limits: { cpu: '2' } } };
    const { resources } = admit(pod({ requests: { cpu: '500m' }, limits: { cpu: '2500m' } }, { containers: [app] }));
    assert.deepEqual(resources, { requests: { cpu: '600m' }, limits: { cpu: '3500m' } });
  });

  it('a limit below an injected container\'s limit is raised to it (and never below the padded request)', () => {
    const init = { name: 'big', image: 'i:1', resources: { requests: { cpu: '2' }, limits: { cpu: '2' } } };
    // The init container's limit dominates the aggregate: the proxy adds nothing to it, yet its limit of 1 exceeds the Pod's.
    const { resources } = admit(pod({ requests: { cpu: '500m' }, limits: { cpu: '500m' } }, { initContainers: [init], containers: [{ name: 'app', image: 'app:1', resources: { requests: { cpu: '100m' } } }] }));
    assert.deepEqual(resources, { requests: { cpu: '1' }, limits: { cpu: '1' } });
  });

  it('native: the proxy runs beside every init container that follows it, so it adds to theirs (the max rule)', () => {
    const init = { name: 'migrate', image: 'm:1', resources: { requests: { cpu: '2' } } };
    assert.deepEqual(admit(pod({ requests: { cpu: '2' } }, { initContainers: [init] }), true).resources, { requests: { cpu: '2100m' } });
    // Classic: the proxy starts after the init containers, whose 2 CPUs still dominate: nothing to add.
    const classic = admit(pod({ requests: { cpu: '2' } }, { initContainers: [init] }));
    assert.deepEqual(classic.resources, { requests: { cpu: '2' } });
    assert.deepEqual(classic.admission.injection?.podResources, []);
  });

  it('capture: envoy-init is one more init container, counted by the max rule', () => {
    // envoy-init requests 10m, 16Mi; its limits are 100m, 64Mi. Native: first, before the proxy; nothing dominates it.
    const { resources } = admit(pod({ requests: { cpu: '100m', memory: '64Mi' } }, {}, { 'envoy-injector.io/template': 'capture' }), true);
    assert.deepEqual(resources, { requests: { cpu: '200m', memory: '128Mi' } });
  });

  it('formats stay the Pod\'s: a binary value stays binary, an exponent stays an exponent, decimals become the canonical text', () => {
    assert.deepEqual(admit(pod({ requests: { cpu: '2e3', memory: '1Gi' } })).resources, { requests: { cpu: '2000100e-3', memory: '1088Mi' } });
    assert.deepEqual(admit(pod({ requests: { cpu: '1500m', memory: '1000M' } })).resources, { requests: { cpu: '1600m', memory: '1067108864' } });
  });

  it('every amount is rounded up to 1m as the API server defaults it, memory too; a resource no added container carries is left as it is', () => {
    // 0.0001 bytes is stored as 1m: the Pod's request grows by 1m, written as the API server writes it.
    const { resources } = admit(pod({ requests: { memory: '64Mi', 'hugepages-2Mi': '2Mi' }, limits: { 'hugepages-2Mi': '2Mi' } }, {}, { 'envoy-injector.io/template': 'tiny' }));
    assert.deepEqual(resources, { requests: { memory: '67108864001m', 'hugepages-2Mi': '2Mi' }, limits: { 'hugepages-2Mi': '2Mi' } });
  });

  it('a form policy mode cannot take (a binary suffix after more than 3 decimals, 10^15 or more) skips the Pod in both modes', () => {
    const fine = admit(pod({ requests: { cpu: '100m', memory: '64Mi' } }, {}, { 'envoy-injector.io/proxy-memory': '0.0001Ki' })).admission;
    assert.match(fine.decision.message, /0\.0001Ki is not a quantity both modes pad/);
    assert.equal(fine.decision.reason, Reason.podResourcesUnpaddable);
    const big = admit(pod({ limits: { memory: '999Pi' } })).admission;
    assert.equal(big.decision.reason, Reason.podResourcesUnpaddable);
  });

  it('a Pod with more containers or init containers than policy mode\'s CEL cost allows is skipped alike; one with nothing to pad is not', () => {
    const many = (count: number): JsonObject[] => Array.from({ length: count }, (_, index) => ({ name: `c${index}`, image: 'app:1' }));
    const atBound = admit(pod({ requests: { cpu: '100' } }, { containers: many(MAX_PADDED_CONTAINERS - 1) }));
    assert.deepEqual(atBound.resources, { requests: { cpu: '100100m' } });
    const over = admit(pod({ requests: { cpu: '100' } }, { containers: many(MAX_PADDED_CONTAINERS) })).admission;
    assert.equal(over.decision.reason, Reason.podResourcesUnpaddable);
    assert.match(over.decision.message, /more than 250 containers or 100 init containers once injected \(251 and 0\)/);
    const inits = admit(pod({ requests: { cpu: '100' } }, { initContainers: many(MAX_PADDED_INIT_CONTAINERS + 1) })).admission;
    assert.equal(inits.decision.reason, Reason.podResourcesUnpaddable);
    // Nothing the template adds carries hugepages: no bound, nothing padded.
    const untouched = admit(pod({ requests: { 'hugepages-2Mi': '2Mi' } }, { containers: many(MAX_PADDED_CONTAINERS) }));
    assert.deepEqual(untouched.resources, { requests: { 'hugepages-2Mi': '2Mi' } });
  });

  it('a template without resources changes nothing, and a Pod without spec.resources gets no padding', () => {
    const bare = admit(pod({ requests: { cpu: '100m' } }, {}, { 'envoy-injector.io/template': 'bare' }));
    assert.deepEqual(bare.resources, { requests: { cpu: '100m' } });
    assert.deepEqual(bare.admission.injection?.podResources, []);
    const plain = pod({});
    delete (plain['spec'] as JsonObject)['resources'];
    assert.equal(admit(plain).admission.injection?.podResources, undefined);
  });

  it('a value that cannot be padded skips the Pod with a reason of its own (pod_resources_unpaddable)', () => {
    const { admission } = admit(pod({ limits: { memory: '8191Pi' } }, {}, { 'envoy-injector.io/template': 'huge' }));
    assert.equal(admission.decision.inject, false);
    assert.equal(admission.decision.reason, Reason.podResourcesUnpaddable);
    assert.equal(admission.decision.rule, Rule.podResources);
    assert.match(admission.decision.message, /spec\.resources\.limits\.memory: 8191Pi/);
    assert.equal(admission.injection, undefined);
    assert.ok(admission.warnings.some((warning) => warning.includes('was not injected')), admission.warnings.join('\n'));
    const garbage = admit(pod({ requests: { cpu: 'lots' } })).admission;
    assert.equal(garbage.decision.reason, Reason.podResourcesUnpaddable);
  });
});
