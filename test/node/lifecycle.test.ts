import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { BatchV1Api, type V1Pod } from '@kubernetes/client-node';
import { eventually } from '../e2e/cluster.js';
import { appContainer, appPod, broken, describePod, finishedAt, forEachNode, running, startedAt, statuses, terminated } from './node-suite.js';
import { NODE_NAME } from './network.js';
import type { NodeRecord } from './recorder.js';

/**
 * The proxy in the Pod's life, on a real kubelet (issue 36, scenarios 1-4),
 * with the chart's default template and the stand-in tagged as its Envoy:
 * the app waits for the proxy (native startupProbe, classic postStart hook),
 * the proxy outlives the app on shutdown (native: the kubelet's order;
 * classic: the preStop drain), and an injected Job completes. Each verdict
 * comes from what the kubelet reports through the API server (start and
 * finish times, exit codes, the Job's condition) and what the containers
 * recorded (test/node/recorder.ts).
 *
 * NODE_TIER_BREAK: hold (no hold-application), drain (a grace period too
 * short for the preStop drain), job (a classic sidecar in the Job).
 */
const READY_DELAY_SECONDS = 3;
const GRACE_SECONDS = 15;
const FINALIZER = 'node-tier.envoy-injector.io/keep';
const NATIVE_OFF = { 'envoy-injector.io/native-sidecar': 'false' };
const CAPTURE = { 'envoy-injector.io/capture': 'true', 'envoy-injector.io/capture-exclude-outbound-cidrs': '198.51.100.1/32' };
const hold = (): Record<string, string> => (broken() === 'hold' ? { 'envoy-injector.io/hold-application': 'false' } : {});
const readyAnswer = (listener: string) => (record: NodeRecord): boolean =>
  record.source === 'stand-in' && record.event === 'http' && record['listener'] === listener && record['path'] === '/ready' && record['status'] === 200;

