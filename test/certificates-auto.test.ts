import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { parseServeArgs, startInjector } from '../src/commands/serve.js';
import { makeCa, makeServingCertificate } from '../src/tls/certificates.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { httpsCall } from './helpers/https-client.js';
import { NAMESPACE, startHarness, until, type Harness } from './helpers/injector-harness.js';
import { captureLog } from './helpers/server.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const SERVICE_HOST = `envoy-injector.${NAMESPACE}.svc`;
const AUTO = ['--cert-mode', 'auto', '--cert-secret', 'envoy-injector-tls', '--webhook-config', 'envoy-injector', '--service-name', 'envoy-injector'];

function webhookConfiguration(caBundle?: string) {
  const clientConfig = {
    service: { name: 'envoy-injector', namespace: NAMESPACE, path: '/mutate', port: 443 },
    ...(caBundle === undefined ? {} : { caBundle: Buffer.from(caBundle).toString('base64') }),
  };
  return {
    metadata: { name: 'envoy-injector' },
    webhooks: ['namespace.envoy-injector.io', 'pod.envoy-injector.io'].map((name) => ({
      name,
      clientConfig,
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }],
    })),
  };
}

const encode = (text: string): string => Buffer.from(text).toString('base64');

function tlsSecret(pairs: { ca: { cert: string; key: string }; serving: { cert: string; key: string } }) {
  return {
    metadata: { name: 'envoy-injector-tls', namespace: NAMESPACE },
    type: 'kubernetes.io/tls',
    data: { 'tls.crt': encode(pairs.serving.cert), 'tls.key': encode(pairs.serving.key), 'ca.crt': encode(pairs.ca.cert), 'ca.key': encode(pairs.ca.key) },
  };
}

/** The caBundle of each webhook, decoded: what the API server trusts. */
function caBundles(fake: FakeApiServer): string[] {
  const config = fake.get('mutatingwebhookconfigurations', undefined, 'envoy-injector') as { webhooks: { clientConfig: { caBundle?: string } }[] } | undefined;
  return (config?.webhooks ?? []).map((webhook) => Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString('utf8'));
}

function secretText(fake: FakeApiServer, key: string): string {
  const secret = fake.get('secrets', NAMESPACE, 'envoy-injector-tls') as { data: Record<string, string> } | undefined;
  assert.ok(secret !== undefined, 'the Secret exists');
  return Buffer.from(secret.data[key] ?? '', 'base64').toString('utf8');
}

/** What a kubelet probe does: HTTPS without verifying the certificate (it may not be trusted yet). */
const INSECURE = { ca: '', extra: { rejectUnauthorized: false } };
const readyz = (harness: Harness) => httpsCall(`${harness.url}/readyz`, INSECURE);

/** A request as the API server makes it: trusting only the webhook's caBundle, naming the Service. */
function callAsApiServer(fake: FakeApiServer, harness: Harness, path = '/healthz') {
  const [bundle = ''] = caBundles(fake);
  return httpsCall(`${harness.url}${path}`, { ca: bundle, extra: { servername: SERVICE_HOST } });
}

