import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  admitPod,
  ALL_OVERRIDES,
  applyPodPatch,
  DEFAULT_ALLOWED_OVERRIDES,
  imageProblem,
  parseTemplateData,
  type AdmitOptions,
  type JsonObject,
} from '../src/injection/index.js';
import { applyIndependently } from './helpers/patch.js';

const templates = parseTemplateData({
  config: `containers:
  - name: envoy
    image: envoyproxy/envoy:v1.31.2
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: "1", memory: 512Mi}
  - name: log-agent
    image: fluent-bit:3
    resources: {requests: {cpu: 10m}}
`,
});

function pod(annotations: Record<string, string>): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', annotations },
    spec: { containers: [{ name: 'web', image: 'nginx', resources: { requests: { cpu: '5' } } }] },
  };
}

function admit(annotations: Record<string, string>, options: AdmitOptions = {}) {
  const received = pod({ 'envoy-injector.io/inject': 'true', ...annotations });
  const admission = admitPod({
    operation: 'CREATE',
    kind: { group: '', kind: 'Pod' },
    namespace: 'shop',
    namespaceLabels: {},
    pod: received,
    templates,
    options,
  });
  assert.ok(admission.injection !== undefined);
  const injected = applyPodPatch(received, admission.injection.patch);
  assert.deepEqual(applyIndependently(received, admission.injection.patch), injected);
  const containers = (injected['spec'] as JsonObject)['containers'] as JsonObject[];
  const byName = (name: string) => containers.find((c) => c['name'] === name) ?? {};
  return { admission, injected, proxy: byName('envoy'), agent: byName('log-agent'), app: byName('web') };
}

const TEMPLATE_RESOURCES = { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '512Mi' } };

