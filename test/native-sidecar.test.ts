import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { connectToCluster } from '../src/kube/api/cluster-connection.js';
import { ClusterVersionCheck, parseKubernetesVersion, supportsNativeSidecars } from '../src/kube/watches/cluster-version.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { NAMESPACE, startHarness, until, type Harness } from './helpers/injector-harness.js';
import type { DecodedReview } from './helpers/reviews.js';
import { captureLog } from './helpers/server.js';

/** Where the patch puts the proxy: `native` (first init container, restartPolicy Always) or `classic`. */
function proxyPlacement(review: DecodedReview): 'native' | 'classic' | 'none' {
  for (const op of review.patch) {
    const values = op.path === '/spec/initContainers' ? (op.value as { name: string; restartPolicy?: string }[]) : op.path === '/spec/initContainers/0' ? [op.value as { name: string; restartPolicy?: string }] : [];
    if (values.some((c) => c.name === 'envoy' && c.restartPolicy === 'Always')) return 'native';
    if (op.path === '/spec/containers/-' && (op.value as { name: string }).name === 'envoy') return 'classic';
  }
  return 'none';
}

/** A fake API server with an enabled namespace `shop` and a one-container template. */
async function fakeWithEnabledShop(): Promise<FakeApiServer> {
  const fake = await FakeApiServer.start();
  fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
  fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: NAMESPACE }, data: { config: 'containers: [{name: envoy, image: "e:1"}]' } });
  return fake;
}

describe('--native-sidecar auto follows the API server version', () => {
  let fake: FakeApiServer;
  let harness: Harness | undefined;
  beforeEach(async () => {
    fake = await fakeWithEnabledShop();
  });
  afterEach(async () => {
    await harness?.injector.stop();
    harness = undefined;
    await fake.close();
  });

  const cases = [
    { version: { major: '1', minor: '28', gitVersion: 'v1.28.9' }, expected: 'classic' },
    { version: { major: '1', minor: '30', gitVersion: 'v1.30.2' }, expected: 'native' },
    { version: { major: '1', minor: '29+', gitVersion: 'v1.29.4-eks-036c24b' }, expected: 'native' },
  ] as const;
  for (const { version, expected } of cases) {
    it(`${version.gitVersion}: ${expected} sidecars`, async () => {
      fake.version = { ...version };
      harness = await startHarness(fake, ['--native-sidecar', 'auto']);
      const started = harness;
      await until('the version read', () => (started.log.lines.some((line) => String(line['msg']).startsWith(`Kubernetes ${version.gitVersion}`)) ? true : undefined));
      await until('ready', async () => ((await started.readiness()).status === 200 ? true : undefined));
      const review = await until('namespace labels', async () => {
        const candidate = await started.review({ namespace: 'shop' });
        return candidate.audit['reason'] === 'namespace_enabled' ? candidate : undefined;
      });
      assert.equal(proxyPlacement(review), expected);
      // The Pod's own annotation wins over the server's choice.
      const opposite = expected === 'native' ? 'false' : 'true';
      const overridden = await started.review({ namespace: 'shop', annotations: { 'envoy-injector.io/native-sidecar': opposite } });
      assert.equal(proxyPlacement(overridden), expected === 'native' ? 'classic' : 'native');
    });
  }

  it('asks the version again on a reconnect, at most once a minute', async () => {
    fake.version = { major: '1', minor: '28', gitVersion: 'v1.28.9' };
    harness = await startHarness(fake, ['--native-sidecar', 'auto']);
    const started = harness;
    await until('1.28 seen', () => (started.log.lines.some((line) => String(line['msg']).startsWith('Kubernetes v1.28.9')) ? true : undefined));
    fake.version = { major: '1', minor: '30', gitVersion: 'v1.30.2' };
    // Rechecks are at most once a minute; a reconnect after that picks the upgrade up.
    const versionRequests = () => fake.requests.filter((r) => r.path === '/version').length;
    const before = versionRequests();
    fake.dropWatches();
    await until('watches back (ConfigMap, Namespaces, Nodes)', () => (fake.openWatches() === 3 ? true : undefined));
    assert.equal(versionRequests(), before, 'not within the minute');
    assert.ok(before >= 1);
  });

  it('--native-sidecar on and off ignore the version', async () => {
    fake.version = { major: '1', minor: '30', gitVersion: 'v1.30.2' };
    harness = await startHarness(fake, ['--native-sidecar', 'off']);
    await until('ready', async () => ((await harness?.readiness())?.status === 200 ? true : undefined));
    assert.equal(proxyPlacement(await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } })), 'classic');
    assert.ok(!fake.requests.some((r) => r.path === '/version'), 'no version asked');
    await harness.injector.stop();
    fake.version = { major: '1', minor: '27', gitVersion: 'v1.27.1' };
    harness = await startHarness(fake, ['--native-sidecar', 'on']);
    await until('ready', async () => ((await harness?.readiness())?.status === 200 ? true : undefined));
    assert.equal(proxyPlacement(await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } })), 'native');
  });
});

