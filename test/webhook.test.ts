import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { JsonObject } from '../src/injection/index.js';
import { repoFile } from './helpers/fixtures.js';
import { httpsCall } from './helpers/https-client.js';
import { applyIndependently } from './helpers/patch.js';
import { startTestServer, type TestServer } from './helpers/server.js';

interface ReviewResponse {
  apiVersion: string;
  kind: string;
  response: {
    uid: string;
    allowed: boolean;
    patchType?: string;
    patch?: string;
    warnings?: string[];
    auditAnnotations?: Record<string, string>;
  };
}

const exampleReview = (): JsonObject => JSON.parse(repoFile('examples/admission-review.json')) as JsonObject;
const requestOf = (review: JsonObject): JsonObject => review['request'] as JsonObject;

function decodePatch(review: ReviewResponse): unknown[] {
  assert.equal(review.response.patchType, 'JSONPatch');
  assert.ok(review.response.patch !== undefined);
  return JSON.parse(Buffer.from(review.response.patch, 'base64').toString('utf8')) as unknown[];
}

describe('the admission webhook over real HTTPS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.shutdown();
  });

  const mutate = async (body: unknown): Promise<ReviewResponse> => {
    const response = await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(body) });
    assert.equal(response.status, 200, response.body);
    return JSON.parse(response.body) as ReviewResponse;
  };

  it('injects the example review: the patch, applied independently, adds envoy and envoy-conf and leaves the app alone', async () => {
    const review = exampleReview();
    const answer = await mutate(review);
    assert.equal(answer.apiVersion, 'admission.k8s.io/v1');
    assert.equal(answer.kind, 'AdmissionReview');
    assert.equal(answer.response.uid, requestOf(review)['uid']);
    assert.equal(answer.response.allowed, true);
    const received = requestOf(review)['object'] as JsonObject;
    const patched = applyIndependently(received, decodePatch(answer));
    const spec = patched['spec'] as JsonObject;
    const containers = spec['containers'] as JsonObject[];
    assert.deepEqual(containers.map((c) => c['name']), ['myapp-container', 'envoy']);
    assert.deepEqual(containers[0], ((received['spec'] as JsonObject)['containers'] as JsonObject[])[0], 'app container unchanged');
    assert.deepEqual((spec['volumes'] as JsonObject[]).map((v) => v['name']), ['kube-api-access-7xk2p', 'envoy-conf']);
    assert.deepEqual(answer.response.auditAnnotations, {
      decision: 'injected',
      reason: 'pod_annotation_true',
      rule: 'pod-annotation',
      template: `config@${server.templates.current?.defaultTemplate.hash}`,
    });
    assert.equal(answer.response.warnings, undefined);
  });

  it('reinvocation: the patched Pod sent back gets no patch', async () => {
    const review = exampleReview();
    const first = await mutate(review);
    const request = requestOf(review);
    request['object'] = applyIndependently(request['object'] as JsonObject, decodePatch(first));
    const second = await mutate(review);
    assert.equal(second.response.patch, undefined);
    assert.equal(second.response.patchType, undefined);
    assert.equal(second.response.auditAnnotations?.['reason'], 'already_injected');
  });

  it('dryRun gets exactly the patch a real request gets', async () => {
    const real = await mutate(exampleReview());
    const review = exampleReview();
    requestOf(review)['dryRun'] = true;
    const dry = await mutate(review);
    assert.equal(dry.response.patch, real.response.patch);
  });

  for (const [name, change] of [
    ['UPDATE', (r: JsonObject) => { r['operation'] = 'UPDATE'; r['oldObject'] = r['object'] ?? null; }],
    ['DELETE', (r: JsonObject) => { r['operation'] = 'DELETE'; r['oldObject'] = r['object'] ?? null; r['object'] = null; }],
    ['a non-Pod kind', (r: JsonObject) => { r['kind'] = { group: 'apps', version: 'v1', kind: 'Deployment' }; r['resource'] = { group: 'apps', version: 'v1', resource: 'deployments' }; }],
  ] as const) {
    it(`${name}: allowed, no patch`, async () => {
      const review = exampleReview();
      change(requestOf(review));
      const answer = await mutate(review);
      assert.equal(answer.response.allowed, true);
      assert.equal(answer.response.patch, undefined);
      assert.equal(answer.response.auditAnnotations?.['reason'], 'not_pod_create');
    });
  }

  it("a controller's Pod (generateName, no metadata.namespace) is judged by request.namespace", async () => {
    const review = exampleReview();
    const request = requestOf(review);
    const pod = request['object'] as JsonObject;
    const metadata = pod['metadata'] as JsonObject;
    delete metadata['name'];
    delete metadata['namespace'];
    metadata['generateName'] = 'myapp-7d4b9c-';
    request['name'] = '';
    request['namespace'] = 'kube-system';
    const skipped = await mutate(review);
    assert.equal(skipped.response.auditAnnotations?.['reason'], 'excluded_namespace');
    request['namespace'] = 'shop';
    const injected = await mutate(review);
    const patched = applyIndependently(pod, decodePatch(injected));
    assert.equal((patched['metadata'] as JsonObject)['namespace'], undefined);
    assert.equal((patched['metadata'] as JsonObject)['generateName'], 'myapp-7d4b9c-');
  });

  it("warns about an unknown template and a container of the proxy's name the Pod has of its own", async () => {
    const review = exampleReview();
    const pod = requestOf(review)['object'] as JsonObject;
    ((pod['metadata'] as JsonObject)['annotations'] as JsonObject)['envoy-injector.io/template'] = 'missing';
    const unknown = await mutate(review);
    assert.equal(unknown.response.patch, undefined);
    assert.deepEqual(unknown.response.warnings, ['envoy-injector.io/template: no template named "missing" (known: "config"); the Pod was not injected']);

    const conflict = exampleReview();
    const conflictPod = requestOf(conflict)['object'] as JsonObject;
    ((conflictPod['spec'] as JsonObject)['containers'] as JsonObject[]).push({ name: 'envoy', image: 'mine' });
    const kept = await mutate(conflict);
    assert.equal(kept.response.patch, undefined, 'nothing added, not labeled injected');
    assert.deepEqual(kept.response.warnings, [
      'the Pod already has a container named "envoy" that the injector did not add, the name of template "config"\'s proxy: it was not injected (a second envoy cannot be added, and the Pod\'s own is not ours); rename that container, name another template in envoy-injector.io/template, or annotate the Pod envoy-injector.io/inject: "false" to say it is meant',
    ]);
  });

  it('answers at the URL the API server calls (with ?timeout=)', async () => {
    const response = await httpsCall(`${server.url}/mutate?timeout=5s`, { ca: server.ca, body: JSON.stringify(exampleReview()) });
    assert.equal(response.status, 200);
    assert.ok(decodePatch(JSON.parse(response.body) as ReviewResponse).length > 0);
    const bad = await httpsCall(`${server.url}/mutate?timeout=5s`, { ca: server.ca, body: '[]' });
    assert.equal(bad.status, 400);
    const metrics = await server.metrics.registry.getSingleMetricAsString('envoy_injector_admission_requests_total');
    assert.match(metrics, /result="error",reason="malformed_review"\} [1-9]/);
  });

  it('answers the same without a socket (fastify.inject)', async () => {
    const overSocket = await mutate(exampleReview());
    const injected = await server.app.inject({ method: 'POST', url: '/mutate', payload: exampleReview() });
    assert.equal(injected.statusCode, 200);
    assert.deepEqual(JSON.parse(injected.body), overSocket);
  });

  it('unknown routes are 404', async () => {
    const response = await httpsCall(`${server.url}/nope`, { ca: server.ca });
    assert.equal(response.status, 404);
  });

  it('health, readiness and metrics answer', async () => {
    assert.equal((await httpsCall(`${server.url}/healthz`, { ca: server.ca })).status, 200);
    const ready = await httpsCall(`${server.url}/readyz`, { ca: server.ca });
    assert.equal(ready.status, 200);
    assert.deepEqual(JSON.parse(ready.body), { ready: true, checks: { template: 'loaded', tls: 'loaded', draining: false }, problems: [] });
    const metrics = await httpsCall(`${server.url}/metrics`, { ca: server.ca });
    assert.match(metrics.body, /envoy_injector_admission_requests_total\{result="injected",reason="pod_annotation_true"\} \d+/);
  });
});

