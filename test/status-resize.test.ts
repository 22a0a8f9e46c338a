import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatResize, pendingResizes, planResizes, resizableLine } from '../src/commands/status-resize.js';
import type { FleetInput, PodRecord } from '../src/fleet/fleet-report.js';
import { podQosClass } from '../src/fleet/pod-qos.js';
import { Annotations, parseTemplateData, type JsonObject } from '../src/injection/index.js';

const OLD = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:1", resources: {requests: {cpu: 50m}, limits: {cpu: 500m}}}]' });
const LIVE = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:1", resources: {requests: {cpu: 80m}, limits: {cpu: 500m}}}]' });

function record(name: string, conditions: JsonObject[] = []): PodRecord {
  const template = OLD.defaultTemplate;
  const status = JSON.stringify({ template: 'config', hash: template.hash, hashWithoutResources: template.hashWithoutResources, containers: ['envoy'], initContainers: [], volumes: [], imagePullSecrets: [] });
  const annotations = { [Annotations.status]: status };
  return {
    namespace: 'shop',
    name,
    owner: undefined,
    annotations,
    labels: {},
    containers: ['app', 'envoy'],
    hostNetwork: false,
    resizeFacts: {
      metadata: { name, namespace: 'shop', annotations },
      spec: { containers: [{ name: 'app' }, { name: 'envoy', resources: { requests: { cpu: '50m' }, limits: { cpu: '500m' } } }], initContainers: [] },
      status: { qosClass: 'Burstable', conditions },
    },
  };
}

const input = (pods: PodRecord[]): FleetInput => ({ pods, owners: new Map(), templates: LIVE, namespaceLabels: () => ({ 'envoy-injector.io/inject': 'enabled' }), decision: {} });

describe('status --resize: the plans and what is said of them', () => {
  it('plans each resizable Pod; one with a pending resize is reported, not planned; without the subresource none is', () => {
    const infeasible = { type: 'PodResizePending', status: 'True', reason: 'Infeasible', message: 'Node didn\'t have enough capacity' };
    const pods = [record('a'), record('b', [infeasible])];
    const planning = planResizes(pods, input(pods), { served: true, allowedOverrides: [], namespaceAnnotations: () => undefined });
    assert.deepEqual(planning.targets.map((target) => `${target.name} ${target.plan.changes.map((change) => `${change.field} ${change.after}`).join(',')}`), ['a requests.cpu 80m']);
    assert.deepEqual(planning.pending, [{ namespace: 'shop', name: 'b', condition: 'PodResizePending', reason: 'Infeasible', message: 'Node didn\'t have enough capacity' }]);
    assert.deepEqual(pendingResizes(pods).map((entry) => entry.name), ['b']);
    const old = planResizes(pods, input(pods), { served: false, allowedOverrides: [], namespaceAnnotations: () => undefined });
    assert.deepEqual(old.targets, []);
    assert.deepEqual(old.notResized.map((entry) => `${entry.name}: ${entry.why}`), ['a: the API server has no resize subresource (Kubernetes before 1.33)', 'b: the API server has no resize subresource (Kubernetes before 1.33)']);
  });

  it('says what can be resized, and where the API server cannot', () => {
    assert.equal(resizableLine(0, true), undefined);
    assert.equal(resizableLine(2, true), '2 of the outdated Pods differ from the live template only in CPU and memory: --resize resizes them in place.');
    assert.equal(resizableLine(1, false), '1 of the outdated Pods differs from the live template only in CPU and memory, but this API server has no resize subresource (Kubernetes before 1.33): --restart brings them current.');
    const text = formatResize({
      served: true,
      dryRun: false,
      confirmed: true,
      resized: [{ namespace: 'shop', name: 'a', changes: [{ container: 'envoy', field: 'requests.cpu', before: '50m', after: '80m' }], restartsContainers: [] }],
      notResized: [{ namespace: 'shop', name: 'p', why: 'the API server refused the resize: no' }],
      skipped: [],
      pending: [{ namespace: 'shop', name: 'b', condition: 'PodResizePending', reason: 'Deferred', message: '' }],
      failed: [],
    });
    assert.equal(text, [
      '',
      'Resized in place (pods/resize), recorded as current:',
      '  resized shop/a: envoy requests.cpu 50m -> 80m',
      'Not resized (left to --restart): shop/p: the API server refused the resize: no.',
      'Resize not applied by the kubelet: shop/b (PodResizePending Deferred).',
      '',
    ].join('\n'));
  });
});

describe('podQosClass: as the API server computes it', () => {
  const pod = (containers: JsonObject[], resources?: JsonObject): JsonObject => ({ spec: { containers, ...(resources === undefined ? {} : { resources }) } });
  const guaranteed = { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '0.1', memory: '64Mi' } };
  it('Guaranteed, Burstable, BestEffort; Pod-level values first', () => {
    assert.equal(podQosClass(pod([{ name: 'a', resources: guaranteed }, { name: 'b', resources: guaranteed }])), 'Guaranteed');
    assert.equal(podQosClass(pod([{ name: 'a', resources: guaranteed }, { name: 'b' }])), 'Burstable');
    assert.equal(podQosClass(pod([{ name: 'a' }, { name: 'b', resources: { requests: { cpu: '0' } } }])), 'BestEffort');
    assert.equal(podQosClass(pod([{ name: 'a', resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '200m', memory: '64Mi' } } }])), 'Burstable');
    assert.equal(podQosClass(pod([{ name: 'a' }], { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } })), 'Guaranteed');
    assert.equal(podQosClass(pod([{ name: 'a', resources: { limits: { cpu: 'lots' } } }])), undefined);
  });
});