forEachNode('the proxy in the Pod\'s life', (suite, version) => {
  let serverIp = '';
  before(async () => {
    const { recorder, createPods, waitPod } = suite();
    for (const name of ['native-hold', 'classic-hold']) recorder.configure(name, { readyDelaySeconds: READY_DELAY_SECONDS });
    await createPods([
      appPod('native-hold', hold()),
      appPod('classic-hold', { ...NATIVE_OFF, ...hold() }),
      appPod('server', { 'envoy-injector.io/inject': 'false' }),
    ]);
    const server = await waitPod('server', (pod) => pod.status?.podIP !== undefined && running('app')(pod), 'the server Pod running with an IP');
    serverIp = server.status?.podIP ?? '';
    const shutdownPod = (name: string, annotations: Record<string, string>): V1Pod => {
      const pod = appPod(name, { ...CAPTURE, ...annotations }, {
        containers: [appContainer(['--port', '8080', '--on-term-call', `${serverIp}:8080`])],
        terminationGracePeriodSeconds: broken() === 'drain' ? 1 : GRACE_SECONDS,
      });
      return { ...pod, metadata: { ...pod.metadata, finalizers: [FINALIZER] } };
    };
    await createPods([shutdownPod('shut-native', {}), shutdownPod('shut-classic', NATIVE_OFF)]);
  });
  after(async () => {
    const { core, namespace } = suite();
    for (const name of ['shut-native', 'shut-classic']) {
      await core.patchNamespacedPod({ name, namespace, body: [{ op: 'remove', path: '/metadata/finalizers' }] }).catch(() => undefined);
    }
  });

  it(`1. native sidecar: the app starts only once the proxy's startupProbe passed (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const pod = await waitPod('native-hold', running('envoy', 'app'), 'both containers running');
    const envoy = pod.spec?.initContainers?.find((container) => container.name === 'envoy');
    assert.equal(envoy?.restartPolicy, 'Always', 'the proxy is a native sidecar');
    const ready = await recorder.waitFor('the startupProbe\'s first 200 from /ready (health listener)', 'native-hold', readyAnswer('health'));
    const app = await recorder.waitFor('the app\'s start', 'native-hold', (record) => record.source === 'app' && record.event === 'started');
    const unready = recorder.of('native-hold', 'stand-in', 'http').filter((record) => record['path'] === '/ready' && record['status'] === 503);
    assert.ok(unready.length > 0, 'the kubelet probed /ready while the stand-in was not ready');
    assert.ok(app.time >= ready.time, `the app started ${(ready.time - app.time).toFixed(3)} s before the proxy's /ready first answered 200`);
    // The API server's start times are whole seconds: the app came at least the ready delay (less that rounding) after the proxy.
    const gap = startedAt(pod, 'app') - startedAt(pod, 'envoy');
    assert.ok(gap >= READY_DELAY_SECONDS - 1, `app started ${gap} s after envoy, expected at least ${READY_DELAY_SECONDS - 1} (the kubelet reports ${describePod(pod)})`);
  });

  it(`2. classic sidecar with hold: the app starts only after the postStart hook returned, its HTTP over /dev/tcp reaching the admin port (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const pod = await waitPod('classic-hold', running('envoy', 'app'), 'both containers running');
    assert.equal(pod.spec?.containers[0]?.name, 'envoy', 'the proxy goes first in containers');
    const ready = await recorder.waitFor('the postStart hook\'s GET /ready answered 200 on the admin port', 'classic-hold', readyAnswer('admin'));
    assert.equal(ready['peer'], '127.0.0.1', 'the hook calls the admin API on loopback');
    const app = await recorder.waitFor('the app\'s start', 'classic-hold', (record) => record.source === 'app' && record.event === 'started');
    assert.ok(app.time >= ready.time, `the app started ${(ready.time - app.time).toFixed(3)} s before the hook saw the proxy ready`);
    const gap = startedAt(pod, 'app') - startedAt(pod, 'envoy');
    assert.ok(gap >= READY_DELAY_SECONDS - 1, `app started ${gap} s after envoy, expected at least ${READY_DELAY_SECONDS - 1} (the kubelet reports ${describePod(pod)})`);
  });

  for (const mode of ['native', 'classic'] as const) {
    it(`3. shutdown (${mode}): the app's request during its own shutdown goes through the proxy and succeeds, and the proxy exits after the app within the grace period (${version})`, async () => {
      const { core, namespace, recorder, waitPod } = suite();
      const name = `shut-${mode}`;
      await waitPod(name, running('envoy', 'app'), 'both containers running');
      // Running is not ready for SIGTERM yet: the app records `started` once its handler is in place.
      await recorder.waitFor('the app started', name, (record) => record.source === 'app' && record.event === 'started');
      await core.deleteNamespacedPod({ name, namespace });
      const pod = await waitPod(name, terminated('envoy', 'app'), 'both containers terminated after the delete', 60_000);
      const deleted = new Date(pod.metadata?.deletionTimestamp ?? 0).getTime() / 1000 - (pod.metadata?.deletionGracePeriodSeconds ?? 0);
      const call = await recorder.waitFor('the app\'s call on SIGTERM', name, (record) => record.source === 'app' && record.event === 'call' && record['why'] === 'shutdown');
      assert.equal(call['ok'], true, `the app's request during shutdown failed: ${String(call['error'])}`);
      const relayed = recorder.of(name, 'stand-in', 'relayed').find((record) => record['listener'] === 'outbound' && JSON.stringify(record['original']) === JSON.stringify([serverIp, 8080]));
      assert.ok(relayed !== undefined, 'the stand-in relayed the app\'s shutdown request to the server (its original destination)');
      const appExit = await recorder.waitFor('the app\'s exit', name, (record) => record.source === 'app' && record.event === 'exit');
      const proxyExit = await recorder.waitFor('the stand-in\'s exit', name, (record) => record.source === 'stand-in' && record.event === 'exit');
      assert.ok(proxyExit.time >= appExit.time, `the proxy exited ${(appExit.time - proxyExit.time).toFixed(3)} s before the app`);
      assert.equal(statuses(pod).get('app')?.state?.terminated?.exitCode, 0, describePod(pod));
      assert.equal(statuses(pod).get('envoy')?.state?.terminated?.exitCode, 0, describePod(pod));
      assert.ok(finishedAt(pod, 'envoy') - deleted <= GRACE_SECONDS, `the proxy finished ${finishedAt(pod, 'envoy') - deleted} s after the delete, past the grace period`);
      if (mode === 'classic') {
        const drain = recorder.of(name, 'stand-in', 'drain')[0];
        assert.ok(drain !== undefined, 'the preStop hook\'s POST /drain_listeners?graceful reached the proxy');
        assert.equal(drain['graceful'], true);
        // The hook waits drainSeconds (5, the chart's default) after the drain began; only then does the kubelet send SIGTERM.
        assert.ok(proxyExit.time - drain.time >= 4.9, `the proxy exited ${(proxyExit.time - drain.time).toFixed(2)} s after the drain began, before the preStop wait ended`);
      }
    });
  }

  it(`4. a Job whose Pod has the native sidecar completes, the proxy exiting after the app (${version})`, async () => {
    const { plane, namespace, recorder, readPod } = suite();
    const batch = plane.kubeConfig.makeApiClient(BatchV1Api);
    await batch.createNamespacedJob({
      namespace,
      body: {
        metadata: { name: 'job' },
        spec: {
          backoffLimit: 0,
          template: {
            metadata: { annotations: broken() === 'job' ? NATIVE_OFF : {} },
            spec: { nodeName: NODE_NAME, restartPolicy: 'Never', terminationGracePeriodSeconds: GRACE_SECONDS, containers: [appContainer(['--exit-after', '1'])] },
          },
        },
      },
    });
    const job = await eventually('Job job Complete', async () => {
      const read = await batch.readNamespacedJob({ name: 'job', namespace });
      return read.status?.conditions?.some((condition) => condition.type === 'Complete' && condition.status === 'True') === true ? read : undefined;
    }, 60_000, 250).catch(async (error: Error) => {
      const pods = await suite().core.listNamespacedPod({ namespace, labelSelector: 'job-name=job' });
      throw new Error(`${error.message}; its Pods: ${pods.items.map((pod) => `${pod.metadata?.name}: ${describePod(pod)}`).join(' | ')}`);
    });
    assert.equal(job.status?.succeeded, 1);
    const pods = await suite().core.listNamespacedPod({ namespace, labelSelector: 'job-name=job' });
    const [first] = pods.items;
    assert.ok(first?.metadata?.name !== undefined);
    const pod = await readPod(first.metadata.name);
    assert.equal(pod.status?.phase, 'Succeeded', describePod(pod));
    assert.equal(statuses(pod).get('envoy')?.state?.terminated !== undefined, true, 'the sidecar was stopped');
    const appExit = await recorder.waitFor('the Job app\'s exit', first.metadata.name, (record) => record.source === 'app' && record.event === 'exit');
    const proxyExit = await recorder.waitFor('the Job proxy\'s exit', first.metadata.name, (record) => record.source === 'stand-in' && record.event === 'exit');
    assert.ok(proxyExit.time >= appExit.time, 'the proxy exited after the app');
  });
});
