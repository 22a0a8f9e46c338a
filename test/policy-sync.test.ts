import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { parseTemplateData, type TemplateSet } from '../src/injection/index.js';
import { PolicySync, POLICY_FIELD_MANAGER } from '../src/kube/policy-sync.js';
import { compilePolicy, POLICY_HASH_ANNOTATION, templatesFingerprint, TEMPLATES_ANNOTATION } from '../src/policy/compile-policy.js';
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
  const policyPatches = (name: string, from = 0) => server.requests.slice(from).filter((request) => request.method === 'PATCH' && request.path.endsWith(`/mutatingadmissionpolicies/${name}`));
  const storedFingerprint = (name: string) => (stored(name)?.metadata['annotations'] as Record<string, string> | undefined)?.[TEMPLATES_ANNOTATION];

  it('creates the policy and its binding by server-side apply, with its field manager and force, and is then in sync', async () => {
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
    const binding = server.get('mutatingadmissionpolicybindings', undefined, 'first');
    assert.equal((binding?.['spec'] as { policyName?: string } | undefined)?.policyName, 'first');
    assert.equal(binding?.['apiVersion'], 'admissionregistration.k8s.io/v1');
    sync.stop();
  });

  it('retries a failed apply with backoff, out of sync until it succeeds', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'retried' }, backoff: BACKOFF, log });
    const set = templates('envoy:2');
    server.failNext(3, 503, (path) => path.endsWith('/retried'));
    const before = server.requests.length;
    sync.apply(set);
    await until('the policy in sync after the failures', () => sync.isInSync(set));
    // Each attempt reads the policy first (a newer release's must not be overwritten), then applies it.
    const attempts = server.requests.slice(before).filter((request) => request.path.endsWith('/mutatingadmissionpolicies/retried'));
    assert.deepEqual(attempts.map((request) => `${request.method} ${request.status}`), ['GET 503', 'GET 503', 'GET 503', 'GET 404', 'PATCH 201']);
    sync.stop();
  });

  it('the latest set wins: one still waiting is replaced, even while a failing apply is being retried', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'latest' }, backoff: { initialMs: 200, maxMs: 200 }, log });
    const [a, b, c] = [templates('envoy:a'), templates('envoy:b'), templates('envoy:c')];
    server.failNext(1, 500, (path) => path.endsWith('/latest'));
    sync.apply(a);
    await until('the first attempt', () => policyPatches('latest').length > 0);
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
    const calls = () => server.requests.filter((request) => request.path.endsWith('/mutatingadmissionpolicies/stopped')).length;
    try {
      await until('a first failure', () => calls() > 0);
    } finally {
      sync.stop();
    }
    await sleep(100);
    const count = calls();
    await sleep(300);
    assert.equal(calls(), count, 'no attempt after stop()');
    server.failNext(0);
  });

  describe('the API version the cluster serves', () => {
    after(() => {
      server.servedPolicyVersions = ['v1'];
    });
    const versionOf = (path: string) => path.split('/')[3];

    it('v1beta1 where only it is served (1.34-1.35); v1 once an upgraded API server serves it, without a restart', async () => {
      server.servedPolicyVersions = ['v1beta1'];
      const sync = new PolicySync({ kubeConfig, settings: { name: 'moved' }, backoff: BACKOFF, log, resyncMs: 50 });
      const set = templates('envoy:m');
      sync.apply(set);
      await until('in sync through v1beta1', () => sync.isInSync(set));
      assert.equal(sync.apiVersion, 'v1beta1');
      assert.deepEqual([...new Set(policyPatches('moved').map((request) => versionOf(request.path)))], ['v1beta1']);
      assert.equal(stored('moved')?.['apiVersion'], 'admissionregistration.k8s.io/v1beta1');
      // The API server is upgraded: v1 is served, v1beta1 no longer.
      const upgraded = server.requests.length;
      server.servedPolicyVersions = ['v1'];
      await until('both objects applied again through v1', () => sync.isInSync(set) && sync.apiVersion === 'v1');
      const after = server.requests.slice(upgraded).filter((request) => request.method === 'PATCH');
      assert.deepEqual(after.map((request) => `${versionOf(request.path)} ${request.path.split('/')[4]}`), ['v1 mutatingadmissionpolicies', 'v1 mutatingadmissionpolicybindings']);
      assert.equal(stored('moved')?.['apiVersion'], 'admissionregistration.k8s.io/v1');
      sync.stop();
    });

    it('auto takes v1 when both are served; a v1beta1 preference holds while it is served, then gives way', async () => {
      server.servedPolicyVersions = ['v1', 'v1beta1'];
      const auto = new PolicySync({ kubeConfig, settings: { name: 'auto' }, backoff: BACKOFF, log });
      const pinned = new PolicySync({ kubeConfig, settings: { name: 'pinned' }, apiVersion: 'v1beta1', backoff: BACKOFF, log, resyncMs: 50 });
      const set = templates('envoy:p');
      auto.apply(set);
      pinned.apply(set);
      await until('both in sync', () => auto.isInSync(set) && pinned.isInSync(set));
      assert.equal(auto.apiVersion, 'v1');
      assert.equal(pinned.apiVersion, 'v1beta1');
      server.servedPolicyVersions = ['v1'];
      await until('the preference given up for v1', () => pinned.isInSync(set) && pinned.apiVersion === 'v1');
      auto.stop();
      pinned.stop();
    });

    it('a cluster that serves neither: nothing applied, the problem names the flags and 1.36; applied once the API appears', async () => {
      server.servedPolicyVersions = [];
      const sync = new PolicySync({ kubeConfig, settings: { name: 'absent' }, backoff: BACKOFF, log });
      const set = templates('envoy:n');
      sync.apply(set);
      await until('a problem reported', () => sync.problem !== undefined);
      assert.match(sync.problem ?? '', /serves no MutatingAdmissionPolicy API: Kubernetes 1\.36\+ serves admissionregistration\.k8s\.io\/v1 by default; 1\.34-1\.35 serve v1beta1 only with --feature-gates=MutatingAdmissionPolicy=true/);
      assert.equal(sync.isInSync(set), false);
      assert.equal(policyPatches('absent').length, 0);
      server.servedPolicyVersions = ['v1'];
      await until('in sync once served', () => sync.isInSync(set));
      assert.equal(sync.problem, undefined);
      sync.stop();
    });
  });

  it('with an owner ClusterRole: both objects name it (uid) as their owner; without it, nothing is applied', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'owned' }, ownerClusterRole: 'release-role', backoff: BACKOFF, log });
    const set = templates('envoy:o');
    sync.apply(set);
    await until('a problem reported', () => sync.problem !== undefined);
    assert.match(sync.problem ?? '', /ClusterRole release-role, the owner of the policy and its binding, does not exist/);
    assert.equal(policyPatches('owned').length, 0, 'never applied without its owner: an uninstall would leave it behind');
    const role = server.apply('clusterroles', { metadata: { name: 'release-role' }, rules: [] });
    await until('in sync once the owner exists', () => sync.isInSync(set));
    const expected = [{ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'release-role', uid: role.metadata['uid'] }];
    for (const resource of ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings']) {
      assert.deepEqual(server.get(resource, undefined, 'owned')?.metadata['ownerReferences'], expected, resource);
    }
    sync.stop();
  });

  it('templates past a CEL limit: nothing applied, the last good policy stays, refused and the problem say why, until a good set', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'limits' }, backoff: BACKOFF, log });
    const good = templates('envoy:good');
    sync.apply(good);
    await until('the good set in sync', () => sync.isInSync(good));
    const applies = policyPatches('limits').length;
    const big = parseTemplateData({ config: `containers:\n  - name: envoy\n    image: envoy:big\n    args: ["${'x'.repeat(100_001)}"]\n` });
    sync.apply(big);
    await until('the refusal', () => sync.refused);
    assert.equal(sync.isInSync(big), false);
    assert.match(sync.problem ?? '', /the last good policy stays: template "config": policy expression variables\.t0Containers is [\d,]+ code points; the API server refuses CEL expressions over 100,000/);
    await sleep(100);
    assert.equal(policyPatches('limits').length, applies, 'no apply, and no retry of a set that cannot pass');
    assert.equal(storedFingerprint('limits'), templatesFingerprint(good), 'the last good policy is the one in the cluster');
    const next = templates('envoy:next');
    sync.apply(next);
    await until('a good set in sync again', () => sync.isInSync(next));
    assert.equal(sync.refused, false);
    sync.stop();
  });

  it('two releases\' replicas with other settings: the older stands by, the newer applies, and they never take turns', async () => {
    const set = templates('envoy:g');
    const older = new PolicySync({ kubeConfig, settings: { name: 'rolling', failurePolicy: 'Fail', generation: 1 }, backoff: BACKOFF, log, resyncMs: 30 });
    older.apply(set);
    await until('the older release in sync', () => older.isInSync(set));
    const newer = new PolicySync({ kubeConfig, settings: { name: 'rolling', failurePolicy: 'Ignore', generation: 2 }, backoff: BACKOFF, log, resyncMs: 30 });
    newer.apply(set);
    await until('the newer release in sync', () => newer.isInSync(set));
    await until('the older one standing by', () => older.supersededBy === 2);
    const applies = policyPatches('rolling').length;
    await sleep(300); // ten resync periods of both
    assert.equal(policyPatches('rolling').length, applies, 'no apply after the newer one took over: no fight');
    assert.equal((stored('rolling')?.['spec'] as { failurePolicy?: string }).failurePolicy, 'Ignore', 'the newer settings are in the cluster');
    // A template change reaches the cluster through the newer one only.
    const next = templates('envoy:g2');
    older.apply(next);
    newer.apply(next);
    await until('the newer one applies the change', () => newer.isInSync(next));
    await sleep(100);
    assert.equal((stored('rolling')?.['spec'] as { failurePolicy?: string }).failurePolicy, 'Ignore');
    // The newer one goes (a rollback deletes it and its policy): the older puts its own back.
    newer.stop();
    server.remove('mutatingadmissionpolicies', undefined, 'rolling');
    await until('the older one applies again', () => older.isInSync(next) && older.supersededBy === undefined);
    assert.equal((stored('rolling')?.['spec'] as { failurePolicy?: string }).failurePolicy, 'Fail');
    older.stop();
  });

  it('the policy-hash annotation covers the settings as well as the templates', () => {
    const set = templates('envoy:h');
    const hash = (settings: Parameters<typeof compilePolicy>[1]) => ((compilePolicy(set, settings).policy['metadata'] as { annotations: Record<string, string> }).annotations)[POLICY_HASH_ANNOTATION];
    const base = hash({});
    for (const settings of [{ failurePolicy: 'Ignore' as const }, { nativeSidecar: true }, { excludedNamespaces: ['legacy'] }, { allowedOverrides: [] }]) {
      assert.notEqual(hash(settings), base, JSON.stringify(settings));
    }
    assert.equal(hash({ apiVersion: 'v1beta1' }), base, 'the API version is not the objects\' shape');
    assert.match(base ?? '', /^sha256:[0-9a-f]{16}$/);
  });

  it('a policy or binding deleted or changed by someone else is applied again, out of sync meanwhile', async () => {
    const sync = new PolicySync({ kubeConfig, settings: { name: 'drift' }, backoff: BACKOFF, log, resyncMs: 50 });
    const set = templates('envoy:d');
    sync.apply(set);
    await until('in sync', () => sync.isInSync(set));
    for (const [what, disturb] of [
      ['policy deleted', () => server.remove('mutatingadmissionpolicies', undefined, 'drift')],
      ['binding deleted', () => server.remove('mutatingadmissionpolicybindings', undefined, 'drift')],
      ['policy edited', () => server.apply('mutatingadmissionpolicies', { ...stored('drift'), metadata: { name: 'drift', annotations: { [TEMPLATES_ANNOTATION]: 'config=sha256:0000000000000000' } } })],
    ] as const) {
      const before = policyPatches('drift').length;
      disturb();
      await until(`${what}: applied again`, () => policyPatches('drift').length > before && sync.isInSync(set));
      assert.equal(storedFingerprint('drift'), templatesFingerprint(set), what);
      assert.ok(server.get('mutatingadmissionpolicybindings', undefined, 'drift') !== undefined, what);
    }
    sync.stop();
  });
});
