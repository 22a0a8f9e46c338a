import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { parseDuration } from '../../src/commands/serve.js';
import { startTcpBalancer } from '../helpers/tcp-balancer.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, createPodsContinuously, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { serviceAddress, startChartInjector, waitReady, type ChartInjector } from './injector-process.js';

/**
 * Shutdown with the API server as the client (issue 10): its Go HTTP client
 * dials spare connections when several webhook calls arrive at once, and
 * those may never carry a request. The chart's settings (SHUTDOWN_DELAY 2s,
 * SHUTDOWN_TIMEOUT 10s) come from the installed Deployment.
 */
forEachKubeVersion('shutdown with the API server as the client', (plane) => {
  let release: Release | undefined;
  const namespace = uniqueName('shutdown');
  const injectors: ChartInjector[] = [];
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  let podCount = 0;
  const createPod = (): Promise<V1Pod> => core().createNamespacedPod({ namespace, body: plainPod(`pod-${++podCount}`) });

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('shut'), namespace: uniqueName('shut-system') });
    await createNamespace(plane(), namespace, { 'envoy-injector.io/inject': 'enabled' });
  });
  after(async () => {
    for (const injector of injectors) await injector.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace]);
  });

  it('8 Pods created at once, SIGTERM 0.3 s later: every Pod injected, exit 0 after SHUTDOWN_DELAY, before SHUTDOWN_TIMEOUT cuts anything', async (t: TestContext) => {
    assert.ok(release !== undefined);
    const injector = await startChartInjector(plane(), release);
    injectors.push(injector);
    const delayMs = parseDuration(injector.env['SHUTDOWN_DELAY'], 'SHUTDOWN_DELAY');
    const timeoutMs = parseDuration(injector.env['SHUTDOWN_TIMEOUT'], 'SHUTDOWN_TIMEOUT');
    assert.equal(delayMs, 2_000, 'the chart\'s shutdown delay');
    await eventually('a first Pod injected', async () => (sidecar(await createPod()) === 'none' ? undefined : true), 30_000, 200);
    // The reproduction: 8 Pods at once make the API server dial spare connections; SIGTERM 0.3 s later.
    const pods = Promise.all(Array.from({ length: 8 }, () => createPod()));
    await sleep(300);
    const signalled = performance.now();
    const code = await injector.stop(20_000);
    const elapsed = performance.now() - signalled;
    assert.ok((await pods).every((pod) => sidecar(pod) !== 'none'), 'the 8 Pods were injected (the drain delay still serves)');
    t.diagnostic(`exit ${code} after ${elapsed.toFixed(0)} ms (delay ${delayMs} ms)`);
    assert.equal(code, 0);
    // It stays for the delay, then closes as soon as the last answer is out: well before the
    // timeout would cut connections (the bound is the program's, not the machine's speed).
    const log = JSON.stringify(injector.logs.slice(-3));
    assert.ok(elapsed >= delayMs, `SIGTERM to exit took ${elapsed.toFixed(0)} ms, less than the delay; log: ${log}`);
    assert.ok(elapsed < delayMs + timeoutMs, `SIGTERM to exit took ${elapsed.toFixed(0)} ms: the timeout cut connections; log: ${log}`);
  });

  it('a rolling restart of two injectors behind the Service refuses 0 Pods created continuously', async (t: TestContext) => {
    assert.ok(release !== undefined);
    // As kube-proxy would: the Service's ClusterIP and port, spread over the replicas.
    const service = await serviceAddress(plane(), release);
    const replicas: ChartInjector[] = [];
    const balancer = await startTcpBalancer(() => replicas.filter((replica) => replica.child.exitCode === null).map((replica) => replica.port), { host: service.clusterIP, port: service.port });
    try {
      const old = await startChartInjector(plane(), release, { listen: { host: '127.0.0.1', port: 0 } });
      injectors.push(old);
      replicas.push(old);
      await eventually('a first Pod injected through the balancer', async () => (sidecar(await createPod()) === 'none' ? undefined : true), 30_000, 200);

      const stream = createPodsContinuously(createPod);
      const { created, refused } = stream;
      let code: number | null;
      try {
        await eventually('Pods flowing', async () => (created.length >= 5 ? true : undefined), 20_000);
        const next = await startChartInjector(plane(), release, { listen: { host: '127.0.0.1', port: 0 } });
        injectors.push(next);
        // Behind the Service only once ready, as its endpoints are: until then it serves a throwaway certificate.
        await waitReady(next);
        replicas.push(next);
        const atStart = created.length;
        await eventually('Pods answered while both replicas run', async () => (created.length >= atStart + 5 ? true : undefined), 20_000);
        code = await old.stop(20_000);
        const afterStop = created.length;
        await eventually('Pods answered by the new replica alone', async () => (created.length >= afterStop + 5 ? true : undefined), 20_000);
      } finally {
        await stream.stop();
      }
      t.diagnostic(`${created.length} Pods created, ${refused.length} refused; balancer: ${JSON.stringify([...balancer.joined])}, ${balancer.refusedRetries} refused connects retried`);
      assert.equal(code, 0, 'the old replica exited cleanly');
      assert.deepEqual(refused, [], 'no Pod refused');
      assert.ok(created.every((pod) => sidecar(pod) !== 'none'), 'every Pod injected');
    } finally {
      await balancer.close();
    }
  });
});