describe('proxy overrides by Pod annotation', () => {
  const cases: {
    name: string;
    annotations: Record<string, string>;
    options?: AdmitOptions;
    image?: string;
    resources?: unknown;
    applied?: string[];
    warnings?: string[];
  }[] = [
    { name: 'proxy-cpu valid (millicores)', annotations: { 'envoy-injector.io/proxy-cpu': '250m' }, resources: { ...TEMPLATE_RESOURCES, requests: { cpu: '250m', memory: '64Mi' } }, applied: ['envoy-injector.io/proxy-cpu'] },
    { name: 'proxy-cpu valid (decimal)', annotations: { 'envoy-injector.io/proxy-cpu': '0.5' }, resources: { ...TEMPLATE_RESOURCES, requests: { cpu: '0.5', memory: '64Mi' } }, applied: ['envoy-injector.io/proxy-cpu'] },
    { name: 'proxy-memory valid', annotations: { 'envoy-injector.io/proxy-memory': '128Mi' }, resources: { ...TEMPLATE_RESOURCES, requests: { cpu: '100m', memory: '128Mi' } }, applied: ['envoy-injector.io/proxy-memory'] },
    { name: 'proxy-cpu-limit valid', annotations: { 'envoy-injector.io/proxy-cpu-limit': '1.5' }, resources: { ...TEMPLATE_RESOURCES, limits: { cpu: '1.5', memory: '512Mi' } }, applied: ['envoy-injector.io/proxy-cpu-limit'] },
    { name: 'proxy-memory-limit valid (decimal SI)', annotations: { 'envoy-injector.io/proxy-memory-limit': '1G' }, resources: { ...TEMPLATE_RESOURCES, limits: { cpu: '1', memory: '1G' } }, applied: ['envoy-injector.io/proxy-memory-limit'] },
    {
      name: 'all four resource overrides together',
      annotations: { 'envoy-injector.io/proxy-cpu': '200m', 'envoy-injector.io/proxy-cpu-limit': '2', 'envoy-injector.io/proxy-memory': '100Mi', 'envoy-injector.io/proxy-memory-limit': '1Gi' },
      resources: { requests: { cpu: '200m', memory: '100Mi' }, limits: { cpu: '2', memory: '1Gi' } },
      applied: ['envoy-injector.io/proxy-cpu', 'envoy-injector.io/proxy-memory', 'envoy-injector.io/proxy-cpu-limit', 'envoy-injector.io/proxy-memory-limit'],
    },
    {
      name: 'proxy-cpu invalid',
      annotations: { 'envoy-injector.io/proxy-cpu': 'fast' },
      resources: TEMPLATE_RESOURCES,
      warnings: ['envoy-injector.io/proxy-cpu: "fast" is not a quantity (examples: "250m", "1.5", "128Mi", "1G"); the template\'s value was kept'],
    },
    {
      name: 'proxy-memory invalid unit',
      annotations: { 'envoy-injector.io/proxy-memory': '128MB' },
      resources: TEMPLATE_RESOURCES,
      warnings: ['envoy-injector.io/proxy-memory: "128MB" is not a quantity (examples: "250m", "1.5", "128Mi", "1G"); the template\'s value was kept'],
    },
    {
      name: 'negative quantity',
      annotations: { 'envoy-injector.io/proxy-cpu-limit': '-1' },
      resources: TEMPLATE_RESOURCES,
      warnings: ['envoy-injector.io/proxy-cpu-limit: "-1" must not be negative; the template\'s value was kept'],
    },
    {
      name: 'request above the template limit',
      annotations: { 'envoy-injector.io/proxy-cpu': '1500m' },
      resources: TEMPLATE_RESOURCES,
      warnings: ['envoy-injector.io/proxy-cpu: the cpu request "1500m" is above the limit "1"; the template\'s cpu values were kept'],
    },
    {
      name: 'request above the overridden limit (both rejected, memory still applied)',
      annotations: { 'envoy-injector.io/proxy-cpu': '2', 'envoy-injector.io/proxy-cpu-limit': '1500m', 'envoy-injector.io/proxy-memory': '128Mi' },
      resources: { ...TEMPLATE_RESOURCES, requests: { cpu: '100m', memory: '128Mi' } },
      applied: ['envoy-injector.io/proxy-memory'],
      warnings: ['envoy-injector.io/proxy-cpu and envoy-injector.io/proxy-cpu-limit: the cpu request "2" is above the limit "1500m"; the template\'s cpu values were kept'],
    },
    {
      name: 'limit below the template request',
      annotations: { 'envoy-injector.io/proxy-memory-limit': '32Mi' },
      resources: TEMPLATE_RESOURCES,
      warnings: ['envoy-injector.io/proxy-memory-limit: the memory request "64Mi" is above the limit "32Mi"; the template\'s memory values were kept'],
    },
    {
      name: 'proxy-image not allowed by default',
      annotations: { 'envoy-injector.io/proxy-image': 'envoyproxy/envoy:v1.32.0' },
      image: 'envoyproxy/envoy:v1.31.2',
      warnings: ["envoy-injector.io/proxy-image: overriding the proxy image is not allowed by this injector (allowed: envoy-injector.io/proxy-cpu, envoy-injector.io/proxy-memory, envoy-injector.io/proxy-cpu-limit, envoy-injector.io/proxy-memory-limit); the template's value was kept"],
    },
    {
      name: 'proxy-image allowed by policy',
      annotations: { 'envoy-injector.io/proxy-image': 'registry.example.com:5000/mirror/envoy:v1.32.0' },
      options: { allowedOverrides: ALL_OVERRIDES },
      image: 'registry.example.com:5000/mirror/envoy:v1.32.0',
      applied: ['envoy-injector.io/proxy-image'],
    },
    {
      name: 'proxy-image invalid',
      annotations: { 'envoy-injector.io/proxy-image': 'Not An Image' },
      options: { allowedOverrides: ALL_OVERRIDES },
      image: 'envoyproxy/envoy:v1.31.2',
      warnings: ['envoy-injector.io/proxy-image: "Not An Image" is not an image reference (example: "envoyproxy/envoy:v1.31.2"); the template\'s value was kept'],
    },
    {
      name: 'resources not allowed when the policy allows none',
      annotations: { 'envoy-injector.io/proxy-cpu': '250m' },
      options: { allowedOverrides: [] },
      resources: TEMPLATE_RESOURCES,
      warnings: ["envoy-injector.io/proxy-cpu: overriding the proxy's cpu request is not allowed by this injector (allowed: none); the template's value was kept"],
    },
  ];

  for (const { name, annotations, options, image, resources, applied = [], warnings = [] } of cases) {
    it(name, () => {
      const { admission, proxy, agent, app } = admit(annotations, options);
      if (image !== undefined) assert.equal(proxy['image'], image);
      if (resources !== undefined) assert.deepEqual(proxy['resources'], resources);
      assert.deepEqual(admission.overrides.map((o) => o.annotation), applied);
      assert.deepEqual(admission.warnings, warnings);
      // Never the app's own container, never another sidecar.
      assert.deepEqual(app['resources'], { requests: { cpu: '5' } });
      assert.deepEqual(agent['resources'], { requests: { cpu: '10m' } });
      assert.equal(agent['image'], 'fluent-bit:3');
    });
  }

  it('does not change the template (overrides work on a copy)', () => {
    admit({ 'envoy-injector.io/proxy-cpu': '300m' });
    assert.deepEqual(templates.defaultTemplate.containers[0]?.['resources'], TEMPLATE_RESOURCES);
  });

  it('a Pod with its own proxy-named container is not injected: no override is applied to a container not ours', () => {
    const received = pod({ 'envoy-injector.io/inject': 'true', 'envoy-injector.io/proxy-cpu': '250m' });
    ((received['spec'] as JsonObject)['containers'] as JsonObject[]).push({ name: 'envoy', image: 'mine' });
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options: {} });
    assert.equal(admission.decision.reason, 'proxy_name_taken');
    assert.equal(admission.injection, undefined);
    assert.deepEqual(admission.overrides, []);
  });

  it('re-injecting an overridden or a native-injected Pod is a no-op', () => {
    for (const [annotations, options] of [
      [{ 'envoy-injector.io/proxy-cpu': '250m', 'envoy-injector.io/proxy-image': 'e:2' }, { allowedOverrides: ALL_OVERRIDES }],
      [{ 'envoy-injector.io/native-sidecar': 'true' }, {}],
      [{}, { nativeSidecar: true }],
    ] as const) {
      const { injected } = admit(annotations, options);
      const again = admitPod({
        operation: 'CREATE',
        kind: { group: '', kind: 'Pod' },
        namespace: 'shop',
        namespaceLabels: {},
        pod: injected,
        templates,
        options,
      });
      assert.equal(again.decision.inject, false);
      assert.equal(again.decision.reason, 'already_injected');
      assert.equal(again.injection, undefined);
    }
  });

  it('the default policy allows the resource overrides and not the image', () => {
    assert.deepEqual([...DEFAULT_ALLOWED_OVERRIDES].sort(), ['proxy-cpu', 'proxy-cpu-limit', 'proxy-memory', 'proxy-memory-limit']);
  });
});

describe('image references', () => {
  for (const valid of ['envoy', 'envoyproxy/envoy:v1.31.2', 'docker.io/envoyproxy/envoy:v1.31.2', 'localhost:5000/a/b_c/d-e:latest', `envoy@sha256:${'a'.repeat(64)}`, `r.example.com/envoy:v1@sha256:${'b'.repeat(64)}`, '[::1]:5000/envoy:1']) {
    it(`accepts ${valid}`, () => assert.equal(imageProblem(valid), undefined));
  }
  for (const invalid of ['', 'Envoy', 'envoy:', 'envoy:tag with space', 'envoy@sha256:short', '-envoy', 'a//b', `envoy:${'t'.repeat(129)}`]) {
    it(`rejects ${JSON.stringify(invalid)}`, () => assert.notEqual(imageProblem(invalid), undefined));
  }
});
