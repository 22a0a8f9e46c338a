import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { AdmissionregistrationV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { httpsCall } from '../helpers/https-client.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, createPodsContinuously, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { serviceAddress, startChartInjector, type ChartInjector } from './injector-process.js';

/** Serving certificates valid this long (TEST_CERT_VALIDITY, through the chart's extraEnv): renewed every half of it. */
const VALIDITY = '6s';

forEachKubeVersion('certificate rotation in auto mode while the API server creates Pods', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const namespace = uniqueName('rotation');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  let podCount = 0;
  const createPod = (): Promise<V1Pod> => core().createNamespacedPod({ namespace, body: plainPod(`pod-${++podCount}`) });

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('rot'), namespace: uniqueName('rot-system') }, { extraEnv: [{ name: 'TEST_CERT_VALIDITY', value: VALIDITY }] });
    await createNamespace(plane(), namespace, { 'envoy-injector.io/inject': 'enabled' });
    injector = await startChartInjector(plane(), release);
    assert.equal(injector.env['TEST_CERT_VALIDITY'], VALIDITY, 'the Deployment carries the setting');
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace]);
  });

  it('0 refused Pods, and the served certificate changes', async (t: TestContext) => {
    assert.ok(release !== undefined && injector !== undefined);
    const service = await serviceAddress(plane(), release);
    const serviceHost = `${injector.env['SERVICE_NAME']}.${release.namespace}.svc`;
    const webhookName = injector.env['WEBHOOK_CONFIG_NAME'] ?? '';
    const admission = plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    await eventually('a first Pod injected', async () => (sidecar(await createPod()) === 'none' ? undefined : true), 30_000, 200);

    /** What a new connection to the Service is served, trusting only the webhook's caBundle, as the API server does. */
    const servedFingerprint = async (): Promise<string> => {
      const config = await admission.readMutatingWebhookConfiguration({ name: webhookName });
      const ca = Buffer.from(config.webhooks?.[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8');
      const response = await httpsCall(`https://${service.clusterIP}:${service.port}/healthz`, { ca, extra: { servername: serviceHost } });
      assert.equal(response.status, 200);
      return response.peerFingerprint;
    };

    const stream = createPodsContinuously(createPod);
    const { created, refused } = stream;
    const served = new Set<string>();
    try {
      await eventually('three different certificates served', async () => {
        served.add(await servedFingerprint());
        return served.size >= 3 ? true : undefined;
      }, 60_000, 250);
      const before = created.length;
      await eventually('Pods created after the last rotation', async () => (created.length >= before + 5 ? true : undefined), 20_000);
    } finally {
      await stream.stop();
    }
    t.diagnostic(`${served.size} certificates served, ${created.length} Pods created, ${refused.length} refused`);
    assert.deepEqual(refused, [], 'no Pod refused during the rotations');
    assert.ok(created.every((pod) => sidecar(pod) !== 'none'), 'every Pod injected');
  });
});
