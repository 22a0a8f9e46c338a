import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { parseTemplateData, type TemplateSet } from '../src/injection/index.js';
import { PolicySync, POLICY_FIELD_MANAGER } from '../src/kube/policy-sync.js';
import { templatesFingerprint, TEMPLATES_ANNOTATION } from '../src/policy/compile-policy.js';
import { FakeApiServer } from './helpers/fake-api-server.js';

/** The controller's loop against a fake API server: what it sends, retries, and which set wins. */

const log = pino({ level: 'silent' });
const BACKOFF = { initialMs: 10, maxMs: 40 };

function templates(image: string): TemplateSet {
  return parseTemplateData({ config: `containers:\n  - name: envoy\n    image: ${image}\n` });
}

async function until(what: string, condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(10);
  }
}

describe('PolicySync', () => {
  let server: FakeApiServer;
  let kubeConfig: KubeConfig;
  before(async () => {
    server = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(server.writeKubeconfig());
  });
  after(async () => {
    await server.close();
  });

  const stored = (name: string) => server.get('mutatingadmissionpolicies', undefined, name);
  const storedFingerprint = (name: string) => (stored(name)?.metadata['annotations'] as Record<string, string> | undefined)?.[TEMPLATES_ANNOTATION];

  it('creates the policy by server-side apply, with its field manager and force, and is then in sync', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'first' }, backoff: BACKOFF, log });
    const set = templates('envoy:1');
    assert.equal(sync.isInSync(set), false);
    sync.apply(set);
    await until('the policy in sync', () => sync.isInSync(set));
    assert.equal(storedFingerprint('first'), templatesFingerprint(set));
    const patch = server.requests.find((request) => request.method === 'PATCH' && request.path.endsWith('/mutatingadmissionpolicies/first'));
    assert.equal(patch?.query['fieldManager'], POLICY_FIELD_MANAGER);
    assert.equal(patch?.query['force'], 'true');
    assert.equal(server.get('mutatingadmissionpolicies', undefined, 'first')?.kind, 'MutatingAdmissionPolicy');
    sync.stop();
  });

  it('retries a failed apply with backoff, out of sync until it succeeds', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'retried' }, backoff: BACKOFF, log });
    const set = templates('envoy:2');
    server.failNext(3, 503, (path) => path.endsWith('/retried'));
    const before = server.requests.length;
    sync.apply(set);
    await until('the policy in sync after the failures', () => sync.isInSync(set));
    const attempts = server.requests.slice(before).filter((request) => request.path.endsWith('/retried'));
    assert.deepEqual(attempts.map((request) => request.status), [503, 503, 503, 201]);
    sync.stop();
  });

  it('the latest set wins: one still waiting is replaced, even while a failing apply is being retried', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'latest' }, backoff: { initialMs: 200, maxMs: 200 }, log });
    const [a, b, c] = [templates('envoy:a'), templates('envoy:b'), templates('envoy:c')];
    server.failNext(1, 500, (path) => path.endsWith('/latest'));
    sync.apply(a);
    await until('the first attempt', () => server.requests.some((request) => request.path.endsWith('/latest')));
    sync.apply(b);
    sync.apply(c);
    await until('the last set in sync', () => sync.isInSync(c));
    assert.equal(storedFingerprint('latest'), templatesFingerprint(c));
    assert.equal(sync.isInSync(a) || sync.isInSync(b), false);
    sync.stop();
  });

  it('stop() ends the retries', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'stopped' }, backoff: BACKOFF, log });
    server.failNext(1_000, 500, (path) => path.endsWith('/stopped'));
    sync.apply(templates('envoy:s'));
    await until('a first failure', () => server.requests.some((request) => request.path.endsWith('/stopped')));
    sync.stop();
    await sleep(100);
    const count = server.requests.filter((request) => request.path.endsWith('/stopped')).length;
    await sleep(300);
    assert.equal(server.requests.filter((request) => request.path.endsWith('/stopped')).length, count, 'no attempt after stop()');
    server.failNext(0);
  });
});
