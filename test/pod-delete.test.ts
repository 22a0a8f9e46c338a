import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeRequestError } from '../src/kube/api/kube-json.js';
import { deletePodByUid, uidPreconditionBody } from '../src/kube/api/pod-delete.js';
import { FakeApiServer } from './helpers/fake-api-server.js';

/**
 * The CNI agent's repair deletes a Pod by its uid (docs/design.md §11, CNI
 * mode): a StatefulSet's new Pod of the same name is never the one deleted.
 * Against the fake API server, which checks DeleteOptions' uid precondition
 * as the real one does (test/e2e/cni-agent-node-scope.test.ts checks the
 * real one).
 */

describe('deletePodByUid', () => {
  let fake: FakeApiServer;
  let kubeConfig: KubeConfig;
  before(async () => {
    fake = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
  });
  after(() => fake.close());

  const pod = (name: string) => fake.apply('pods', { metadata: { name, namespace: 'shop' }, spec: { nodeName: 'ei-node', containers: [{ name: 'app', image: 'app:1' }] } });

  it('sends the uid as precondition', () => {
    assert.deepEqual(uidPreconditionBody('u-1'), { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: 'u-1' } });
  });

  it('deletes the Pod it read', async () => {
    const read = pod('web-0');
    assert.equal(await deletePodByUid(kubeConfig, { namespace: 'shop', name: 'web-0', uid: String(read.metadata['uid']) }), 'deleted');
    assert.equal(fake.get('pods', 'shop', 'web-0'), undefined);
  });

  it('a new Pod of the same name (a StatefulSet\'s) is kept: replaced, not an error', async () => {
    const read = pod('db-0');
    fake.remove('pods', 'shop', 'db-0');
    const replacement = pod('db-0');
    assert.notEqual(replacement.metadata['uid'], read.metadata['uid']);
    assert.equal(await deletePodByUid(kubeConfig, { namespace: 'shop', name: 'db-0', uid: String(read.metadata['uid']) }), 'replaced');
    assert.equal(fake.get('pods', 'shop', 'db-0')?.metadata['uid'], replacement.metadata['uid']);
  });

  it('a Pod already gone: gone; a refusal: an error; no uid: an error, nothing sent', async () => {
    assert.equal(await deletePodByUid(kubeConfig, { namespace: 'shop', name: 'never', uid: 'u-x' }), 'gone');
    const read = pod('api-0');
    fake.failNext(1, 403, (path) => path.endsWith('/pods/api-0'));
    await assert.rejects(deletePodByUid(kubeConfig, { namespace: 'shop', name: 'api-0', uid: String(read.metadata['uid']) }), (error: unknown) => error instanceof KubeRequestError && error.statusCode === 403);
    const before = fake.requests.length;
    await assert.rejects(deletePodByUid(kubeConfig, { namespace: 'shop', name: 'api-0', uid: '' }), /has no uid: not deleted by name alone/);
    assert.equal(fake.requests.length, before);
    assert.notEqual(fake.get('pods', 'shop', 'api-0'), undefined);
  });
});