describe('certificates.mode auto: the injector manages its own certificate', () => {
  let fake: FakeApiServer;
  const harnesses: Harness[] = [];
  beforeEach(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', { metadata: { name: NAMESPACE } });
    fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: NAMESPACE }, data: { config: 'containers: [{name: envoy, image: "e:1"}]' } });
    fake.apply('mutatingwebhookconfigurations', webhookConfiguration());
  });
  afterEach(async () => {
    for (const harness of harnesses.splice(0)) await harness.injector.stop();
    await fake.close();
  });

  it('on a fresh start creates the Secret and puts its CA in every webhook', async () => {
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    const ca = secretText(fake, 'ca.crt');
    assert.match(ca, /BEGIN CERTIFICATE/);
    await until('caBundle patched', () => (caBundles(fake).every((bundle) => bundle.includes(ca.trim())) ? true : undefined));
    assert.equal(caBundles(fake).length, 2);
    // A server-side apply under our field manager (the real API server's behaviour is test/e2e/gitops.test.ts).
    const write = fake.requests.find((request) => request.method === 'PATCH' && request.path.endsWith('/mutatingwebhookconfigurations/envoy-injector'));
    assert.equal(write?.query['fieldManager'], 'envoy-injector');
    assert.equal(write?.query['force'], 'true');
    const serving = new X509Certificate(secretText(fake, 'tls.crt'));
    for (const name of [`DNS:${SERVICE_HOST}`, `DNS:${SERVICE_HOST}.cluster.local`]) assert.ok(serving.subjectAltName?.includes(name), name);
    assert.ok(serving.checkIssued(new X509Certificate(ca)));
    const days = (new Date(serving.validTo).getTime() - Date.now()) / DAY_MS;
    assert.ok(days > 360 && days <= 366, `serving certificate valid ${days} days`);
    const caDays = (new Date(new X509Certificate(ca).validTo).getTime() - Date.now()) / DAY_MS;
    assert.ok(caDays > 3640, `CA valid ${caDays} days`);
    const response = await callAsApiServer(fake, harness);
    assert.equal(response.status, 200);
    assert.equal(response.peerFingerprint, serving.fingerprint256);
  });

  it('two replicas starting at once end with one Secret and serve the same certificate', async () => {
    const [a, b] = await Promise.all([startHarness(fake, AUTO), startHarness(fake, AUTO)]);
    harnesses.push(a, b);
    const creates = fake.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/secrets'));
    assert.equal(creates.filter((r) => r.status === 201).length, 1, 'created once');
    const [fromA, fromB] = await Promise.all([callAsApiServer(fake, a), callAsApiServer(fake, b)]);
    assert.equal(fromA.status, 200);
    assert.equal(fromA.peerFingerprint, fromB.peerFingerprint);
    assert.equal(fromA.peerFingerprint, new X509Certificate(secretText(fake, 'tls.crt')).fingerprint256);
  });

  it('renews an expiring certificate and its CA; the served certificate changes with no failed request', async () => {
    // A Secret from an earlier install whose CA and serving certificate expire in 40 days.
    const oldCa = await makeCa({ commonName: 'old CA', validDays: 40 });
    const oldServing = await makeServingCertificate({ ca: oldCa, hosts: [SERVICE_HOST, `${SERVICE_HOST}.cluster.local`, `envoy-injector.${NAMESPACE}`, 'envoy-injector'], validDays: 40 });
    fake.apply('secrets', {
      metadata: { name: 'envoy-injector-tls', namespace: NAMESPACE },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': encode(oldServing.cert), 'tls.key': encode(oldServing.key), 'ca.crt': encode(oldCa.cert), 'ca.key': encode(oldCa.key) },
    });
    fake.apply('mutatingwebhookconfigurations', webhookConfiguration(oldCa.cert));
    let clockOffsetMs = 0;
    const harness = await startHarness(fake, AUTO, { now: () => new Date(Date.now() + clockOffsetMs) });
    harnesses.push(harness);
    const oldFingerprint = new X509Certificate(oldServing.cert).fingerprint256;
    assert.equal((await callAsApiServer(fake, harness)).peerFingerprint, oldFingerprint, 'not renewed yet: 40 days left');
    await until('ready', async () => ((await callAsApiServer(fake, harness, '/readyz')).status === 200 ? true : undefined));

    let failures = 0;
    let requests = 0;
    const served = new Set<string>();
    let running = true;
    const load = (async () => {
      while (running) {
        const results = await Promise.allSettled(Array.from({ length: 4 }, () => callAsApiServer(fake, harness, '/readyz')));
        for (const result of results) {
          requests += 1;
          if (result.status === 'fulfilled' && result.value.status === 200) served.add(result.value.peerFingerprint);
          else failures += 1;
        }
      }
    })();
    let newFingerprint: string;
    try {
      await until('some load', () => (requests > 20 ? true : undefined));
      clockOffsetMs = 15 * DAY_MS; // now within 30 days of expiry
      await harness.injector.certificates?.reconcile();
      newFingerprint = new X509Certificate(secretText(fake, 'tls.crt')).fingerprint256;
      assert.notEqual(newFingerprint, oldFingerprint);
      await until('the renewed certificate served', () => (served.has(newFingerprint) ? true : undefined));
      const after = requests;
      await until('more load after the switch', () => (requests > after + 20 ? true : undefined));
    } finally {
      // Stop the load even when an assertion failed, or the test process would never end.
      running = false;
      await load;
    }
    assert.equal(failures, 0, `${failures} of ${requests} requests failed during the rotation`);
    const newCa = secretText(fake, 'ca.crt');
    assert.notEqual(newCa.trim(), oldCa.cert.trim(), 'the expiring CA was replaced');
    for (const bundle of caBundles(fake)) {
      assert.ok(bundle.includes(newCa.trim()) && bundle.includes(oldCa.cert.trim()), 'the bundle trusts the new CA and still the old one');
    }
    assert.match(secretText(fake, 'ca-bundle.crt'), /BEGIN CERTIFICATE[\s\S]+BEGIN CERTIFICATE/);
  });

  it('puts back a caBundle edited by hand', async () => {
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    const ca = secretText(fake, 'ca.crt').trim();
    await until('caBundle patched', () => (caBundles(fake).every((bundle) => bundle.includes(ca)) ? true : undefined));
    const stranger = await makeCa({ commonName: 'someone else', validDays: 1 });
    fake.apply('mutatingwebhookconfigurations', webhookConfiguration(stranger.cert));
    await until('caBundle restored', () => (caBundles(fake).every((bundle) => bundle.includes(ca)) ? true : undefined));
    assert.equal((await callAsApiServer(fake, harness)).status, 200);
  });

  it('recreates a deleted Secret and keeps serving meanwhile', async () => {
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    const before = secretText(fake, 'tls.crt');
    fake.remove('secrets', NAMESPACE, 'envoy-injector-tls');
    await until('recreated', () => fake.get('secrets', NAMESPACE, 'envoy-injector-tls'));
    const after = secretText(fake, 'tls.crt');
    assert.notEqual(after, before);
    await until('new certificate served', async () => ((await callAsApiServer(fake, harness)).peerFingerprint === new X509Certificate(after).fingerprint256 ? true : undefined));
  });

  it('a serving certificate signed by another CA of the same name is not served: the signature is checked, not the name', async () => {
    const ca = await makeCa({ commonName: `envoy-injector CA (${NAMESPACE})`, validDays: 3650 });
    const impostor = await makeCa({ commonName: `envoy-injector CA (${NAMESPACE})`, validDays: 3650 });
    const wrongLeaf = await makeServingCertificate({ ca: impostor, hosts: [SERVICE_HOST, `${SERVICE_HOST}.cluster.local`, `envoy-injector.${NAMESPACE}`, 'envoy-injector'], validDays: 365 });
    fake.apply('secrets', tlsSecret({ ca, serving: wrongLeaf }));
    fake.apply('mutatingwebhookconfigurations', webhookConfiguration(ca.cert));
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    const served = new X509Certificate(secretText(fake, 'tls.crt'));
    assert.notEqual(served.fingerprint256, new X509Certificate(wrongLeaf.cert).fingerprint256, 'the mis-signed certificate was replaced');
    assert.ok(served.verify(new X509Certificate(ca.cert).publicKey), 'the new one is signed by the CA');
    assert.equal(secretText(fake, 'ca.crt').trim(), ca.cert.trim(), 'the CA was kept');
    assert.equal((await callAsApiServer(fake, harness)).status, 200);
  });

  it('three replicas finding an unusable Secret at once: one write wins, and every replica serves a certificate the caBundle trusts', async () => {
    const ca = await makeCa({ commonName: 'leftover', validDays: 3650 });
    // A leftover Secret without ca.key: unusable, so every replica wants to replace it.
    fake.apply('secrets', { metadata: { name: 'envoy-injector-tls', namespace: NAMESPACE }, type: 'kubernetes.io/tls', data: { 'tls.crt': encode(ca.cert), 'tls.key': encode(ca.key) } });
    const started = await Promise.all([startHarness(fake, AUTO), startHarness(fake, AUTO), startHarness(fake, AUTO)]);
    harnesses.push(...started);
    const writes = fake.requests.filter((r) => r.method === 'PUT' && r.path.endsWith('/secrets/envoy-injector-tls'));
    assert.equal(writes.filter((r) => r.status === 200).length, 1, 'one replace won; the others were refused (409) and read the winner');
    const secretCert = new X509Certificate(secretText(fake, 'tls.crt')).fingerprint256;
    for (const [index, harness] of started.entries()) {
      const answer = await callAsApiServer(fake, harness);
      assert.equal(answer.status, 200, `replica ${index} is trusted`);
      assert.equal(answer.peerFingerprint, secretCert, `replica ${index} serves the stored certificate`);
    }
  });

  it('a deleted Secret with three replicas: recreated with the CA they hold, and no replica is ever untrusted', async () => {
    const started: Harness[] = [];
    for (let i = 0; i < 3; i++) started.push(await startHarness(fake, AUTO));
    harnesses.push(...started);
    const ca = secretText(fake, 'ca.crt').trim();
    const before = secretText(fake, 'tls.crt');
    for (const harness of started) await until('ready', async () => ((await readyz(harness)).status === 200 ? true : undefined));
    fake.remove('secrets', NAMESPACE, 'envoy-injector-tls');
    const failures: string[] = [];
    let checks = 0;
    await until('recreated and served by every replica', async () => {
      for (const [index, harness] of started.entries()) {
        checks += 1;
        const answer = await callAsApiServer(fake, harness).catch((error: Error) => error);
        if (answer instanceof Error) failures.push(`replica ${index}: ${answer.message}`);
      }
      const secret = fake.get('secrets', NAMESPACE, 'envoy-injector-tls');
      if (secret === undefined) return undefined;
      const after = secretText(fake, 'tls.crt');
      if (after === before) return undefined;
      const fingerprint = new X509Certificate(after).fingerprint256;
      const served = await Promise.all(started.map((harness) => callAsApiServer(fake, harness)));
      return served.every((answer) => answer.peerFingerprint === fingerprint) ? true : undefined;
    }, 15_000);
    assert.deepEqual(failures, [], `${failures.length} of ${checks} calls as the API server failed`);
    assert.equal(secretText(fake, 'ca.crt').trim(), ca, 'the CA every replica held was reused');
    for (const bundle of caBundles(fake)) assert.ok(bundle.includes(ca));
  });

  it('a Secret of another type under its name: listens, /healthz up, /readyz says why, no CA published; recovers once it is deleted', async () => {
    fake.apply('secrets', { metadata: { name: 'envoy-injector-tls', namespace: NAMESPACE }, type: 'Opaque', data: { password: encode('hunter2') } });
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    assert.equal((await httpsCall(`${harness.url}/healthz`, INSECURE)).status, 200, 'alive');
    const problem = await until('readiness naming the Secret', async () => {
      const answer = await readyz(harness);
      const body = JSON.parse(answer.body) as { problems: string[] };
      return answer.status === 503 ? body.problems.find((text) => text.includes('type Opaque')) : undefined;
    });
    assert.match(problem, /Secret envoy-injector\/envoy-injector-tls has type Opaque, not kubernetes.io\/tls.*delete it/);
    assert.deepEqual(caBundles(fake), ['', ''], 'no CA published that is not stored');
    assert.equal(secretText(fake, 'password'), 'hunter2', 'the Secret was left as it was');
    assert.ok(!fake.requests.some((r) => r.method === 'DELETE'), 'nothing deleted');

    fake.remove('secrets', NAMESPACE, 'envoy-injector-tls');
    await until('ready after the Secret was deleted', async () => ((await readyz(harness)).status === 200 ? true : undefined));
    const ca = secretText(fake, 'ca.crt').trim();
    assert.ok(caBundles(fake).every((bundle) => bundle.includes(ca)));
    assert.equal((await callAsApiServer(fake, harness)).status, 200);
  });

  it('a failed caBundle patch is retried with backoff; meanwhile /readyz and a metric say the served CA is not trusted', async () => {
    const harness = await startHarness(fake, AUTO);
    harnesses.push(harness);
    const ca = secretText(fake, 'ca.crt').trim();
    await until('ready', async () => ((await readyz(harness)).status === 200 ? true : undefined));
    assert.match(await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_ca_bundle_trusted'), /envoy_injector_ca_bundle_trusted 1/);
    // `helm upgrade --force`: the configuration comes back without a caBundle, and the PATCHes fail.
    const named = (path: string) => path === '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/envoy-injector';
    fake.failNext(100_000, 500, named);
    fake.apply('mutatingwebhookconfigurations', webhookConfiguration());
    const unready = await until('unready, naming the caBundle', async () => {
      const answer = await readyz(harness);
      return answer.status === 503 ? (JSON.parse(answer.body) as { problems: string[] }) : undefined;
    });
    assert.ok(unready.problems.some((text) => /caBundle of MutatingWebhookConfiguration envoy-injector does not trust the serving CA/.test(text)), unready.problems.join('; '));
    assert.match(await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_ca_bundle_trusted'), /envoy_injector_ca_bundle_trusted 0/);
    await until('several attempts', () => (fake.requests.filter((r) => named(r.path) && r.status === 500).length >= 3 ? true : undefined));
    fake.failNext(0);
    await until('caBundle restored without waiting for the hourly check', () => (caBundles(fake).every((bundle) => bundle.includes(ca)) ? true : undefined));
    await until('ready again', async () => ((await readyz(harness)).status === 200 ? true : undefined));
    assert.match(await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_ca_bundle_trusted'), /envoy_injector_ca_bundle_trusted 1/);
  });

  it('TEST_CERT_VALIDITY (tests only): certificates valid that long from now, renewed and served one after another', async () => {
    // Renewal starts when half the validity is left and must be served before the rest runs out. With 3 s,
    // a machine under load (25 on 2 cores) took longer than 1.5 s to make, store and load the new pair and
    // the handshake found the old one expired; with 10 s it happened once more at load 10 (two node tiers
    // beside the unit tier). 10 s left is room for a machine 5x slower than the worst seen.
    const validityMs = 20_000;
    const harness = await startHarness(fake, [...AUTO, '--test-cert-validity', `${validityMs / 1000}s`]);
    harnesses.push(harness);
    const first = new X509Certificate(secretText(fake, 'tls.crt'));
    const left = new Date(first.validTo).getTime() - Date.now();
    assert.ok(left > 0 && left <= validityMs, `the first certificate expires in ${left} ms`);
    // Every handshake verifies the served certificate against the clock: none may be served expired.
    const served = new Set<string>();
    await until('two renewals served', async () => {
      served.add((await callAsApiServer(fake, harness)).peerFingerprint);
      return served.size >= 3 ? true : undefined;
    }, 6 * validityMs);
  });

  it('refuses --test-cert-validity outside auto mode and below 1s', () => {
    assert.equal(parseServeArgs([...AUTO], { TEST_CERT_VALIDITY: '20s' })?.testCertValidityMs, 20_000);
    assert.equal(parseServeArgs([...AUTO], {})?.testCertValidityMs, undefined);
    assert.throws(() => parseServeArgs(['--test-cert-validity', '20s'], {}), /applies to --cert-mode auto only/);
    assert.throws(() => parseServeArgs([...AUTO, '--test-cert-validity', '500ms'], {}), /at least 1s/);
    assert.throws(() => parseServeArgs([...AUTO, '--test-cert-validity', 'soon'], {}), /--test-cert-validity: must be a duration/);
  });

  it('refuses --cert-mode auto without a cluster, and with --tls-cert', async () => {
    const settings = parseServeArgs(['--cert-mode', 'auto'], {});
    assert.ok(settings !== undefined);
    const io = { stdin: process.stdin, stdout: { write: () => true }, stderr: { write: () => true } };
    await assert.rejects(startInjector(settings, { io, env: {}, log: captureLog().logger }), /--cert-mode auto needs a cluster/);
    assert.throws(() => parseServeArgs(['--cert-mode', 'auto', '--tls-cert', 'a', '--tls-key', 'b'], {}), /drop --tls-cert/);
  });
});
