import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { PatchMemo, reviewAdmission, type AdmissionRequest, type ReviewContext } from '../src/admission/index.js';
import {
  admitPod,
  ALL_OVERRIDES,
  applyPodPatch,
  arrayAt,
  entryName,
  isJsonObject,
  objectAt,
  OVERRIDE_ANNOTATION_PREFIX,
  parseTemplateData,
  type JsonObject,
  type JsonValue,
  type OverrideName,
  type PatchOperation,
  type TemplateSet,
} from '../src/injection/index.js';
import { only, renderChart } from './helpers/helm.js';

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

  it('past 1,024 names a merge could add, answers are computed and not kept', () => {
    const volumes = Array.from({ length: 1100 }, (_, index) => `{name: v${index}, emptyDir: {}}`).join(', ');
    const many = parseTemplateData({ config: `containers: [{name: envoy, image: "envoy:1"}]\nvolumes: [${volumes}]` });
    const memo = new PatchMemo();
    const object = { metadata: { annotations: {} }, spec: { containers: [{ name: 'app' }], volumes: [{ name: 'v7', emptyDir: {} }] } };
    for (const uid of ['a', 'b']) {
      const answer = reviewAdmission(request(structuredClone(object), uid), { ...context(false, [], memo), templates: many });
      const fresh = reviewAdmission(request(structuredClone(object), uid), { ...context(false, [], undefined), templates: many });
      assert.equal(answer.review.response.patch, fresh.review.response.patch);
    }
    assert.equal(memo.size, 0);
    // Under the bound, the same Pod is kept.
    reviewAdmission(request(structuredClone(object), 'c'), context(false, [], memo));
    assert.equal(memo.size, 1);
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

/**
 * Issue 50: one namespace's Pod must not shape the patch another Pod gets.
 * The chart's own template with capture on, with envoy-init and in CNI mode
 * (tcpSocket probes rewritten, so the per-Pod bootstrap's volume is added):
 * Pods holding entries of the names the injection adds, paired with Pods
 * of the same shape otherwise.
 */
describe('the patch memo between Pods holding the names the injection adds', () => {
  let chart: TemplateSet;
  let cniChart: TemplateSet;
  const chartTemplates = async (capture: Record<string, unknown>): Promise<TemplateSet> =>
    parseTemplateData(only(await renderChart({ proxy: { capture: { enabled: true, ...capture } } }), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
  before(async () => {
    chart = await chartTemplates({});
    cniChart = await chartTemplates({ mode: 'cni' });
  });
  const PROBE = { tcpSocket: { port: 8080 }, periodSeconds: 5 };
  const chartContext = (nativeSidecar: boolean, memo?: PatchMemo, templates = chart): ReviewContext => ({ templates, namespaceLabels: ENABLED, options: { nativeSidecar, injectorNamespace: 'envoy-injector' }, memo });
  const tenantPod = (volume: string): JsonObject => ({
    metadata: { generateName: 'web-', annotations: {} },
    spec: { containers: [{ name: 'app', image: 'app:1', livenessProbe: PROBE }], volumes: [{ name: volume, emptyDir: {} }] },
  });
  const inNamespace = (object: JsonObject, namespace: string, uid: string): AdmissionRequest => ({ ...request(object, uid), namespace });

  for (const native of [true, false]) {
    it(`A's Pod with its own envoy-proxy-config volume, then B's ordinary Pod, and the other order: each gets its own patch (${native ? 'native' : 'classic'})`, () => {
      for (const namespaces of [['team-a', 'team-b'], ['shop', 'shop']] as const) {
        for (const order of [['a', 'b'], ['b', 'a']] as const) {
          const memo = new PatchMemo();
          const pods = { a: tenantPod('envoy-proxy-config'), b: tenantPod('cache') };
          const namespaceOf = { a: namespaces[0], b: namespaces[1] };
          for (const team of order) {
            const object = pods[team];
            const memoized = reviewAdmission(inNamespace(structuredClone(object), namespaceOf[team], team), chartContext(native, memo));
            const fresh = reviewAdmission(inNamespace(structuredClone(object), namespaceOf[team], team), chartContext(native));
            const stored = applyPodPatch(object, decodedPatch(memoized.review.response.patch));
            const which = `${team}'s Pod after ${order[0]}'s, in ${namespaces.join(' and ')}`;
            assert.deepEqual(invalidities(stored), [], which);
            assert.equal(memoized.review.response.patch, fresh.review.response.patch, which);
          }
        }
      }
    });
  }

  it('for random pairs of Pods holding names the injection adds, a patch served from the memo applies and yields the Pod a fresh merge yields', () => {
    const reserved = reservedNames([chart, cniChart]);
    for (const name of ['envoy', 'envoy-init', 'envoy-capture-check', 'envoy-proxy-config']) assert.ok(reserved.entries.includes(name), `found ${reserved.entries.join(', ')}`);
    const holding = fc.uniqueArray(fc.record({ name: fc.constantFrom(...reserved.entries), as: fc.constantFrom('containers', 'initContainers', 'volumes', 'imagePullSecrets') }), { selector: (entry) => entry.name, maxLength: 3 });
    const heldAnnotations = fc.subarray(reserved.annotations, { maxLength: 2 });
    const features = fc.record({
      native: fc.boolean(),
      capture: fc.constantFrom<string | undefined>(undefined, 'false'),
      tproxy: fc.boolean(),
      probe: fc.boolean(),
      proxyProtocol: fc.boolean(),
      hold: fc.boolean(),
      token: fc.boolean(),
      sameNamespace: fc.boolean(),
      cni: fc.boolean(),
      // A memo that has seen other Pods (names learnt before, entries of older keys), or a new one.
      sharedMemo: fc.boolean(),
    });
    const shared = new PatchMemo({ maxEntries: 32, maxBytes: 1024 * 1024 });
    let served = 0;
    fc.assert(
      fc.property(features, holding, heldAnnotations, holding, heldAnnotations, (feature, firstNames, firstAnnotations, secondNames, secondAnnotations) => {
        const memo = feature.sharedMemo ? shared : new PatchMemo();
        const templates = feature.cni ? cniChart : chart;
        const pair = [featuredPod(feature, firstNames, firstAnnotations), featuredPod(feature, secondNames, secondAnnotations)];
        const namespaces = feature.sameNamespace ? ['shop', 'shop'] : ['team-a', 'team-b'];
        for (const index of [0, 1, 0]) {
          const object = pair[index] ?? {};
          const namespace = namespaces[index] ?? 'shop';
          const sizeBefore = memo.size;
          const memoized = reviewAdmission(inNamespace(structuredClone(object), namespace, 'u'), chartContext(feature.native, memo, templates));
          const fresh = reviewAdmission(inNamespace(structuredClone(object), namespace, 'u'), chartContext(feature.native, undefined, templates));
          if (memoized.result === 'injected' && memo.size === sizeBefore && memo.size > 0) served++;
          const memoPatch = decodedPatch(memoized.review.response.patch);
          const stored = applyPodPatch(object, memoPatch);
          assert.deepEqual(invalidities(stored), []);
          assert.deepEqual(stored, applyPodPatch(object, decodedPatch(fresh.review.response.patch)));
          assert.deepEqual(memoized.warnings, fresh.warnings);
        }
      }),
      { numRuns: 1000 },
    );
    assert.ok(served > 500, `${served} answers were served from the memo`);
  });

  /** The entry names and annotations the injection adds to Pods of each feature, read from what its patches add (not from the merge's own lists). */
  function reservedNames(sets: readonly TemplateSet[]): { entries: string[]; annotations: string[] } {
    const entries = new Set<string>();
    const annotations = new Set<string>();
    const variants = sets.flatMap((templates) => [false, true].flatMap((tproxy) => [false, true].map((native) => ({ templates, tproxy, native }))));
    for (const { templates, tproxy, native } of variants) {
      const object = featuredPod({ native, capture: undefined, tproxy, probe: true, proxyProtocol: !tproxy, hold: true, token: true, sameNamespace: true, cni: false, sharedMemo: false }, [], []);
      const injected = admitPod({ kind: { group: '', kind: 'Pod' }, operation: 'CREATE', namespace: 'shop', pod: object, namespaceLabels: ENABLED, templates, options: { nativeSidecar: native } });
      const stored = applyPodPatch(object, injected.injection?.patch ?? []);
      for (const list of ENTRY_LISTS) for (const added of namesIn(stored, list)) if (!namesIn(object, list).includes(added)) entries.add(added);
      const own = objectAt(objectAt(object, 'metadata'), 'annotations') ?? {};
      for (const key of Object.keys(objectAt(objectAt(stored, 'metadata'), 'annotations') ?? {})) if (!(key in own)) annotations.add(key);
    }
    // The status says a Pod is injected already: one holding it is skipped, not merged.
    annotations.delete('envoy-injector.io/status');
    return { entries: [...entries].sort(), annotations: [...annotations].sort() };
  }
});

const ENTRY_LISTS = ['containers', 'initContainers', 'ephemeralContainers', 'volumes', 'imagePullSecrets'] as const;

interface Features {
  readonly native: boolean;
  readonly capture: string | undefined;
  readonly tproxy: boolean;
  readonly probe: boolean;
  readonly proxyProtocol: boolean;
  readonly hold: boolean;
  readonly token: boolean;
  readonly sameNamespace: boolean;
  readonly cni: boolean;
  readonly sharedMemo: boolean;
}

/** A Pod with FEATURE's annotations and probe, holding its own entries of NAMES and values of ANNOTATIONS: every list an array, so that Pods differing only in those names share a shape but for them. */
function featuredPod(feature: Features, names: readonly { name: string; as: (typeof ENTRY_LISTS)[number] }[], annotations: readonly string[]): JsonObject {
  const own: JsonObject = {};
  if (feature.capture !== undefined) own['envoy-injector.io/capture'] = feature.capture;
  if (feature.tproxy) own['envoy-injector.io/capture-interception'] = 'tproxy';
  if (feature.proxyProtocol) own['envoy-injector.io/inbound-proxy-protocol'] = '8080';
  if (feature.hold) own['envoy-injector.io/hold-application'] = 'true';
  for (const key of annotations) own[key] = 'the Pod’s own';
  const app: JsonObject = { name: 'app', image: 'app:1', ports: [{ containerPort: 8080 }], ...(feature.probe ? { livenessProbe: { tcpSocket: { port: 8080 } } } : {}) };
  const spec: JsonObject = { containers: [app], initContainers: [], volumes: [{ name: 'cache', emptyDir: {} }], imagePullSecrets: [] };
  for (const { name, as } of names) {
    const entry: JsonObject = as === 'volumes' ? { name, emptyDir: {} } : as === 'imagePullSecrets' ? { name } : { name, image: 'own:1' };
    (spec[as] as JsonValue[]).push(entry);
  }
  if (feature.token) addTokenVolume(spec, 'kube-api-access-x7k2p');
  return { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-', annotations: own }, spec };
}

function namesIn(pod: JsonObject, list: string): string[] {
  return (arrayAt(objectAt(pod, 'spec'), list) ?? []).map((entry) => entryName(entry) ?? '');
}

function decodedPatch(patch: string | undefined): PatchOperation[] {
  return patch === undefined ? [] : (JSON.parse(Buffer.from(patch, 'base64').toString('utf8')) as PatchOperation[]);
}

/** What the API server would refuse in STORED: a name twice (containers across their lists), a mount of no volume. */
function invalidities(stored: JsonObject): string[] {
  const problems: string[] = [];
  const twice = (names: string[], what: string): void => {
    for (const name of new Set(names)) if (names.indexOf(name) !== names.lastIndexOf(name)) problems.push(`${what} "${name}" twice`);
  };
  twice(['containers', 'initContainers', 'ephemeralContainers'].flatMap((list) => namesIn(stored, list)), 'container');
  twice(namesIn(stored, 'volumes'), 'volume');
  const volumes = new Set(namesIn(stored, 'volumes'));
  for (const list of ['containers', 'initContainers']) {
    for (const container of arrayAt(objectAt(stored, 'spec'), list) ?? []) {
      for (const mount of arrayAt(isJsonObject(container) ? container : {}, 'volumeMounts') ?? []) {
        const volume = entryName(mount);
        if (volume !== undefined && !volumes.has(volume)) problems.push(`${entryName(container) ?? ''} mounts "${volume}", no volume of the Pod`);
      }
    }
  }
  return problems;
}