describe('ClusterVersionCheck', () => {
  it('picks up a control-plane upgrade on recheck', async () => {
    const fake = await FakeApiServer.start();
    try {
      fake.version = { major: '1', minor: '28', gitVersion: 'v1.28.9' };
      const connection = connectToCluster({ kubeconfig: fake.writeKubeconfig(), env: {} });
      assert.ok(connection !== undefined);
      const seen: boolean[] = [];
      const check = new ClusterVersionCheck({ kubeConfig: connection.kubeConfig, log: captureLog().logger, backoff: { initialMs: 10, maxMs: 50 }, onNativeSidecar: (native) => seen.push(native), minRecheckMs: 0 });
      check.start();
      await until('first answer', () => (seen.length > 0 ? true : undefined));
      fake.version = { major: '1', minor: '30', gitVersion: 'v1.30.2' };
      await check.recheck();
      assert.deepEqual(seen, [false, true]);
      // An API server that fails is retried with backoff.
      fake.failNext(2, 503, (path) => path === '/version');
      fake.version = { major: '1', minor: '28', gitVersion: 'v1.28.9' };
      await check.recheck();
      await until('answer after the failures', () => (seen.length === 3 ? true : undefined));
      assert.deepEqual(seen, [false, true, false]);
      check.stop();
    } finally {
      await fake.close();
    }
  });
});

describe('Kubernetes version parsing', () => {
  const cases: [Parameters<typeof parseKubernetesVersion>[0], [number, number] | undefined, boolean][] = [
    [{ major: '1', minor: '29', gitVersion: 'v1.29.0' }, [1, 29], true],
    [{ major: '1', minor: '28+', gitVersion: 'v1.28.3-gke.1' }, [1, 28], false],
    [{ major: '', minor: '', gitVersion: 'v1.31.1+k3s1' }, [1, 31], true],
    [{ major: '2', minor: '0', gitVersion: 'v2.0.0' }, [2, 0], true],
    [{ major: '', minor: '', gitVersion: 'unknown' }, undefined, false],
  ];
  for (const [info, expected, native] of cases) {
    it(`${JSON.stringify(info)} → ${JSON.stringify(expected)}`, () => {
      const parsed = parseKubernetesVersion(info);
      assert.deepEqual(parsed, expected);
      assert.equal(parsed !== undefined && supportsNativeSidecars(parsed), native);
    });
  }
});

describe('--native-sidecar auto follows the oldest kubelet too', () => {
  let fake: FakeApiServer;
  let harness: Harness | undefined;
  const node = (name: string, kubeletVersion: string) => ({ metadata: { name }, status: { nodeInfo: { kubeletVersion } } });
  beforeEach(async () => {
    fake = await fakeWithEnabledShop();
    fake.version = { major: '1', minor: '30', gitVersion: 'v1.30.2' };
  });
  afterEach(async () => {
    await harness?.injector.stop();
    harness = undefined;
    await fake.close();
  });

  it('a 1.28 kubelet under a 1.30 API server: classic sidecars until it is upgraded or gone', async () => {
    fake.apply('nodes', node('new', 'v1.30.1'));
    fake.apply('nodes', node('old', 'v1.28.5'));
    harness = await startHarness(fake, ['--native-sidecar', 'auto']);
    const started = harness;
    await until('ready', async () => ((await started.readiness()).status === 200 ? true : undefined));
    const placement = async () => proxyPlacement(await started.review({ namespace: 'shop' }));
    await until('the version read', () => (started.log.lines.some((line) => String(line['msg']).startsWith('Kubernetes v1.30.2')) ? true : undefined));
    assert.equal(await placement(), 'classic', 'node "old" runs kubelet 1.28: a native sidecar there would never let the Pod start');
    fake.apply('nodes', node('old', 'v1.29.0'));
    await until('native once every kubelet is 1.29+', async () => ((await placement()) === 'native' ? true : undefined));
    fake.apply('nodes', node('older', 'v1.27.3'));
    await until('classic again with a 1.27 node', async () => ((await placement()) === 'classic' ? true : undefined));
    fake.remove('nodes', undefined, 'older');
    await until('native again when it is gone', async () => ((await placement()) === 'native' ? true : undefined));
    // Read-only, and only what is needed.
    assert.ok(fake.requests.filter((r) => r.path.startsWith('/api/v1/nodes')).every((r) => r.method === 'GET'));
  });

  it('not ready until the kubelet versions are known, and says so', async () => {
    fake.apply('nodes', node('new', 'v1.30.1'));
    fake.failNext(100_000, 503, (path) => path === '/api/v1/nodes');
    harness = await startHarness(fake, ['--native-sidecar', 'auto']);
    const started = harness;
    const problem = 'the Node watch has not synced yet: the kubelet versions that decide native sidecars (--native-sidecar auto) are unknown';
    const unready = await until('unready naming the Node watch', async () => {
      const answer = await started.readiness();
      return answer.status === 503 && answer.body.problems.includes(problem) ? answer : undefined;
    });
    assert.equal((unready.body.checks as Record<string, unknown>)['nodes'], problem);
    fake.failNext(0);
    await until('ready', async () => ((await started.readiness()).status === 200 ? true : undefined));
  });

  it('--native-sidecar on or off: no Node watch at all', async () => {
    harness = await startHarness(fake, ['--native-sidecar', 'on']);
    const started = harness;
    await until('ready', async () => ((await started.readiness()).status === 200 ? true : undefined));
    assert.ok(!fake.requests.some((r) => r.path.startsWith('/api/v1/nodes')));
  });
});
