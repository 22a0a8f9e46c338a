import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { CertificateManager, DEFAULT_CERTIFICATE_SETTINGS } from '../src/kube/certificates/certificate-manager.js';
import { makeCa, makeServingCertificate } from '../src/tls/certificates.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { until } from './helpers/injector-harness.js';

/**
 * After a CA change, no replica serves a certificate of the new CA before the
 * CA has been in the webhook's caBundle for the settle time: not the one that
 * patched the bundle, and not the others, which find it patched already (the
 * API servers' copies of the configuration lag behind the write). A lower
 * bound only: a slower machine makes the gap longer, never shorter.
 */
const NAMESPACE = 'mesh-system';
const SETTLE_MS = 1_500;
const HOSTS = ['envoy-injector.mesh-system.svc', 'envoy-injector.mesh-system.svc.cluster.local', 'envoy-injector.mesh-system', 'envoy-injector'];
const log = pino({ level: 'silent' });
const encode = (text: string): string => Buffer.from(text).toString('base64');

interface Replica {
  readonly manager: CertificateManager;
  /** Each certificate it loaded, with when. */
  readonly served: { cert: string; at: number }[];
}

describe('certificates.mode auto: the settle wait after a CA change, in every replica', () => {
  let fake: FakeApiServer;
  let kubeConfig: KubeConfig;
  before(async () => {
    fake = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
    fake.apply('mutatingwebhookconfigurations', {
      metadata: { name: 'envoy-injector' },
      webhooks: ['pod.envoy-injector.io'].map((name) => ({ name, clientConfig: { service: { name: 'envoy-injector', namespace: NAMESPACE, port: 443 } }, admissionReviewVersions: ['v1'], sideEffects: 'None' })),
    });
  });
  after(async () => {
    await fake.close();
  });

  function startReplica(): Replica {
    const served: Replica['served'] = [];
    const manager = new CertificateManager({
      kubeConfig,
      settings: { ...DEFAULT_CERTIFICATE_SETTINGS, namespace: NAMESPACE, secretName: 'envoy-injector-tls', webhookConfigName: 'envoy-injector', serviceName: 'envoy-injector', caBundleSettleMs: SETTLE_MS },
      log,
      backoff: { initialMs: 20, maxMs: 100 },
      onServingCertificate: (material) => void served.push({ cert: material.cert, at: Date.now() }),
    });
    return { manager, served };
  }

  /** What another replica (or an operator) does when it rotates the CA: a new CA and serving certificate in the Secret, the old CA kept in the bundle. */
  async function rotateSecret(oldCa: string): Promise<{ ca: string; serving: string }> {
    const ca = await makeCa({ commonName: 'envoy-injector CA (rotated)', validDays: 3650 });
    const serving = await makeServingCertificate({ ca, hosts: HOSTS, validDays: 365 });
    const secret = fake.get('secrets', NAMESPACE, 'envoy-injector-tls');
    assert.ok(secret !== undefined);
    fake.apply('secrets', {
      ...secret,
      metadata: { name: 'envoy-injector-tls', namespace: NAMESPACE },
      data: { 'tls.crt': encode(serving.cert), 'tls.key': encode(serving.key), 'ca.crt': encode(ca.cert), 'ca.key': encode(ca.key), 'ca-bundle.crt': encode(`${ca.cert.trim()}\n${oldCa.trim()}\n`) },
    });
    return { ca: ca.cert, serving: serving.cert };
  }

  for (const count of [2, 3]) {
    it(`${count} replicas: none serves the new CA's certificate before the CA has been trusted for the settle time`, async () => {
      fake.remove('secrets', NAMESPACE, 'envoy-injector-tls');
      const replicas = Array.from({ length: count }, startReplica);
      try {
        await Promise.all(replicas.map((replica) => replica.manager.start()));
        const first = Buffer.from(String((fake.get('secrets', NAMESPACE, 'envoy-injector-tls')?.['data'] as Record<string, string>)['ca.crt']), 'base64').toString('utf8');
        await until('every replica serving', () => (replicas.every((replica) => replica.served.length > 0) ? true : undefined), 20_000);
        const patchesBefore = fake.requests.length;
        const rotated = await rotateSecret(first);
        await until(
          'every replica serving the rotated certificate',
          () => (replicas.every((replica) => replica.served.at(-1)?.cert === rotated.serving) ? true : undefined),
          30_000,
        );
        // When the new CA first entered the bundle: the first successful write of the configuration after the rotation.
        const write = fake.requests.slice(patchesBefore).find((request) => request.method === 'PATCH' && request.path.endsWith('/mutatingwebhookconfigurations/envoy-injector') && request.status < 300);
        assert.ok(write !== undefined, 'one replica put the new CA in the caBundle');
        const bundle = (fake.get('mutatingwebhookconfigurations', undefined, 'envoy-injector')?.['webhooks'] as { clientConfig: { caBundle: string } }[])[0]?.clientConfig.caBundle ?? '';
        assert.ok(Buffer.from(bundle, 'base64').toString('utf8').includes(rotated.ca.trim()));
        for (const [index, replica] of replicas.entries()) {
          const switched = replica.served.find((entry) => entry.cert === rotated.serving);
          assert.ok(switched !== undefined);
          // Timer granularity: a few ms early at most.
          assert.ok(switched.at - write.at >= SETTLE_MS - 20, `replica ${index} served the new certificate ${switched.at - write.at} ms after its CA entered the caBundle (settle ${SETTLE_MS} ms)`);
        }
      } finally {
        for (const replica of replicas) replica.manager.stop();
      }
    });
  }
});
