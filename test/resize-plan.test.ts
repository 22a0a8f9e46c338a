import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planPodResize, type PodResizePlan } from '../src/fleet/resize-plan.js';
import { podQosClass } from '../src/fleet/pod-qos.js';
import { admitPod, Annotations, applyPodPatch, decideInjection, parseTemplateData, type JsonObject, type TemplateSet } from '../src/injection/index.js';

/** A template whose proxy has these resources (and an image): the rest fixed. */
function templateSet(resources: string, options: { image?: string; native?: boolean; capture?: string } = {}): TemplateSet {
  const config = [
    ...(options.native === undefined ? [] : [`nativeSidecar: ${String(options.native)}`]),
    'containers:',
    '  - name: envoy',
    `    image: ${options.image ?? 'envoyproxy/envoy:v1.31.0'}`,
    `    resources: ${resources}`,
    ...(options.capture === undefined ? [] : ['capture:', '  image: envoy-init:1', '  proxyUid: 101', '  outboundPort: 15001', '  inboundPort: 15006', '  enabled: true', `  resources: ${options.capture}`]),
  ].join('\n');
  return parseTemplateData({ config });
}

const GUARANTEED = '{requests: {cpu: 50m, memory: 64Mi}, limits: {cpu: 50m, memory: 64Mi}}';
const BURSTABLE = '{requests: {cpu: 50m, memory: 64Mi}, limits: {cpu: 500m, memory: 256Mi}}';

function appPod(extra: { resources?: JsonObject; podResources?: JsonObject; annotations?: Record<string, string> } = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web-1', namespace: 'shop', annotations: { ...extra.annotations } },
    spec: {
      containers: [{ name: 'app', image: 'app:1', resources: extra.resources ?? { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } } }],
      ...(extra.podResources === undefined ? {} : { resources: extra.podResources }),
    },
  };
}

/** POD injected with TEMPLATES as the webhook would, its QoS class written as the API server does. */
function injected(pod: JsonObject, templates: TemplateSet, native = false): JsonObject {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, pod, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined, 'injected');
  const stored = applyPodPatch(pod, admission.injection.patch);
  return { ...stored, status: { phase: 'Running', qosClass: podQosClass(stored) ?? null } };
}

function resize(plan: PodResizePlan): Extract<PodResizePlan, { kind: 'resize' }> {
  assert.equal(plan.kind, 'resize', JSON.stringify(plan));
  return plan as Extract<PodResizePlan, { kind: 'resize' }>;
}

