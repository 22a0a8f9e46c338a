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
    const encode = (text: string) => Buffer.from(text).toString('base64');
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

  it('TEST_CERT_VALIDITY (tests only): certificates valid that long from now, renewed and served one after another', async () => {
    // Renewal starts when half the validity is left and must be served before the rest runs out. With 3 s,
    // a machine under load (25 on 2 cores) took longer than 1.5 s to make, store and load the new pair and
    // the handshake found the old one expired; 5 s left is room for a machine 5x slower than that.
    const validityMs = 10_000;
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
