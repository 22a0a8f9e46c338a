import assert from 'node:assert/strict';
import { before, it } from 'node:test';
import type { V1Container } from '@kubernetes/client-node';
import { APP_IMAGE } from './image-recipes.js';
import { appContainer, appPod, describePod, forEachNode, podReady, statuses } from './node-suite.js';
import { NODE_IP } from './network.js';

/**
 * Scenario 12 (issue 50): a classic proxy and a native sidecar of the Pod's
 * own with tcpSocket probes, capture on. With a classic proxy the Pod's
 * native sidecar starts before envoy-init's rules and before the proxy
 * (which is in `containers`: the kubelet starts it once every init container
 * has started), so a probe that must pass meanwhile reaches the sidecar as
 * written; one sent to the proxy's probe listener would wait for ever (the
 * startup probe holds the proxy) or restart the sidecar (the liveness probe,
 * while a later init container runs).
 *
 * 12a: the sidecar's startupProbe (tcpSocket 7070) holds the rest of the Pod;
 * the Pod becomes Ready, the sidecar never restarted. 12b: the sidecar's
 * livenessProbe (tcpSocket 7070, 20 s of failures allowed) runs during a
 * 30 s "migration" init container after it; the sidecar is never restarted.
 */
const CLASSIC_CAPTURE = {
  'envoy-injector.io/native-sidecar': 'false',
  'envoy-injector.io/capture': 'true',
  // The node's address (the recorder, which the apps report to) goes around the proxy.
  'envoy-injector.io/capture-exclude-outbound-cidrs': `${NODE_IP}/32`,
};
const SIDECAR_PORT = 7070;
const MIGRATION_SECONDS = 30;

const sidecar = (extra: Partial<V1Container>): V1Container => ({
  name: 'helper',
  image: APP_IMAGE,
  imagePullPolicy: 'IfNotPresent',
  args: ['--port', String(SIDECAR_PORT)],
  restartPolicy: 'Always',
  ...extra,
});
const tcp = { tcpSocket: { port: SIDECAR_PORT } };
const app = appContainer(['--port', '8080'], { startupProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1, failureThreshold: 120 } });

const STARTUP_POD = appPod('sidecar-startup', CLASSIC_CAPTURE, {
  initContainers: [sidecar({ startupProbe: { ...tcp, periodSeconds: 1, failureThreshold: 60 }, readinessProbe: { ...tcp, periodSeconds: 1 } })],
  containers: [app],
});
const LIVENESS_POD = appPod('sidecar-liveness', CLASSIC_CAPTURE, {
  initContainers: [
    sidecar({ livenessProbe: { ...tcp, periodSeconds: 1, failureThreshold: 20 } }),
    { name: 'migrate', image: APP_IMAGE, imagePullPolicy: 'IfNotPresent', args: ['--exit-after', String(MIGRATION_SECONDS)] },
  ],
  containers: [app],
});

forEachNode('a classic proxy and a native sidecar\'s tcpSocket probes', (suite, version) => {
  before(async () => {
    await suite().createPods([STARTUP_POD, LIVENESS_POD]);
  });

  it(`12a. the native sidecar's tcpSocket startupProbe passes before the classic proxy runs, and the Pod becomes Ready (${version})`, async () => {
    const { waitPod } = suite();
    const pod = await waitPod('sidecar-startup', podReady, 'Pod sidecar-startup Ready (its sidecar\'s startupProbe passed, then envoy-init, the proxy and the app ran)', 120_000);
    assert.equal(statuses(pod).get('helper')?.restartCount, 0, describePod(pod));
    const helper = pod.spec?.initContainers?.find((container) => container.name === 'helper');
    assert.equal(helper?.startupProbe?.tcpSocket?.port, SIDECAR_PORT, 'the startupProbe is left as written');
    assert.equal(helper?.readinessProbe?.httpGet?.path, `/tcp/${SIDECAR_PORT}`, 'the readinessProbe goes to the proxy\'s probe listener');
    const names = (pod.spec?.initContainers ?? []).map((container) => container.name);
    assert.deepEqual(names, ['helper', 'envoy-init'], 'envoy-init comes after the native sidecar');
    assert.equal(pod.spec?.containers[0]?.name, 'envoy', 'the proxy is a classic sidecar');
  });

  it(`12b. the native sidecar's tcpSocket livenessProbe passes while a later init container runs: no restart (${version})`, async () => {
    const { waitPod } = suite();
    const pod = await waitPod('sidecar-liveness', podReady, `Pod sidecar-liveness Ready (after its ${MIGRATION_SECONDS} s migration)`, 150_000);
    assert.equal(statuses(pod).get('migrate')?.state?.terminated?.exitCode, 0, describePod(pod));
    assert.equal(statuses(pod).get('helper')?.restartCount, 0, `the sidecar was never restarted for its liveness probe: ${describePod(pod)}`);
    const helper = pod.spec?.initContainers?.find((container) => container.name === 'helper');
    assert.equal(helper?.livenessProbe?.tcpSocket?.port, SIDECAR_PORT, 'the livenessProbe is left as written');
  });
});
