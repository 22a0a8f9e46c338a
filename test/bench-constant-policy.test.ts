import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { injectedAlike, injectedShape, type InjectedPod } from '../bench/constant-policy.js';

const seed = { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'myapp-', labels: { app: 'myapp' } }, spec: { containers: [{ name: 'myapp-container', image: 'busybox' }] } };
const token = { name: 'kube-api-access-abcde', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true };
const app = { name: 'myapp-container', image: 'busybox', terminationMessagePath: '/dev/termination-log', terminationMessagePolicy: 'File', imagePullPolicy: 'Always', volumeMounts: [token] };
const envoy = { name: 'envoy', image: 'envoy', restartPolicy: 'Always', terminationMessagePath: '/dev/termination-log', volumeMounts: [{ name: 'envoy-conf', mountPath: '/etc/envoy' }, token] };
const volumes = [{ name: 'envoy-conf', configMap: { name: 'envoy' } }, { name: 'kube-api-access-abcde', projected: { sources: [] } }];
const metadata = { labels: { app: 'myapp', 'envoy-injector.io/injected': 'true' }, annotations: { 'envoy-injector.io/status': '{}' } };

describe('the constant policy of the bench (constant-policy.ts)', () => {
  it('adds a native sidecar, an init container, as the policy stored it, without what the API server adds itself', () => {
    const stored: InjectedPod = { metadata, spec: { containers: [app], initContainers: [envoy], volumes } };
    const { operations, shape } = injectedShape(stored, seed);
    assert.deepEqual(operations.map((operation) => operation.path), ['/spec/initContainers', '/spec/volumes/-', '/metadata/annotations', '/metadata/labels/envoy-injector.io~1injected']);
    assert.deepEqual(operations[0]?.value, [{ name: 'envoy', image: 'envoy', restartPolicy: 'Always', volumeMounts: [{ name: 'envoy-conf', mountPath: '/etc/envoy' }] }]);
    assert.deepEqual((shape['spec'] as { initContainers: unknown[] }).initContainers, operations[0]?.value);
  });

  it('adds a classic sidecar at the end of the containers, and no init containers', () => {
    const { restartPolicy: _native, ...classic } = envoy;
    const stored: InjectedPod = { metadata, spec: { containers: [app, classic], volumes } };
    const { operations } = injectedShape(stored, seed);
    assert.deepEqual(operations.map((operation) => operation.path).slice(0, 2), ['/spec/containers/-', '/spec/volumes/-']);
  });

  it('tells a Pod injected alike by the names of its containers and init containers', () => {
    const native: InjectedPod = { metadata, spec: { containers: [app], initContainers: [envoy], volumes } };
    assert.equal(injectedAlike(native, native), true);
    assert.equal(injectedAlike({ metadata, spec: { containers: [app], volumes } }, native), false, 'the sidecar missing: the same containers, not the same init containers');
  });
});