describe('bad input: a clear 4xx, and the server keeps serving', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.shutdown();
  });

  const valid = exampleReview();
  const withRequest = (change: (request: JsonObject) => void): string => {
    const review = exampleReview();
    change(requestOf(review));
    return JSON.stringify(review);
  };
  const cases: { name: string; body: string | Buffer; headers?: Record<string, string>; status: number; message: string | RegExp }[] = [
    { name: 'not JSON', body: 'hello', status: 400, message: /^body is not JSON: Unexpected token/ },
    { name: 'empty body', body: '', status: 400, message: 'body is empty: expected an AdmissionReview' },
    { name: 'a JSON array', body: '[1,2]', status: 400, message: 'malformed AdmissionReview: the body: must be object' },
    { name: 'missing request', body: JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), status: 400, message: 'malformed AdmissionReview: request: required' },
    { name: 'missing uid', body: withRequest((r) => delete r['uid']), status: 400, message: 'malformed AdmissionReview: request.uid: required' },
    { name: 'uid not a string', body: withRequest((r) => { r['uid'] = 42; }), status: 400, message: 'malformed AdmissionReview: request.uid: must be string' },
    { name: 'wrong apiVersion', body: JSON.stringify({ ...valid, apiVersion: 'admission.k8s.io/v1beta1' }), status: 400, message: 'malformed AdmissionReview: apiVersion: must be "admission.k8s.io/v1"' },
    { name: 'wrong kind', body: JSON.stringify({ ...valid, kind: 'Pod' }), status: 400, message: 'malformed AdmissionReview: kind: must be "AdmissionReview"' },
    { name: 'unknown operation', body: withRequest((r) => { r['operation'] = 'PATCH'; }), status: 400, message: 'malformed AdmissionReview: request.operation: must be one of CREATE, UPDATE, DELETE, CONNECT' },
    { name: 'object not an object', body: withRequest((r) => { r['object'] = 'a pod'; }), status: 400, message: 'malformed AdmissionReview: request.object: must be object or null' },
    { name: 'CREATE without object', body: withRequest((r) => { r['object'] = null; }), status: 400, message: 'malformed AdmissionReview: request.object: must be an object for CREATE' },
    { name: 'body over the limit', body: Buffer.alloc(4 * 1024 * 1024 + 1, 0x20), status: 413, message: 'body larger than 4194304 bytes' },
    { name: 'wrong content type', body: JSON.stringify(valid), headers: { 'content-type': 'text/plain' }, status: 415, message: 'content type "text/plain" is not application/json' },
    { name: '10,000-deep nested JSON', body: '['.repeat(10_000) + ']'.repeat(10_000), status: 400, message: 'malformed AdmissionReview: the body: must be object' },
    { name: '10,000-deep nesting inside the Pod', body: JSON.stringify(valid).replace('"status":{}', `"status":${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`), status: 200, message: '' },
    { name: 'invalid UTF-8', body: Buffer.concat([Buffer.from('{"apiVersion":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), status: 400, message: 'body is not valid UTF-8' },
  ];

  for (const { name, body, headers, status, message } of cases) {
    it(`${name} → ${status}`, async () => {
      const response = await httpsCall(`${server.url}/mutate`, { ca: server.ca, body, ...(headers === undefined ? {} : { headers }) });
      assert.equal(response.status, status, response.body);
      if (status !== 200) {
        const parsed = JSON.parse(response.body) as { message: string; statusCode: number };
        assert.equal(parsed.statusCode, status);
        if (typeof message === 'string') assert.equal(parsed.message, message);
        else assert.match(parsed.message, message);
        assert.ok(!parsed.message.includes('\n'), 'one line');
      }
      const health = await httpsCall(`${server.url}/healthz`, { ca: server.ca });
      assert.equal(health.status, 200, 'still serving');
    });
  }

  it('counts bad input as errors, by reason', async () => {
    const metrics = await server.metrics.registry.getSingleMetricAsString('envoy_injector_admission_requests_total');
    assert.match(metrics, /result="error",reason="malformed_review"\} \d+/);
    assert.match(metrics, /result="error",reason="body_too_large"\} 1/);
    assert.match(metrics, /result="error",reason="unsupported_media_type"\} 1/);
  });
});

describe('before a template is loaded', () => {
  it('readiness is 503 and Pods are allowed without a patch, with a warning', async () => {
    const server = await startTestServer({ templates: null });
    try {
      const ready = await httpsCall(`${server.url}/readyz`, { ca: server.ca });
      assert.equal(ready.status, 503);
      assert.equal((JSON.parse(ready.body) as { checks: { template: string } }).checks.template, 'missing');
      const response = await httpsCall(`${server.url}/mutate`, { ca: server.ca, body: JSON.stringify(exampleReview()) });
      const review = JSON.parse(response.body) as ReviewResponse;
      assert.equal(review.response.allowed, true);
      assert.equal(review.response.patch, undefined);
      assert.deepEqual(review.response.warnings, ['envoy-injector has no valid sidecar template loaded yet; the Pod was created without the sidecar']);
      assert.equal(review.response.auditAnnotations?.['reason'], 'template_not_loaded');
    } finally {
      await server.shutdown();
    }
  });
});
