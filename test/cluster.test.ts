import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it, type TestContext } from 'node:test';
import { DIRECT_READ_TTL_MS } from '../src/kube/watches/namespace-labels.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { httpsCall } from './helpers/https-client.js';
import { NAMESPACE, startHarness, until, type Harness } from './helpers/injector-harness.js';
import { addedImages, addedVolumes, podReview } from './helpers/reviews.js';


/** A review of an unannotated Pod, as the API server sends it; the HTTP answer as it is. */
function rawReview(harness: Harness, namespace: string): Promise<{ status: number; body: string }> {
  return httpsCall(`${harness.url}/mutate`, { ca: harness.ca, body: JSON.stringify(podReview({ namespace })) });
}

function templateConfigMap(data: Record<string, string>) {
  return { metadata: { name: 'envoy-initializer', namespace: NAMESPACE }, data };
}
const envoy = (image: string, volume = 'envoy-conf') =>
  `containers:\n  - name: envoy\n    image: ${image}\n    volumeMounts: [{name: ${volume}, mountPath: /etc/envoy}]\nvolumes:\n  - name: ${volume}\n    emptyDir: {}\n`;

describe('following the cluster: template ConfigMap and Namespace labels', () => {
  let fake: FakeApiServer;
  let harness: Harness;
  beforeEach(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', { metadata: { name: 'shop' } });
    fake.apply('namespaces', { metadata: { name: NAMESPACE } });
  });
  afterEach(async () => {
    await harness.injector.stop();
    await fake.close();
  });

  it('a ConfigMap created after start: readiness flips to ready and the next review uses it', async () => {
    harness = await startHarness(fake);
    const before = await harness.readiness();
    assert.equal(before.status, 503);
    assert.equal(before.body.checks.template, 'missing');
    const unready = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
    assert.deepEqual(unready.patch, [], 'no template yet: allowed without a patch');
    assert.equal(unready.audit['reason'], 'template_not_loaded');

    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    const injected = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
    assert.deepEqual(addedImages(injected), ['envoyproxy/envoy:v1.0.0']);
    // The watch asked for that one ConfigMap only, so RBAC can name it.
    assert.ok(fake.requests.some((r) => r.path === `/api/v1/namespaces/${NAMESPACE}/configmaps` && r.query['watch'] === 'true' && r.query['fieldSelector'] === 'metadata.name=envoy-initializer'));
  });

  it('a new image reaches the next review by the watch event alone, without a relist', async (t: TestContext) => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    const delays: number[] = [];
    // Ready means a template was listed; the watch may open just after.
    await until('the ConfigMap watch open', () => (fake.openWatches('configmaps') === 1 ? true : undefined));
    const configMapRequests = () => fake.requests.filter((r) => r.path.endsWith('/configmaps')).length;
    const requestsBefore = configMapRequests();
    for (const version of ['v1.1.0', 'v1.2.0', 'v1.3.0']) {
      const image = `envoyproxy/envoy:${version}`;
      const changedAt = performance.now();
      fake.apply('configmaps', templateConfigMap({ config: envoy(image) }));
      await until(`image ${image}`, async () => {
        const review = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
        return addedImages(review)[0] === image ? true : undefined;
      });
      delays.push(performance.now() - changedAt);
    }
    t.diagnostic(`event-to-effect delay: ${delays.map((d) => `${d.toFixed(1)} ms`).join(', ')} (includes one HTTPS review each)`);
    // Pushed on the open watch, not fetched: no list or new watch was asked for meanwhile (a poll or resync would).
    assert.equal(configMapRequests(), requestsBefore, 'the change arrived without a new request for ConfigMaps');
    const reloads = await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_template_reloads_total');
    assert.match(reloads, /result="applied"\} 4/);
  });

  it('an invalid update keeps the old template, is counted, and its message names the field', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    fake.apply('configmaps', templateConfigMap({ config: 'containers: [{name: envoy, image: "e:2", ports: [{containerPort: 99999}]}]' }));
    const error = await until('the rejection', () => harness.log.lines.find((line) => line['level'] === 50 && String(line['msg']).startsWith('invalid sidecar template')));
    assert.match(String(error['msg']), /config: containers\[0\]\.ports\[0\]\.containerPort: must be 1-65535/);
    assert.deepEqual(error['problems'], ['config: containers[0].ports[0].containerPort: must be 1-65535']);
    const review = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
    assert.deepEqual(addedImages(review), ['envoyproxy/envoy:v1.0.0'], 'the last good template still serves');
    assert.equal((await harness.readiness()).status, 200);
    const reloads = await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_template_reloads_total');
    assert.match(reloads, /result="rejected"\} 1/);
  });

  it('a deleted ConfigMap keeps the last good template, with a warning', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    fake.remove('configmaps', NAMESPACE, 'envoy-initializer');
    const warning = await until('the warning', () => harness.log.lines.find((line) => line['level'] === 40 && String(line['msg']).includes('was deleted')));
    assert.match(String(warning['msg']), /ConfigMap envoy-injector\/envoy-initializer was deleted; keeping the last good sidecar templates/);
    const review = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
    assert.deepEqual(addedImages(review), ['envoyproxy/envoy:v1.0.0']);
    assert.equal((await harness.readiness()).status, 200);
  });

  it('recovers by itself from a closed watch, 500s and 410 Gone, and picks up a change made meanwhile', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));

    // The outage: every request fails for a while and the streams are cut.
    fake.failNext(25, 500);
    fake.dropWatches();
    const stale = await until('staleness reported', async () => {
      const { body } = await harness.readiness();
      return body.staleSeconds !== undefined && body.staleSeconds > 0 ? body : undefined;
    });
    assert.equal(stale.ready, true, 'still ready on the last good state');
    // A change made during the outage, then history compacted: the re-watch gets 410 and must relist.
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v2.0.0') }));
    fake.compactHistory();

    const review = await until('the change after recovery', async () => {
      const candidate = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
      return addedImages(candidate)[0] === 'envoyproxy/envoy:v2.0.0' ? candidate : undefined;
    }, 15_000);
    assert.ok(review);
    assert.ok(fake.requests.some((r) => r.status === 500), 'the 500s were served');
    assert.ok(fake.expiredWatches >= 1, 'a re-watch got 410 Gone');
    assert.ok(fake.requests.filter((r) => r.query['watch'] !== 'true' && r.path.endsWith('/configmaps')).length >= 2, 'relisted');
    await until('watches reopened', () => (fake.openWatches() === 2 ? true : undefined));
    await until('staleness back to zero', async () => ((await harness.readiness()).body.staleSeconds === 0 ? true : undefined));
    const watchWarning = harness.log.lines.find((line) => line['level'] === 40 && String(line['msg']).startsWith('watch of '));
    const err = watchWarning?.['err'] as { message?: string; stack?: string } | undefined;
    assert.ok(err?.message !== undefined && !err.message.includes('\n'), 'the error is logged under err, on one line');
    const metrics = (await httpsCall(`${harness.url}/metrics`, { ca: harness.ca })).body;
    assert.match(metrics, /envoy_injector_watch_stale_seconds 0/);
  });

  it('follows Namespace labels: enabled injects unannotated Pods, disabled or unlabeled does not, annotation false wins', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    assert.equal((await harness.review({ namespace: 'shop' })).audit['reason'], 'namespace_not_enabled');

    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    const injected = await until('injection in the labeled namespace', async () => {
      const review = await harness.review({ namespace: 'shop' });
      return review.audit['reason'] === 'namespace_enabled' ? review : undefined;
    });
    assert.deepEqual(addedImages(injected), ['envoyproxy/envoy:v1.0.0']);
    assert.equal((await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'false' } })).audit['reason'], 'pod_annotation_false');

    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'disabled' } } });
    await until('disabled', async () => ((await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } })).audit['reason'] === 'namespace_disabled' ? true : undefined));

    fake.apply('namespaces', { metadata: { name: 'shop', labels: {} } });
    await until('unlabeled', async () => ((await harness.review({ namespace: 'shop' })).audit['reason'] === 'namespace_not_enabled' ? true : undefined));
    // Namespaces are watched as metadata only.
    assert.ok(fake.requests.some((r) => r.path === '/api/v1/namespaces' && r.query['watch'] === 'true' && r.accept.includes('as=PartialObjectMetadata')));
  });

  it('a namespace not yet in the cache is read directly; if that fails the answer is an HTTP error, so that failurePolicy decides', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    await until('namespace watch open', () => (fake.openWatches('namespaces') === 1 ? true : undefined));
    // Keep the namespace watch down while a namespace appears, so only a direct GET can see it.
    fake.failNext(1_000, 503, (path) => path === '/api/v1/namespaces');
    fake.dropWatches();
    fake.apply('namespaces', { metadata: { name: 'brand-new', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    const review = await harness.review({ namespace: 'brand-new' });
    assert.equal(review.audit['reason'], 'namespace_enabled');
    assert.ok(fake.requests.some((r) => r.path === '/api/v1/namespaces/brand-new' && r.method === 'GET' && r.status === 200));

    fake.failNext(1_000, 503);
    const unknown = await rawReview(harness, 'another-new');
    assert.equal(unknown.status, 503, 'an error status, not a silent skip');
    const status = JSON.parse(unknown.body) as { kind: string; code: number; message: string };
    assert.equal(status.kind, 'Status');
    assert.match(status.message, /^labels of namespace "another-new" unknown \(not in the watch cache, direct read failed: HTTP 503/);
    assert.ok(harness.log.lines.some((line) => line['level'] === 40 && String(line['msg']).startsWith('labels of namespace "another-new" unknown')));
    const metrics = await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_admission_requests_total');
    assert.match(metrics, /result="error",reason="namespace_labels_unknown"\} 1\b/);
    fake.failNext(0);
  });

  it('concurrent reviews in one uncached namespace share one direct read, and its answer is remembered', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('namespace watch open', () => (fake.openWatches('namespaces') === 1 ? true : undefined));
    fake.failNext(100_000, 503, (path) => path === '/api/v1/namespaces');
    fake.dropWatches();
    fake.apply('namespaces', { metadata: { name: 'crowded', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    const started = Date.now();
    const reviews = await Promise.all(Array.from({ length: 100 }, () => harness.review({ namespace: 'crowded' })));
    assert.ok(reviews.every((review) => review.audit['reason'] === 'namespace_enabled'));
    assert.equal((await harness.review({ namespace: 'crowded' })).audit['reason'], 'namespace_enabled');
    const reads = fake.requests.filter((r) => r.method === 'GET' && r.path === '/api/v1/namespaces/crowded');
    // One read per remembered period: a machine slow enough to spend longer than it on the
    // 101 reviews may read again, one that shared nothing would read ~100 times.
    const periods = 1 + Math.floor((Date.now() - started) / DIRECT_READ_TTL_MS);
    assert.ok(reads.length >= 1 && reads.length <= periods, `${reads.length} reads of one namespace for 101 reviews in ${periods} remembered period(s)`);
    fake.failNext(0);
  });

  it('a direct read that hangs is aborted at the lookup timeout and the review answered with an error', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('namespace watch open', () => (fake.openWatches('namespaces') === 1 ? true : undefined));
    fake.stall((path) => path === '/api/v1/namespaces/hung');
    const answers = await Promise.all(Array.from({ length: 5 }, () => rawReview(harness, 'hung')));
    assert.deepEqual(answers.map((answer) => answer.status), [503, 503, 503, 503, 503]);
    assert.match(answers[0]?.body ?? '', /labels of namespace \\"hung\\" unknown .*no answer within 5000 ms/);
    assert.equal(fake.requests.filter((r) => r.path === '/api/v1/namespaces/hung').length, 1, 'one read for five concurrent reviews');
    await until('the hung read closed by the injector', () => (fake.abandonedStalls === 1 ? true : undefined));
    fake.stall(undefined);
  });

  it('is not ready until the Namespace watch has synced once, and says so', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    fake.failNext(100_000, 503, (path) => path === '/api/v1/namespaces');
    harness = await startHarness(fake);
    await until('the template', () => (harness.injector.state.templates.current === undefined ? undefined : true));
    const unready = await harness.readiness();
    assert.equal(unready.status, 503);
    const problem = 'the Namespace watch has not synced yet: namespace labels are unknown';
    assert.equal((unready.body.checks as Record<string, unknown>)['namespaces'], problem);
    assert.deepEqual(unready.body.problems, [problem]);
    fake.failNext(0);
    const ready = await until('ready once the watch syncs', async () => {
      const answer = await harness.readiness();
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal((ready.body.checks as Record<string, unknown>)['namespaces'], 'ok');
  });

  it('a watch that ends at once, cleanly, is reopened after a growing delay, not at once', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    fake.closeWatchesAtOnce = true;
    // Every close here comes within milliseconds of the open; a 30 s threshold keeps a stall of a loaded machine from counting one as healthy.
    harness = await startHarness(fake, [], { backoff: { initialMs: 20, maxMs: 200, quickCloseMs: 30_000 } });
    const watches = () => fake.requests.filter((r) => r.path === '/api/v1/namespaces' && r.query['watch'] === 'true');
    await until('twelve Namespace watch requests', () => (watches().length >= 12 ? true : undefined), 20_000);
    fake.closeWatchesAtOnce = false;
    // The harness's backoff is 20 ms doubling to 200 ms, jittered over its upper half: from the fifth quick close on, at least 100 ms.
    const times = watches().slice(5, 12).map((r) => r.at);
    const gaps = times.slice(1).map((at, i) => at - (times[i] ?? at));
    assert.ok(gaps.every((gap) => gap >= 80), `gaps between watch requests: ${gaps.join(', ')} ms`);
  });

  it('a credential failure while re-watching (an exec plugin failing) is logged and retried, never a crash; the last good state keeps serving', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ei-exec-'));
    const credentialFile = join(dir, 'credential.json');
    const credential = JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token: fake.token } });
    writeFileSync(credentialFile, credential);
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    const rejections: unknown[] = [];
    const onRejection = (error: unknown): void => void rejections.push(error);
    process.on('unhandledRejection', onRejection);
    try {
      harness = await startHarness(fake, [], { kubeconfig: fake.writeKubeconfig(dir, { execCredentialFile: credentialFile }) });
      await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
      await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));
      rmSync(credentialFile);
      fake.dropWatches();
      const warning = await until('the failure logged', () => harness.log.lines.find((line) => line['level'] === 40 && /^watch of .* failed/.test(String(line['msg'])) && /cat|exit|credential|exec/i.test(String(line['msg']))));
      assert.ok(warning);
      const review = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
      assert.deepEqual(addedImages(review), ['envoyproxy/envoy:v1.0.0'], 'still serving the last good template');
      writeFileSync(credentialFile, credential);
      await until('watches reopened once the credential is back', () => (fake.openWatches() === 2 ? true : undefined), 10_000);
    } finally {
      process.off('unhandledRejection', onRejection);
    }
    assert.deepEqual(rejections.map(String), [], 'no unhandled rejection');
  });

  it('a quiet watch stream (nothing changes: no event, no bookmark) is kept while the API server answers, with no warning', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake, [], { watchLiveness: { quietMs: 300 } });
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));
    const watchRequests = (): number => fake.requests.filter((request) => request.query['watch'] === 'true').length;
    const checks = (): number => fake.requests.filter((request) => request.path === '/version').length;
    const opened = watchRequests();
    // The fake API server sends a bookmark only when told to, as a real one with etcd's default progress-notify interval.
    const outcome = await until('three checks of the quiet streams, or a watch opened again', () => (watchRequests() > opened ? 'reopened' : checks() >= 3 ? 'checked' : undefined));
    const warnings = harness.log.lines.filter((line) => Number(line['level']) >= 40).map((line) => line['msg']);
    assert.equal(outcome, 'checked', `a quiet stream was given up: ${JSON.stringify(warnings)}`);
    assert.equal(fake.openWatches(), 2);
    assert.deepEqual(warnings, []);
  });

  it('a watch stream\'s socket has TCP keepalive on (client-node sets it), which finds a peer that is gone', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));
    const watchPorts = fake.requests.filter((request) => request.query['watch'] === 'true').map((request) => request.clientPort);
    const serverPort = Number(new URL(fake.url).port);
    /**
     * Per watch socket, its timer: /proc/net/tcp's local address (hex port
     * after the colon), then "tr:when", tr 2 while a keepalive timer runs.
     * Only the established socket to the fake: an earlier test's socket of
     * the same client port may linger in TIME_WAIT (timer 3).
     */
    const timers = (): Map<number, string> => {
      const found = new Map<number, string>();
      const portOf = (address: string | undefined): number => Number.parseInt(address?.split(':').at(-1) ?? '', 16);
      for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
        for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
          const fields = line.trim().split(/\s+/);
          const port = portOf(fields[1]);
          if (watchPorts.includes(port) && portOf(fields[2]) === serverPort && fields[3] === '01') found.set(port, fields[5]?.split(':')[0] ?? '');
        }
      }
      return found;
    };
    // client-node sets it once the response's headers are in: a moment after the server saw the request.
    await until('a keepalive timer on each watch socket', () => (timers().size === watchPorts.length && [...timers().values()].every((timer) => timer === '02') ? true : undefined), 5_000).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${JSON.stringify([...timers()])}`);
    });
  });

  it('a watch stream gone silent whose API server no longer answers (a proxy that forwards nothing) is restarted and counted in envoy_injector_watch_stale_seconds', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake, [], { watchLiveness: { quietMs: 500, checkTimeoutMs: 500 } });
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));
    const staleSeconds = async () => Number(/^envoy_injector_watch_stale_seconds (\S+)$/m.exec(await harness.injector.metrics.registry.getSingleMetricAsString('envoy_injector_watch_stale_seconds'))?.[1]);
    assert.equal(await staleSeconds(), 0);
    // The streams go silent, the checks get no answer; the Namespace watch cannot come back for now, and a label changes meanwhile.
    fake.freezeWatches();
    fake.stall((path) => path === '/version');
    fake.failNext(100_000, 503, (path) => path === '/api/v1/namespaces');
    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    const stale = await until('the silence noticed', async () => {
      const seconds = await staleSeconds();
      return seconds >= 0.5 ? seconds : undefined;
    });
    assert.ok(stale >= 0.5);
    const given = harness.log.lines.find((line) => Number(line['level']) === 40 && String(line['msg']).includes('no event or bookmark for'));
    assert.match(String(given?.['msg']), /and a check of the API server failed \(GET \/version: no answer within 500 ms\)/);
    fake.stall(undefined);
    fake.failNext(0);
    await until('the label change seen after the restart', async () => ((await harness.review({ namespace: 'shop' })).audit['reason'] === 'namespace_enabled' ? true : undefined));
    await until('staleness back to zero', async () => ((await staleSeconds()) === 0 ? true : undefined));
  });

  it('a stream the API server does not end at the timeout it was asked for is restarted, though the API server answers', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    // The fake API server never ends a stream by itself: each one outlives its timeoutSeconds (1 s here).
    harness = await startHarness(fake, [], { watchLiveness: { quietMs: 300, streamSeconds: 1 } });
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    const watchRequests = (): number => fake.requests.filter((request) => request.query['watch'] === 'true').length;
    await until('each watch opened twice', () => (watchRequests() >= 4 ? true : undefined));
    const given = harness.log.lines.filter((line) => Number(line['level']) === 40).map((line) => String(line['msg']));
    assert.ok(given.some((msg) => /outlived the 1 s timeout it asked of the API server by 300 ms/.test(msg)), JSON.stringify(given));
    assert.ok(fake.requests.some((request) => request.path === '/version' && request.status === 200), 'the checks were answered meanwhile');
  });

  it('requests in flight during template swaps each see one consistent template', async () => {
    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    fake.apply('configmaps', templateConfigMap({ config: envoy('proxy:1', 'conf-1') }));
    harness = await startHarness(fake);
    await until('ready', async () => ((await harness.readiness()).status === 200 ? true : undefined));
    let swapping = true;
    const swaps = (async () => {
      for (let i = 0; swapping; i++) {
        const n = (i % 2) + 1;
        fake.apply('configmaps', templateConfigMap({ config: envoy(`proxy:${n}`, `conf-${n}`) }));
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    let results: Awaited<ReturnType<Harness['review']>>[];
    try {
      results = await Promise.all(Array.from({ length: 300 }, () => harness.review({ namespace: 'shop' })));
    } finally {
      swapping = false;
      await swaps;
    }
    const pairs = results.map((review) => `${addedImages(review).join()}|${addedVolumes(review).join()}`);
    for (const pair of pairs) assert.ok(pair === 'proxy:1|conf-1' || pair === 'proxy:2|conf-2', `mixed template: ${pair}`);
    assert.ok(new Set(pairs).size === 2, 'both templates were served during the swaps');
  });

  it('stays bounded through a storm of dropped connections', async () => {
    fake.apply('configmaps', templateConfigMap({ config: envoy('envoyproxy/envoy:v1.0.0') }));
    harness = await startHarness(fake);
    await until('both watches open', () => (fake.openWatches() === 2 ? true : undefined));
    for (let i = 0; i < 40; i++) {
      fake.dropWatches();
      await new Promise((resolve) => setTimeout(resolve, 15));
      assert.ok(fake.openWatches() <= 2, `${fake.openWatches()} watches open at once`);
    }
    await until('both watches open again', () => (fake.openWatches() === 2 ? true : undefined));
    const review = await harness.review({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
    assert.deepEqual(addedImages(review), ['envoyproxy/envoy:v1.0.0']);
  });
});

describe('with --template-file in a cluster', () => {
  let fake: FakeApiServer;
  before(async () => {
    fake = await FakeApiServer.start();
  });
  after(async () => {
    await fake.close();
  });

  it('uses the file, watches no ConfigMap, still follows Namespace labels', async () => {
    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    const harness = await startHarness(fake, ['--template-file', 'examples/envoy-initializer.yaml']);
    try {
      await until('ready (the Namespace watch synced)', async () => ((await harness.readiness()).status === 200 ? true : undefined));
      const review = await until('namespace label seen', async () => {
        const candidate = await harness.review({ namespace: 'shop' });
        return candidate.audit['reason'] === 'namespace_enabled' ? candidate : undefined;
      });
      assert.deepEqual(addedImages(review), ['lyft/envoy:845747db88f102c0fd262ab234308e9e22f693a1']);
      assert.ok(!fake.requests.some((r) => r.path.includes('/configmaps')));
    } finally {
      await harness.injector.stop();
    }
  });
});
