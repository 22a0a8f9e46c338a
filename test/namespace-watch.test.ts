import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { NamespaceLabels, slimNamespace } from '../src/kube/watches/namespace-labels.js';
import { FakeApiServer } from './helpers/fake-api-server.js';

const until = async (what: string, probe: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

describe('the Namespace watch keeps labels and only the envoy-injector.io/ annotations (issue 28)', () => {
  let fake: FakeApiServer;
  let watch: NamespaceLabels;
  before(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', {
      metadata: {
        name: 'shop',
        labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' },
        annotations: { 'envoy-injector.io/proxy-cpu': '200m', [LAST_APPLIED]: 'x'.repeat(5_000), 'example.com/owner': 'team' },
        managedFields: [{ manager: 'kubectl', operation: 'Apply', fieldsV1: { 'f:metadata': {} } }],
      },
    });
    fake.apply('namespaces', { metadata: { name: 'plain' } });
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
    watch = new NamespaceLabels({ kubeConfig, backoff: { initialMs: 10, maxMs: 50 }, lookupTimeoutMs: 1_000, log: pino({ level: 'silent' }) });
    watch.start();
    await until('the Namespace watch synced', async () => watch.problem() === undefined);
  });
  after(async () => {
    watch.stop();
    await fake.close();
  });

  it('slimNamespace keeps name, resourceVersion, labels and our annotations, nothing else', () => {
    const slim = slimNamespace({
      metadata: { name: 'a', resourceVersion: '7', uid: 'u', labels: { x: 'y' }, annotations: { 'envoy-injector.io/proxy-memory': '1Gi', [LAST_APPLIED]: '{}' }, managedFields: [{ manager: 'm' }] },
    });
    assert.deepEqual(slim, { metadata: { name: 'a', resourceVersion: '7', labels: { x: 'y' }, annotations: { 'envoy-injector.io/proxy-memory': '1Gi' } } });
    assert.deepEqual(slimNamespace({ metadata: { name: 'b', annotations: { other: 'x' } } }), { metadata: { name: 'b' } });
  });

  it('a watched namespace: its labels and only its envoy-injector.io/ annotations', async () => {
    assert.deepEqual(await watch.metadataOf('shop'), {
      labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' },
      annotations: { 'envoy-injector.io/proxy-cpu': '200m' },
    });
    assert.deepEqual(await watch.metadataOf('plain'), { labels: {}, annotations: undefined });
  });

  it('a cached namespace is answered at once, not as a promise: the webhook then answers in the turn that parsed the review', () => {
    const metadata = watch.metadataOf('shop');
    assert.ok(!(metadata instanceof Promise), 'a promise for a namespace in the cache');
    assert.equal(metadata.labels['envoy-injector.io/inject'], 'enabled');
    // One object per cached namespace, not one per review.
    assert.equal(watch.metadataOf('shop'), metadata);
  });

  it('a changed annotation arrives by the watch', async () => {
    fake.apply('namespaces', { metadata: { name: 'plain', annotations: { 'envoy-injector.io/proxy-memory': '256Mi', [LAST_APPLIED]: '{}' } } });
    await until('the new annotation', async () => (await watch.metadataOf('plain')).annotations?.['envoy-injector.io/proxy-memory'] === '256Mi');
    assert.deepEqual((await watch.metadataOf('plain')).annotations, { 'envoy-injector.io/proxy-memory': '256Mi' });
  });

  it('a namespace not yet cached is read directly, slimmed alike', async () => {
    watch.stop();
    fake.apply('namespaces', { metadata: { name: 'late', labels: { a: 'b' }, annotations: { 'envoy-injector.io/proxy-cpu': '1', other: 'x' } } });
    assert.deepEqual(await watch.metadataOf('late'), { labels: { a: 'b' }, annotations: { 'envoy-injector.io/proxy-cpu': '1' } });
  });
});
