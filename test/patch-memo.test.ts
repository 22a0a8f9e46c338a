import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { PatchMemo, reviewAdmission, type AdmissionRequest, type ReviewContext } from '../src/admission/index.js';
import { admitPod, ALL_OVERRIDES, OVERRIDE_ANNOTATION_PREFIX, parseTemplateData, type JsonObject, type JsonValue, type OverrideName } from '../src/injection/index.js';

/** Templates whose names Pods often share: every clash (kept entries, warnings) is reached. */
const TEMPLATES = parseTemplateData({
  config: [
    'containers:',
    '  - {name: envoy, image: "envoy:1", resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: "1", memory: 512Mi}}}',
    '  - {name: log, image: "log:1"}',
    'initContainers: [{name: init, image: "init:1"}]',
    'volumes: [{name: envoy-conf, emptyDir: {}}, {name: data, emptyDir: {}}]',
    'imagePullSecrets: [{name: registry}]',
  ].join('\n'),
  alt: 'containers: [{name: proxy, image: "proxy:2"}]\nvolumes: [{name: data, emptyDir: {}}]',
  // Traffic capture: the answer also depends on the namespace's Pod Security level and the capture annotations.
  capture: 'containers: [{name: envoy, image: "envoy:1", securityContext: {runAsUser: 101}}]\ncapture: {image: "init:1", outboundPort: 15001, inboundPort: 15006, excludeOutboundPorts: "5432"}',
  // The proxy's lifecycle: the answer also depends on hold-application, the grace period and the autoscaler annotation.
  lifecycle: 'containers: [{name: envoy, image: "envoy:1"}]\nvolumes: [{name: data, emptyDir: {}}]\nproxyLifecycle: {adminPort: 9901, readyPort: 9902}',
});
const ENABLED = { 'envoy-injector.io/inject': 'enabled' };
const BASELINE = { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' };

const name = fc.constantFrom('envoy', 'log', 'init', 'proxy', 'envoy-conf', 'data', 'registry', 'app', 'other', 'envoy-init', 'envoy-init-xtables-lock');
const entries = fc.array(fc.oneof(name.map((entryName): JsonValue => ({ name: entryName, image: 'x' })), fc.constant<JsonValue>({}), fc.constant<JsonValue>('junk')), { maxLength: 4 });
/** A list as Pods send it, valid or not: absent, null, not an array, or entries. */
const list = fc.oneof(fc.constant(undefined), fc.constant(null), fc.constant('not a list'), entries);
const overrideValue = fc.constantFrom<JsonValue | undefined>(undefined, undefined, '200m', '128Mi', 'nonsense', 5, 'envoy:9');

const pod: fc.Arbitrary<JsonObject> = fc
  .record({
    metadata: fc.constantFrom('object', 'absent', 'no-annotations'),
    template: fc.constantFrom(undefined, 'alt', 'missing', 'capture', 'capture', 'lifecycle', 'lifecycle'),
    hold: fc.constantFrom(undefined, 'false', 'true', 'maybe'),
    safeToEvict: fc.constantFrom(undefined, '', 'data', 'cache'),
    grace: fc.constantFrom<JsonValue | undefined>(undefined, 0, 3, 30, 'junk'),
    capture: fc.constantFrom(undefined, 'true', 'true', 'false', 'yes'),
    captureExclusion: fc.constantFrom(undefined, '80,443', '', 'bad value'),
    overrides: fc.tuple(...ALL_OVERRIDES.map(() => overrideValue)),
    inject: fc.constantFrom(undefined, 'true', 'false'),
    spec: fc.constantFrom('object', 'absent', 'not an object'),
    containers: list,
    initContainers: list,
    ephemeralContainers: list,
    volumes: list,
    imagePullSecrets: list,
    // The ServiceAccount plugin's volume and mounts, with the random suffix the API server gives them.
    token: fc.constantFrom(undefined, 'abcde', 'zz9x1', 'q7'),
  })
  .map((shape) => {
    const pod: JsonObject = { apiVersion: 'v1', kind: 'Pod' };
    if (shape.metadata !== 'absent') {
      const metadata: JsonObject = { generateName: 'web-' };
      if (shape.metadata === 'object') {
        const annotations: JsonObject = {};
        if (shape.template !== undefined) annotations['envoy-injector.io/template'] = shape.template;
        if (shape.inject !== undefined) annotations['envoy-injector.io/inject'] = shape.inject;
        if (shape.capture !== undefined) annotations['envoy-injector.io/capture'] = shape.capture;
        if (shape.captureExclusion !== undefined) annotations['envoy-injector.io/capture-exclude-outbound-ports'] = shape.captureExclusion;
        if (shape.hold !== undefined) annotations['envoy-injector.io/hold-application'] = shape.hold;
        if (shape.safeToEvict !== undefined) annotations['cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes'] = shape.safeToEvict;
        ALL_OVERRIDES.forEach((override, index) => {
          const value = shape.overrides[index];
          if (value !== undefined) annotations[OVERRIDE_ANNOTATION_PREFIX + override] = value;
        });
        metadata['annotations'] = annotations;
      }
      pod['metadata'] = metadata;
    }
    if (shape.spec === 'not an object') pod['spec'] = 'junk';
    else if (shape.spec === 'object') {
      const spec: JsonObject = {};
      if (shape.grace !== undefined) spec['terminationGracePeriodSeconds'] = shape.grace;
      for (const key of ['containers', 'initContainers', 'ephemeralContainers', 'volumes', 'imagePullSecrets'] as const) {
        const value = shape[key];
        if (value !== undefined) spec[key] = value;
      }
      if (shape.token !== undefined) addTokenVolume(spec, `kube-api-access-${shape.token}`);
      pod['spec'] = spec;
    }
    return pod;
  });

/** As the ServiceAccount admission plugin leaves a Pod: the volume, and its mount in every container. */
function addTokenVolume(spec: JsonObject, name: string): void {
  const volumes = Array.isArray(spec['volumes']) ? spec['volumes'] : [];
  spec['volumes'] = [{ name, projected: { sources: [] } }, ...volumes];
  for (const key of ['containers', 'initContainers']) {
    const entries = spec[key];
    if (!Array.isArray(entries)) continue;
    spec[key] = entries.map((entry) =>
      typeof entry === 'object' && entry !== null && !Array.isArray(entry)
        ? { ...entry, volumeMounts: [{ name, readOnly: true, mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' }] }
        : entry,
    );
  }
}

function request(object: JsonObject, uid: string): AdmissionRequest {
  return {
    uid,
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    namespace: 'shop',
    operation: 'CREATE',
    object,
  } as AdmissionRequest;
}

const context = (nativeSidecar: boolean, allowedOverrides: readonly OverrideName[], memo?: PatchMemo, namespaceLabels: Record<string, string> = ENABLED): ReviewContext => ({
  templates: TEMPLATES,
  namespaceLabels,
  options: { nativeSidecar, allowedOverrides, injectorNamespace: 'envoy-injector' },
  memo,
});

describe('the patch memo', () => {
  it('answers byte-identically to computing, for random Pods, hit or miss', () => {
    // One memo for the whole run, small enough to evict: hits, misses and evictions all occur.
    const memo = new PatchMemo({ maxEntries: 16, maxBytes: 64 * 1024 });
    let hits = 0;
    fc.assert(
      fc.property(pod, fc.boolean(), fc.subarray([...ALL_OVERRIDES]), fc.integer({ min: 1, max: 3 }), fc.boolean(), (object, native, allowed, repeats, baseline) => {
        // The same shape alternately in both kinds of namespace: the memo must not hand one's answer to the other.
        const kinds = baseline ? [BASELINE, ENABLED] : [ENABLED, BASELINE];
        const expectedIn = kinds.map((labels) => reviewAdmission(request(structuredClone(object), 'uid-expected'), context(native, allowed, undefined, labels)));
        for (let i = 0; i < repeats * 2; i++) {
          const sizeBefore = memo.size;
          const uid = `uid-${i}`;
          const labels = kinds[i % 2] ?? ENABLED;
          const expected = expectedIn[i % 2];
          assert.ok(expected !== undefined);
          const memoized = reviewAdmission(request(structuredClone(object), uid), context(native, allowed, memo, labels));
          if (i > 1 && memo.size === sizeBefore && expected.result === 'injected') hits++;
          assert.equal(JSON.stringify(memoized.review), JSON.stringify(expected.review).replace('"uid-expected"', JSON.stringify(uid)));
          assert.deepEqual(memoized.warnings, expected.warnings);
          assert.deepEqual(memoized.injection, expected.injection);
          assert.deepEqual(memoized.overrides, expected.overrides);
          if (memoized.review.response.patch !== undefined) {
            // The operations themselves, as the merge makes them for this very Pod (its own token volume's name included).
            const merged = admitPod({ kind: { group: '', kind: 'Pod' }, operation: 'CREATE', namespace: 'shop', pod: structuredClone(object), namespaceLabels: labels, templates: TEMPLATES, options: context(native, allowed).options });
            assert.deepEqual(JSON.parse(Buffer.from(memoized.review.response.patch, 'base64').toString('utf8')), JSON.parse(JSON.stringify(merged.injection?.patch)));
          }
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(hits > 0, 'some reviews were answered from the memo');
  });

  it('a Pod of another shape gets its own patch (a clash by name changes the answer)', () => {
    const memo = new PatchMemo();
    const plain = { metadata: { annotations: {} }, spec: { containers: [{ name: 'app' }] } };
    const clashing = { metadata: { annotations: {} }, spec: { containers: [{ name: 'app' }, { name: 'log' }] } };
    const first = reviewAdmission(request(plain, 'a'), context(false, [], memo));
    const second = reviewAdmission(request(clashing, 'b'), context(false, [], memo));
    assert.notEqual(first.review.response.patch, second.review.response.patch);
    assert.equal(memo.size, 2);
    assert.deepEqual(second.injection?.kept, [{ list: 'containers', name: 'log' }]);
  });

  it('Pods that differ only in what the proxy lifecycle reads get their own patch (hold-application, grace period, autoscaler list)', () => {
    const memo = new PatchMemo();
    const lifecyclePod = (annotations: Record<string, string>, spec: JsonObject = {}): JsonObject => ({
      metadata: { annotations: { 'envoy-injector.io/template': 'lifecycle', ...annotations } },
      spec: { containers: [{ name: 'app' }], ...spec },
    });
    const variants = [
      lifecyclePod({}),
      lifecyclePod({ 'envoy-injector.io/hold-application': 'false' }),
      lifecyclePod({}, { terminationGracePeriodSeconds: 3 }),
      lifecyclePod({ 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes': 'cache' }),
    ];
    const patches = variants.map((object, index) => reviewAdmission(request(object, `u${index}`), context(false, [], memo)).review.response.patch);
    assert.equal(new Set(patches).size, variants.length);
    assert.equal(memo.size, variants.length);
  });

  it('forgets every answer when the template set changes', () => {
    const memo = new PatchMemo();
    const object = { metadata: { annotations: {} }, spec: { containers: [{ name: 'app' }] } };
    reviewAdmission(request(object, 'a'), context(false, [], memo));
    assert.equal(memo.size, 1);
    const changed = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:2"}]' });
    const answer = reviewAdmission(request(object, 'b'), { ...context(false, [], memo), templates: changed });
    assert.equal(memo.size, 1, 'the old set’s answer is gone, the new one is held');
    const patch = JSON.parse(Buffer.from(answer.review.response.patch ?? '', 'base64').toString()) as { value: unknown }[];
    assert.match(JSON.stringify(patch), /envoy:2/);
  });

  it('stays within its bounds in entries and accounted bytes; an answer larger than the bound is not kept', () => {
    const limits = { maxEntries: 64, maxBytes: 256 * 1024 };
    const memo = new PatchMemo(limits);
    // Distinct shapes with large override values: each answer is kilobytes, the set of them megabytes.
    const big = (n: number) => ({ metadata: { annotations: { [`${OVERRIDE_ANNOTATION_PREFIX}proxy-image`]: `envoy:${String(n).padStart(4000, '0')}` } }, spec: { containers: [{ name: 'app' }] } });
    for (let n = 0; n < 2000; n++) {
      reviewAdmission(request(big(n), `u${n}`), context(false, ['proxy-image' as OverrideName], memo));
      assert.ok(memo.size <= limits.maxEntries, `entries ${memo.size} > ${limits.maxEntries}`);
      assert.ok(memo.bytes <= limits.maxBytes, `bytes ${memo.bytes} > ${limits.maxBytes}`);
    }
    assert.ok(memo.size > 1, 'it held some');
    // An answer larger than the whole bound is computed and not kept (its Pod's annotations within the API server's 256 KiB).
    const huge = { metadata: { annotations: { [`${OVERRIDE_ANNOTATION_PREFIX}proxy-image`]: `envoy:${'1'.repeat(250_000)}` } }, spec: {} };
    const sizeBefore = memo.size;
    const answer = reviewAdmission(request(huge, 'h'), context(false, ['proxy-image' as OverrideName], memo));
    assert.equal(answer.result, 'injected');
    assert.ok(memo.size <= sizeBefore, 'the oversized answer was not kept');
  });

  it('what it accounts for is at least what it keeps on the heap', () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const memo = new PatchMemo({ maxEntries: 100_000, maxBytes: 1024 * 1024 * 1024 });
    // Each shape its own accepted override: every answer holds its own proxy container, not only shared template entries.
    const shaped = (n: number) => ({ metadata: { annotations: { [`${OVERRIDE_ANNOTATION_PREFIX}proxy-cpu`]: `${n}m` } }, spec: { containers: [{ name: 'app' }] } });
    reviewAdmission(request(shaped(0), 'warm-up'), context(false, ['proxy-cpu' as OverrideName], memo));
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const accountedBefore = memo.bytes;
    for (let n = 1; n <= 3000; n++) reviewAdmission(request(shaped(n), `u${n}`), context(false, ['proxy-cpu' as OverrideName], memo));
    gc();
    const kept = process.memoryUsage().heapUsed - heapBefore;
    const accounted = memo.bytes - accountedBefore;
    assert.equal(memo.size, 3001);
    assert.ok(kept > 0, 'the entries take heap');
    assert.ok(kept <= accounted, `3,000 entries keep ${kept} bytes of heap, more than the ${accounted} bytes accounted`);
  });
});
