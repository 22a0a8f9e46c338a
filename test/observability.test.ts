import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { describe, it } from 'node:test';
import { parseTemplateData, Reason } from '../src/injection/index.js';
import { ADMISSION_REASONS, ErrorReason } from '../src/server/metrics.js';
import { httpsCall } from './helpers/https-client.js';
import { podReview } from './helpers/reviews.js';
import { startTestServer } from './helpers/server.js';

function plainGet(port: number, path: string): Promise<{ status: number; body: string; type: string }> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, type: String(response.headers['content-type']) }));
    });
    request.on('error', reject);
    request.end();
  });
}

/** `name{labels} value` lines of one metric family. */
function samples(text: string, name: string): { labels: Record<string, string>; value: number }[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => {
      const match = /^[^{ ]+(?:\{(.*)\})? (.+)$/.exec(line);
      const labels = Object.fromEntries([...(match?.[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
      return { labels, value: Number(match?.[2]) };
    });
}

describe('metrics', () => {
  it('exposes every metric of the contract, with bounded labels, on HTTPS and on the plain metrics port', async () => {
    const server = await startTestServer({ metricsPort: 0 });
    try {
      const send = (body: unknown) => httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(body) });
      for (let i = 0; i < 5; i++) {
        const review = podReview({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
        // A different Pod name each time: names must never become label values.
        (review['request'] as { object: { metadata: Record<string, unknown> } }).object.metadata['name'] = `unique-pod-${i}-${Date.now()}`;
        await send(review);
      }
      await send(podReview({ namespace: 'shop' }));
      await send(podReview({ namespace: 'kube-system' }));
      await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: '{"apiVersion": 1}' });

      const overHttps = await httpsCall(`${server.url}/metrics`, { ca: server.ca });
      assert.equal(overHttps.status, 200);
      assert.match(String(overHttps.headers['content-type']), /^text\/plain; version=0\.0\.4/);
      assert.ok(server.metricsPort !== undefined);
      const plain = await plainGet(server.metricsPort, '/metrics');
      assert.equal(plain.status, 200);
      assert.equal((await plainGet(server.metricsPort, '/mutate')).status, 404, 'the plain port serves metrics only');
      for (const text of [overHttps.body, plain.body]) {
        const requests = samples(text, 'envoy_injector_admission_requests_total');
        const byKey = Object.fromEntries(requests.map((s) => [`${s.labels['result']}/${s.labels['reason']}`, s.value]));
        assert.equal(byKey['injected/pod_annotation_true'], 5);
        assert.equal(byKey['skipped/namespace_not_enabled'], 1);
        assert.equal(byKey['skipped/excluded_namespace'], 1);
        assert.equal(byKey['error/malformed_review'], 1);
        const allowedReasons = new Set<string>([...Object.values(Reason), ...Object.values(ErrorReason)]);
        for (const { labels } of requests) {
          assert.ok(['injected', 'skipped', 'error'].includes(labels['result'] ?? ''), JSON.stringify(labels));
          assert.ok(allowedReasons.has(labels['reason'] ?? ''), `unexpected reason label ${labels['reason']}`);
        }
        assert.ok(!text.includes('unique-pod-'), 'no Pod name in any label');

        const buckets = samples(text, 'envoy_injector_admission_duration_seconds_bucket').filter((s) => s.labels['result'] === 'injected').map((s) => s.labels['le']);
        assert.deepEqual(buckets, ['0.0001', '0.00025', '0.0005', '0.001', '0.0025', '0.005', '0.01', '0.025', '0.05', '0.1', '0.25', '0.5', '1', '+Inf']);
        assert.equal(samples(text, 'envoy_injector_admission_duration_seconds_count').find((s) => s.labels['result'] === 'injected')?.value, 5);

        const hash = server.templates.current?.defaultTemplate.hash;
        assert.deepEqual(samples(text, 'envoy_injector_template_info'), [{ labels: { template: 'config', hash: hash ?? '' }, value: 1 }]);
        assert.deepEqual(samples(text, 'envoy_injector_template_reloads_total'), [{ labels: { result: 'applied' }, value: 1 }]);
        const lastReload = samples(text, 'envoy_injector_template_last_reload_timestamp_seconds')[0]?.value ?? 0;
        assert.ok(Math.abs(lastReload - Date.now() / 1000) < 120, `last reload ${lastReload}`);
        assert.deepEqual(samples(text, 'envoy_injector_watch_stale_seconds'), [{ labels: {}, value: 0 }]);
        const expiry = samples(text, 'envoy_injector_certificate_expiry_timestamp_seconds')[0]?.value;
        assert.equal(expiry, (server.state.tls?.notAfter.getTime() ?? 0) / 1000);
        for (const processMetric of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
          assert.ok(samples(text, processMetric).length > 0, processMetric);
        }
      }
    } finally {
      await server.shutdown();
    }
  });

  it('the counters the alerts read are at 0 for every label value known in advance, before any request', async () => {
    const server = await startTestServer({});
    try {
      const text = (await httpsCall(`${server.url}/metrics`, { ca: server.ca })).body;
      const requests = samples(text, 'envoy_injector_admission_requests_total').map((s) => `${s.labels['result']}/${s.labels['reason']} ${s.value}`);
      const expected = Object.entries(ADMISSION_REASONS).flatMap(([result, reasons]) => reasons.map((reason) => `${result}/${reason} 0`));
      assert.deepEqual(requests.sort(), expected.sort());
      assert.ok(expected.includes('skipped/unknown_namespace_template 0') && expected.includes('error/namespace_labels_unknown 0'));
      assert.deepEqual(samples(text, 'envoy_injector_admission_warnings_total').map((s) => `${s.labels['result']} ${s.value}`).sort(), ['injected 0', 'skipped 0']);
    } finally {
      await server.shutdown();
    }
  });

  it('captured_pods_total counts each Pod injected with capture under its mode, and no other', async () => {
    const template = (mode: string): string =>
      `containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.39.6\ncapture:\n  enabled: true\n  mode: ${mode}\n  checkImage: envoy-injector:0.1.0\n  image: envoy-injector-init:0.1.0\n  proxyUid: 1337\n  outboundPort: 15001\n  inboundPort: 15006\n`;
    const server = await startTestServer({ templates: parseTemplateData({ config: template('initContainer'), cni: template('cni'), 'no-capture': 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6"}]' }) });
    try {
      const send = (annotations: Record<string, string>) => httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(podReview({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } })) });
      await send({});
      await send({});
      await send({ 'envoy-injector.io/template': 'cni' });
      await send({ 'envoy-injector.io/template': 'no-capture' });
      await send({ 'envoy-injector.io/capture': 'false' });
      const text = (await httpsCall(`${server.url}/metrics`, { ca: server.ca })).body;
      const byMode = Object.fromEntries(samples(text, 'envoy_injector_captured_pods_total').map((s) => [s.labels['mode'], s.value]));
      assert.deepEqual(byMode, { initContainer: 2, cni: 1 });
    } finally {
      await server.shutdown();
    }
  });

  it("every decision reason is listed under the result the webhook gives it, but requested_offline (the offline inject's own)", () => {
    const listed = [...ADMISSION_REASONS.injected, ...ADMISSION_REASONS.skipped];
    assert.equal(new Set(listed).size, listed.length, 'a reason under two results');
    assert.deepEqual(Object.values(Reason).filter((reason) => !listed.includes(reason)), [Reason.requestedOffline]);
    assert.deepEqual([...ADMISSION_REASONS.error].sort(), Object.values(ErrorReason).sort());
  });

  it('template_info follows a reload: the old hash disappears', async () => {
    const server = await startTestServer();
    try {
      const before = server.templates.current?.defaultTemplate.hash;
      server.templates.update({ config: 'containers: [{name: envoy, image: "e:2"}]' }, 'test');
      server.templates.update({ config: 'containers: [{name: envoy, image: 42}]' }, 'test');
      const text = (await httpsCall(`${server.url}/metrics`, { ca: server.ca })).body;
      const info = samples(text, 'envoy_injector_template_info');
      assert.equal(info.length, 1);
      assert.notEqual(info[0]?.labels['hash'], before);
      const reloads = Object.fromEntries(samples(text, 'envoy_injector_template_reloads_total').map((s) => [s.labels['result'], s.value]));
      assert.deepEqual(reloads, { applied: 2, rejected: 1 });
    } finally {
      await server.shutdown();
    }
  });
});

describe('logs', () => {
  it('one JSON line per admission at debug, with the decision and no Pod spec; nothing for probes and scrapes', async () => {
    const server = await startTestServer();
    try {
      const review = podReview({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } });
      const uid = (review['request'] as { uid: string }).uid;
      const before = server.log.lines.length;
      await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(review) });
      for (const path of ['/healthz', '/readyz', '/metrics']) await httpsCall(`${server.url}${path}`, { ca: server.ca });
      const lines = server.log.lines.slice(before);
      assert.equal(lines.length, 1, JSON.stringify(lines));
      const [line] = lines;
      assert.equal(line?.['level'], 20, 'debug');
      assert.equal(line?.['uid'], uid);
      assert.equal(line?.['namespace'], 'shop');
      assert.equal(line?.['pod'], 'web-5d8f7-', 'generateName when there is no name');
      assert.equal(line?.['decision'], 'injected');
      assert.equal(line?.['reason'], 'pod_annotation_true');
      assert.equal(typeof line?.['durationMs'], 'number');
      assert.equal(line?.['msg'], 'the Pod is annotated envoy-injector.io/inject: "true"');
      const text = JSON.stringify(line);
      assert.ok(!text.includes('nginx:1.27') && !text.includes('containers'), 'no Pod spec in the log');
    } finally {
      await server.shutdown();
    }
  });

  it('at info: lifecycle and reloads only; a bad request is one warn line without the body; errors carry err', async () => {
    const server = await startTestServer();
    try {
      server.log.logger.level = 'info';
      const before = server.log.lines.length;
      await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(podReview({ namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true' } })) });
      assert.equal(server.log.lines.length, before, 'no line per admission at info');
      await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"secret":"hunter2"}}' });
      const warn = server.log.lines.slice(before);
      assert.equal(warn.length, 1);
      assert.equal(warn[0]?.['level'], 40);
      assert.equal(warn[0]?.['reason'], 'malformed_review');
      assert.ok(!JSON.stringify(warn[0]).includes('hunter2'), 'the body is not logged');
      server.templates.update({ config: 'containers: [{name: envoy, image: "e:3"}]' }, 'a test');
      assert.ok(server.log.lines.some((line) => line['level'] === 30 && line['msg'] === 'sidecar templates loaded from a test'));
      assert.ok(server.log.lines.some((line) => line['level'] === 30 && String(line['msg']).startsWith('envoy-injector serving https')));
    } finally {
      await server.shutdown();
    }
  });
});
