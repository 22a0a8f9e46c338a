import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { after, before, it } from 'node:test';
import { AdmissionregistrationV1Api, CoreV1Api, type V1Secret } from '@kubernetes/client-node';
import { makeCa } from '../../src/tls/certificates.js';
import { httpsCall } from '../helpers/https-client.js';
import { forEachKubeVersion } from './control-plane.js';
import { eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { deploymentEnv, readyz, startChartInjector, waitReady, type ChartInjector } from './injector-process.js';

/**
 * certificates.mode=auto against a real API server, where its behaviour
 * decides: a Secret's type is immutable, writes conflict on resourceVersion,
 * a kubernetes.io/tls Secret must hold tls.crt and tls.key. Replicas listen
 * on loopback ports of their own; each is called as the API server calls a
 * webhook: trusting only the caBundle, naming the Service.
 */
forEachKubeVersion('certificates.mode=auto with several replicas and a real API server', (plane) => {
  let release: Release | undefined;
  let replicas: ChartInjector[] = [];
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const admission = () => plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  /** From the installed Deployment's environment. */
  let replicaEnv: Record<string, string> = {};
  const names = () => {
    assert.ok(release !== undefined);
    const env = (name: string): string => {
      const value = replicaEnv[name];
      assert.ok(value !== undefined, `the Deployment sets ${name}`);
      return value;
    };
    return { namespace: release.namespace, secret: env('CERT_SECRET'), webhook: env('WEBHOOK_CONFIG_NAME'), service: env('SERVICE_NAME') };
  };

  const startReplicas = async (count: number): Promise<ChartInjector[]> => {
    assert.ok(release !== undefined);
    const chart = release;
    const started = await Promise.all(Array.from({ length: count }, () => startChartInjector(plane(), chart, { listen: { host: '127.0.0.1', port: 0 } })));
    replicas.push(...started);
    return started;
  };
  const stopReplicas = async (): Promise<void> => {
    await Promise.all(replicas.splice(0).map((replica) => replica.stop().catch(() => undefined)));
  };
  const caBundles = async (): Promise<string[]> => {
    const config = await admission().readMutatingWebhookConfiguration({ name: names().webhook });
    return (config.webhooks ?? []).map((webhook) => Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString('utf8'));
  };
  const secretText = async (key: string): Promise<string> => {
    const secret = await core().readNamespacedSecret({ name: names().secret, namespace: names().namespace });
    return Buffer.from(secret.data?.[key] ?? '', 'base64').toString('utf8');
  };
  /** As the API server: trusting the first webhook's caBundle only, naming the Service. */
  const callAsApiServer = async (replica: ChartInjector, path = '/healthz') => {
    const [bundle = ''] = await caBundles();
    const { namespace, service } = names();
    return httpsCall(`https://127.0.0.1:${replica.port}${path}`, { ca: bundle, extra: { servername: `${service}.${namespace}.svc` } });
  };
  const allReady = (started: readonly ChartInjector[]) => Promise.all(started.map((replica) => waitReady(replica, 'replica ready')));

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('certs'), namespace: uniqueName('certs-system') }, { certificates: { mode: 'auto' } });
    replicaEnv = (await deploymentEnv(plane(), release)).env;
  });
  after(async () => {
    await stopReplicas();
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
  });

  it('three replicas finding an unusable Secret at once: one write wins, every replica serves the stored, trusted certificate', async () => {
    // A first replica makes the Secret; then a broken one is left behind.
    await allReady(await startReplicas(1));
    await stopReplicas();
    const { namespace, secret } = names();
    const leftover = await makeCa({ commonName: 'leftover', validDays: 30 });
    const current: V1Secret = await core().readNamespacedSecret({ name: secret, namespace });
    // No ca.key: unusable, but still a valid kubernetes.io/tls Secret for the API server.
    await core().replaceNamespacedSecret({
      name: secret,
      namespace,
      body: { ...current, data: { 'tls.crt': Buffer.from(leftover.cert).toString('base64'), 'tls.key': Buffer.from(leftover.key).toString('base64') } },
    });
    const started = await startReplicas(3);
    // From the first moment: a replica that says it is ready serves a certificate the caBundle trusts.
    const untrusted: string[] = [];
    await eventually('every replica ready', async () => {
      const ready = await Promise.all(
        started.map(async (replica, index) => {
          if ((await readyz(replica)).status !== 200) return false;
          const answer = await callAsApiServer(replica).catch((error: Error) => error);
          if (answer instanceof Error) untrusted.push(`replica ${index}: ${answer.message}`);
          return true;
        }),
      );
      return ready.every(Boolean) ? true : undefined;
    }, 30_000);
    assert.deepEqual(untrusted, [], 'ready replicas serving a certificate the caBundle does not trust');
    const stored = new X509Certificate(await secretText('tls.crt')).fingerprint256;
    for (const [index, replica] of started.entries()) {
      const answer = await callAsApiServer(replica);
      assert.equal(answer.status, 200, `replica ${index}`);
      assert.equal(answer.peerFingerprint, stored, `replica ${index} serves the stored certificate`);
    }
  });

  it('the Secret deleted under three replicas: recreated with the CA they hold; every call as the API server succeeds meanwhile', async () => {
    const started = replicas.length === 3 ? replicas : await startReplicas(3);
    await allReady(started);
    const { namespace, secret } = names();
    const ca = (await secretText('ca.crt')).trim();
    const before = await secretText('tls.crt');
    await core().deleteNamespacedSecret({ name: secret, namespace });
    const failures: string[] = [];
    await eventually('the Secret recreated and served by every replica', async () => {
      for (const [index, replica] of started.entries()) {
        const answer = await callAsApiServer(replica).catch((error: Error) => error);
        if (answer instanceof Error) failures.push(`replica ${index}: ${answer.message}`);
      }
      const after = await secretText('tls.crt').catch(() => before);
      if (after === before) return undefined;
      const fingerprint = new X509Certificate(after).fingerprint256;
      const served = await Promise.all(started.map((replica) => callAsApiServer(replica)));
      return served.every((answer) => answer.peerFingerprint === fingerprint) ? true : undefined;
    }, 30_000);
    assert.deepEqual(failures, []);
    assert.equal((await secretText('ca.crt')).trim(), ca, 'the CA the replicas held was reused');
    for (const bundle of await caBundles()) assert.ok(bundle.includes(ca));
  });

  it('an Opaque Secret under its name: the injector listens, /readyz names the problem, no CA is published; deleting it recovers', async () => {
    await stopReplicas();
    const { namespace, secret } = names();
    await core().deleteNamespacedSecret({ name: secret, namespace });
    await core().createNamespacedSecret({ namespace, body: { metadata: { name: secret }, type: 'Opaque', data: { password: Buffer.from('hunter2').toString('base64') } } });
    const bundlesBefore = await caBundles();
    const [replica] = await startReplicas(1);
    assert.ok(replica !== undefined);
    const insecure = { ca: '', extra: { rejectUnauthorized: false } };
    assert.equal((await httpsCall(`https://127.0.0.1:${replica.port}/healthz`, insecure)).status, 200, '/healthz answers');
    const problem = await eventually('/readyz naming the Secret', async () => {
      const answer = await readyz(replica);
      return answer.status === 503 ? (JSON.parse(answer.body) as { problems: string[] }).problems.find((text) => text.includes('type Opaque')) : undefined;
    });
    assert.match(problem, new RegExp(`Secret ${namespace}/${secret} has type Opaque, not kubernetes.io/tls`));
    assert.deepEqual(await caBundles(), bundlesBefore, 'no CA published that is not stored');
    assert.equal(await secretText('password'), 'hunter2', 'the Secret was left as it was');

    await core().deleteNamespacedSecret({ name: secret, namespace });
    await allReady([replica]);
    const ca = (await secretText('ca.crt')).trim();
    for (const bundle of await caBundles()) assert.ok(bundle.includes(ca));
    assert.equal((await callAsApiServer(replica)).status, 200);
  });
});