describe('planPodResize: the proxy resized in place when only its resources changed', () => {
  it('the status records the template hash without CPU and memory, the same across a resources-only change', () => {
    const before = templateSet(BURSTABLE).defaultTemplate;
    const after = templateSet('{requests: {cpu: 100m, memory: 96Mi}, limits: {cpu: 1, memory: 256Mi}}').defaultTemplate;
    assert.notEqual(before.hash, after.hash);
    assert.equal(before.hashWithoutResources, after.hashWithoutResources);
    assert.notEqual(templateSet(BURSTABLE, { image: 'envoyproxy/envoy:v1.32.0' }).defaultTemplate.hashWithoutResources, before.hashWithoutResources);
    const pod = injected(appPod({ resources: {} }), templateSet(BURSTABLE));
    const status = JSON.parse((pod['metadata'] as { annotations: Record<string, string> }).annotations[Annotations.status] ?? '{}') as Record<string, unknown>;
    assert.equal(status.hashWithoutResources, before.hashWithoutResources);
  });

  it('a classic proxy: the resize patch carries the template new values, the status its hash', () => {
    const pod = injected(appPod({ resources: { requests: { cpu: '100m' } } }), templateSet(BURSTABLE));
    const live = templateSet('{requests: {cpu: 100m, memory: 96Mi}, limits: {cpu: 1, memory: 256Mi}}');
    const plan = resize(planPodResize(pod, { templates: live }));
    assert.deepEqual(plan.body, { spec: { containers: [{ name: 'envoy', resources: { requests: { cpu: '100m', memory: '96Mi' }, limits: { cpu: '1', memory: '256Mi' } } }] } });
    assert.deepEqual(plan.changes.map((change) => `${change.container} ${change.field} ${String(change.before)} -> ${change.after}`), ['envoy requests.cpu 50m -> 100m', 'envoy requests.memory 64Mi -> 96Mi', 'envoy limits.cpu 500m -> 1']);
    assert.equal(JSON.parse(plan.status).hash, live.defaultTemplate.hash);
    assert.equal(plan.previousStatus, (pod['metadata'] as { annotations: Record<string, string> }).annotations[Annotations.status]);
    assert.deepEqual(plan.restartsContainers, []);
  });

  it('a native proxy is resized among the init containers', () => {
    const pod = injected(appPod({ resources: { requests: { cpu: '100m' } } }), templateSet(BURSTABLE, { native: true }), true);
    const plan = resize(planPodResize(pod, { templates: templateSet('{requests: {cpu: 80m, memory: 64Mi}, limits: {cpu: 500m, memory: 256Mi}}', { native: true }) }));
    assert.deepEqual(plan.body, { spec: { initContainers: [{ name: 'envoy', resources: { requests: { cpu: '80m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } } }] } });
  });

  it('current, and a change beyond resources or an old status, are not resized', () => {
    const pod = injected(appPod(), templateSet(BURSTABLE));
    assert.equal(planPodResize(pod, { templates: templateSet(BURSTABLE) }).kind, 'current');
    const other = planPodResize(pod, { templates: templateSet(BURSTABLE, { image: 'envoyproxy/envoy:v1.32.0' }) });
    assert.deepEqual(other, { kind: 'restart', why: 'the template changed in more than CPU and memory' });
    const meta = pod['metadata'] as { annotations: Record<string, string> };
    const { hashWithoutResources: _dropped, ...old } = JSON.parse(meta.annotations[Annotations.status] ?? '{}') as Record<string, unknown>;
    const oldPod = { ...pod, metadata: { ...meta, annotations: { ...meta.annotations, [Annotations.status]: JSON.stringify(old) } } };
    assert.match(String((planPodResize(oldPod, { templates: templateSet(GUARANTEED) }) as { why?: string }).why), /before the status recorded hashWithoutResources/);
  });

  it('a change of QoS class is left to a restart, named', () => {
    const pod = injected(appPod(), templateSet(GUARANTEED));
    assert.equal((pod['status'] as JsonObject)['qosClass'], 'Guaranteed');
    const plan = planPodResize(pod, { templates: templateSet(BURSTABLE) });
    assert.deepEqual(plan, { kind: 'restart', why: "the template's resources would change its QoS class from Guaranteed to Burstable, which the API server refuses in place" });
    // Guaranteed to Guaranteed is fine.
    assert.equal(planPodResize(pod, { templates: templateSet('{requests: {cpu: 70m, memory: 80Mi}, limits: {cpu: 70m, memory: 80Mi}}') }).kind, 'resize');
  });

  it('a limit the template no longer sets cannot be removed in place', () => {
    const pod = injected(appPod({ resources: {} }), templateSet(BURSTABLE));
    const plan = planPodResize(pod, { templates: templateSet('{requests: {cpu: 50m, memory: 64Mi}}') });
    assert.equal(plan.kind, 'restart');
    assert.match((plan as { why: string }).why, /^envoy: the template has no limits.cpu, and the API server removes none in place$/);
  });

  it("the Pod's overrides stay: its proxy-cpu annotation wins over the template's new request", () => {
    const pod = injected(appPod({ resources: {}, annotations: { 'envoy-injector.io/proxy-cpu': '300m' } }), templateSet(BURSTABLE));
    const plan = resize(planPodResize(pod, { templates: templateSet('{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 1, memory: 256Mi}}') }));
    assert.deepEqual(plan.changes.map((change) => `${change.field} ${change.after}`), ['limits.cpu 1']);
  });

  it('a resize the kubelet has not applied (Infeasible, Deferred) is reported, not sent again', () => {
    const pod = injected(appPod({ resources: {} }), templateSet(BURSTABLE));
    const conditions = [{ type: 'PodResizePending', status: 'True', reason: 'Infeasible', message: 'Node didn\'t have enough capacity: cpu, requested: 64000, capacity: 2000' }];
    const plan = planPodResize({ ...pod, status: { ...(pod['status'] as JsonObject), conditions } }, { templates: templateSet('{requests: {cpu: 64, memory: 64Mi}, limits: {cpu: 64, memory: 256Mi}}') });
    assert.deepEqual(plan, { kind: 'pending', condition: 'PodResizePending', reason: 'Infeasible', message: conditions[0]?.message });
  });

  it('a spec already resized (its status not yet written) only gets the status', () => {
    const live = templateSet('{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 500m, memory: 256Mi}}');
    const pod = injected(appPod({ resources: {} }), templateSet(BURSTABLE));
    const spec = pod['spec'] as { containers: JsonObject[] };
    const resized = { ...pod, spec: { ...spec, containers: spec.containers.map((container) => (container['name'] === 'envoy' ? { ...container, resources: { requests: { cpu: '0.1', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } } } : container)) } };
    const plan = resize(planPodResize(resized, { templates: live }));
    assert.equal(plan.body, undefined);
    assert.deepEqual(plan.changes, []);
  });

  it('Pod-level spec.resources are padded again by the change of what the proxy adds', () => {
    const podResources = { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } };
    const pod = injected(appPod({ resources: { requests: { cpu: '100m', memory: '128Mi' } }, podResources }), templateSet(BURSTABLE));
    const stored = (pod['spec'] as JsonObject)['resources'];
    assert.deepEqual(stored, { requests: { cpu: '1050m', memory: '1088Mi' }, limits: { cpu: '2500m', memory: '2304Mi' } });
    const plan = resize(planPodResize(pod, { templates: templateSet('{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 1, memory: 256Mi}}') }));
    assert.deepEqual((plan.body?.['spec'] as JsonObject)['resources'], { requests: { cpu: '1100m', memory: '1088Mi' }, limits: { cpu: '3', memory: '2304Mi' } });
    // The same values as injecting the Pod anew with the live template would give.
    const fresh = injected(appPod({ resources: { requests: { cpu: '100m', memory: '128Mi' } }, podResources }), templateSet('{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 1, memory: 256Mi}}'));
    assert.deepEqual((fresh['spec'] as JsonObject)['resources'], (plan.body?.['spec'] as JsonObject)['resources']);
  });

  it("envoy-init, an init container that ran to completion, is left as it ran", () => {
    const pod = injected(appPod({ resources: {} }), templateSet(BURSTABLE, { capture: '{requests: {cpu: 5m, memory: 8Mi}, limits: {cpu: 50m, memory: 32Mi}}' }));
    assert.ok(JSON.stringify(pod).includes('envoy-init'), 'captured');
    const live = templateSet('{requests: {cpu: 60m, memory: 64Mi}, limits: {cpu: 500m, memory: 256Mi}}', { capture: '{requests: {cpu: 10m, memory: 16Mi}, limits: {cpu: 100m, memory: 64Mi}}' });
    assert.equal(live.defaultTemplate.hashWithoutResources, templateSet(BURSTABLE, { capture: '{requests: {cpu: 5m, memory: 8Mi}, limits: {cpu: 50m, memory: 32Mi}}' }).defaultTemplate.hashWithoutResources);
    const plan = resize(planPodResize(pod, { templates: live }));
    assert.deepEqual(Object.keys(plan.body?.['spec'] as JsonObject), ['containers']);
  });
});

describe('admission of pods/resize (issue 52, point 3)', () => {
  it('the decision never injects on a resize: an UPDATE of the subresource is not a Pod CREATE', () => {
    const pod = injected(appPod(), templateSet(BURSTABLE));
    for (const [operation, subResource] of [['UPDATE', 'resize'], ['PATCH', 'resize'], ['UPDATE', undefined]] as const) {
      const decision = decideInjection({ operation, kind: { group: '', kind: 'Pod' }, subResource, namespace: 'shop', namespaceLabels: {}, pod, templates: templateSet(BURSTABLE), options: {} });
      assert.equal(decision.inject, false);
      assert.equal(decision.reason, 'not_pod_create');
    }
  });
});
