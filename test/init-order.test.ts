import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { reviewAdmission } from '../src/admission/review-admission.js';
import type { AdmissionRequest } from '../src/admission/review-schema.js';
import { admitPod, applyPodPatch, parseTemplateData, restoreInitOrder, type JsonObject, type PatchOperation, type TemplateSet } from '../src/injection/index.js';
import { applyIndependently } from './helpers/patch.js';

/**
 * Another webhook that runs after the injector may put its init containers
 * before ours (a prepend) or after envoy-init (an append). When the API
 * server reinvokes us on such a Pod, the order our design needs is put back:
 * native, envoy-init (capturing) then the proxy first; classic, envoy-init last.
 */

const templates: TemplateSet = parseTemplateData({
  config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6", securityContext: {runAsUser: 101}}]\ninitContainers: [{name: setup, image: "s:1"}]\ncapture: {image: "example.com/init:1", outboundPort: 15001, inboundPort: 15006, enabled: true}',
});

function injected(native: boolean, initContainers: JsonObject[] = []): JsonObject {
  const pod: JsonObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true' } }, spec: { initContainers, containers: [{ name: 'app', image: 'app:1' }] } };
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined);
  return applyPodPatch(pod, admission.injection.patch);
}

const names = (pod: JsonObject): string[] => (((pod['spec'] as JsonObject)['initContainers'] ?? []) as JsonObject[]).map((entry) => String(entry['name']));
const other = { name: 'vault-agent-init', image: 'vault:1' };

function withInits(pod: JsonObject, change: (list: JsonObject[]) => JsonObject[]): JsonObject {
  const spec = pod['spec'] as JsonObject;
  return { ...pod, spec: { ...spec, initContainers: change([...(spec['initContainers'] as JsonObject[])]) } };
}

function restored(pod: JsonObject): string[] {
  const patch = restoreInitOrder(pod);
  assert.ok(patch.length > 0, 'a patch');
  const result = applyPodPatch(pod, patch);
  assert.deepEqual(applyIndependently(pod, patch), result);
  assert.deepEqual(restoreInitOrder(result), [], 'idempotent: a second look changes nothing');
  return names(result);
}

describe('the order of init containers after other injectors', () => {
  it('as injected, the order is right: nothing to do', () => {
    assert.deepEqual(names(injected(true, [{ name: 'migrate', image: 'm:1' }])), ['envoy-init', 'envoy', 'migrate', 'setup']);
    assert.deepEqual(restoreInitOrder(injected(true, [{ name: 'migrate', image: 'm:1' }])), []);
    assert.deepEqual(names(injected(false, [{ name: 'migrate', image: 'm:1' }])), ['migrate', 'setup', 'envoy-init']);
    assert.deepEqual(restoreInitOrder(injected(false)), []);
  });

  it('native: an init container another webhook prepended goes after envoy-init and the proxy, the rest keep their order', () => {
    const pod = withInits(injected(true, [{ name: 'migrate', image: 'm:1' }]), (list) => [other, ...list]);
    assert.deepEqual(restored(pod), ['envoy-init', 'envoy', 'vault-agent-init', 'migrate', 'setup']);
  });

  it('native: one put between envoy-init and the proxy too', () => {
    const pod = withInits(injected(true), (list) => [list[0] as JsonObject, other, ...list.slice(1)]);
    assert.deepEqual(restored(pod), ['envoy-init', 'envoy', 'vault-agent-init', 'setup']);
  });

  it('classic: an init container another webhook appended after envoy-init goes before it', () => {
    const pod = withInits(injected(false), (list) => [...list, other]);
    assert.deepEqual(restored(pod), ['setup', 'vault-agent-init', 'envoy-init']);
  });

  it('classic: one prepended changes nothing, envoy-init is still last', () => {
    assert.deepEqual(restoreInitOrder(withInits(injected(false), (list) => [other, ...list])), []);
  });

  it('a Pod without our status, or with one that is not our JSON, is left alone', () => {
    const plain: JsonObject = { metadata: {}, spec: { initContainers: [other, { name: 'envoy', image: 'e', restartPolicy: 'Always' }] } };
    assert.deepEqual(restoreInitOrder(plain), []);
    assert.deepEqual(restoreInitOrder({ ...plain, metadata: { annotations: { 'envoy-injector.io/status': 'injected' } } }), []);
  });
});

describe('a reinvocation of an injected Pod', () => {
  const review = (object: JsonObject) =>
    reviewAdmission(
      { uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace: 'shop', object } as AdmissionRequest,
      { templates, namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, options: {} },
    );

  it('finding the order broken by another webhook, answers the patch that restores it (audit: reordered); a second reinvocation answers none', () => {
    const broken = withInits(injected(true), (list) => [other, ...list]);
    const outcome = review(broken);
    assert.equal(outcome.reason, 'already_injected');
    assert.equal(outcome.review.response.auditAnnotations?.['reordered'], 'true');
    const patch = JSON.parse(Buffer.from(outcome.review.response.patch ?? '', 'base64').toString('utf8')) as PatchOperation[];
    const fixed = applyPodPatch(broken, patch);
    assert.deepEqual(names(fixed), ['envoy-init', 'envoy', 'vault-agent-init', 'setup']);
    assert.match(outcome.warnings.join('\n'), /restored the order of init containers/);
    const again = review(fixed);
    assert.equal(again.review.response.patch, undefined);
    assert.equal(again.review.response.auditAnnotations?.['reordered'], undefined);
  });
});
