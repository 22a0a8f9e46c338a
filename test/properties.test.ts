import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import {
  applyPodPatch,
  decideInjection,
  InjectedLabel,
  injectPod,
  parseTemplateData,
  type JsonObject,
  type JsonValue,
  type SidecarTemplate,
} from '../src/injection/index.js';
import { applyIndependently } from './helpers/patch.js';

/** At least 1,000 generated cases per property (the floor). */
const RUNS = { numRuns: 1000 };
const LISTS = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'] as const;

// A small name pool, so that Pods and templates often collide by name.
const name = fc.constantFrom('envoy', 'app', 'web', 'proxy', 'log', 'data', 'conf', 'a', 'b', 'c');
const reserved = new Set(['containers', 'initContainers', 'volumes', 'imagePullSecrets', 'ephemeralContainers', '__proto__']);
const extraFields = fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }).filter((key) => !reserved.has(key)), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 });
const SAFE_TO_EVICT = 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes';
const annotationKey = fc.oneof(fc.string({ unit: fc.constantFrom('a', 'b', '/', '~', '0', '1', '.', '-'), minLength: 1, maxLength: 10 }), fc.constant(SAFE_TO_EVICT));

const container = fc.record({ name, image: fc.constantFrom('app:1', 'busybox', 'e:1'), extra: extraFields }).map(({ name, image, extra }) => ({ ...extra, name, image }));
const volume = fc.record({ name, source: fc.constantFrom<JsonObject>({ emptyDir: {} }, { configMap: { name: 'cm' } }, { secret: { secretName: 's' } }) }).map(({ name, source }) => ({ name, ...source }));
const pullSecret = name.map((secretName) => ({ name: secretName }));

const uniqueByName = <T extends { name: string }>(entry: fc.Arbitrary<T>, max: number) => fc.uniqueArray(entry, { selector: (e) => e.name, maxLength: max });

/** Valid Pods: unique names per list and across container lists; random unknown fields. */
const pod: fc.Arbitrary<JsonObject> = fc
  .record({
    containers: uniqueByName(container, 4).filter((list) => list.length > 0),
    initContainers: fc.option(uniqueByName(container, 3), { nil: undefined }),
    volumes: fc.option(uniqueByName(volume, 4), { nil: undefined }),
    imagePullSecrets: fc.option(uniqueByName(pullSecret, 2), { nil: undefined }),
    annotations: fc.option(fc.dictionary(annotationKey, fc.string({ maxLength: 5 }), { maxKeys: 4 }), { nil: undefined }),
    named: fc.boolean(),
    specExtra: extraFields,
  })
  .filter(({ containers, initContainers }) => {
    const names = [...containers, ...(initContainers ?? [])].map((c) => c.name);
    return new Set(names).size === names.length;
  })
  .map(({ containers, initContainers, volumes, imagePullSecrets, annotations, named, specExtra }) => {
    const spec: JsonObject = { ...specExtra, containers };
    if (initContainers !== undefined) spec['initContainers'] = initContainers;
    if (volumes !== undefined) spec['volumes'] = volumes;
    if (imagePullSecrets !== undefined) spec['imagePullSecrets'] = imagePullSecrets;
    const metadata: JsonObject = named ? { name: 'p', namespace: 'ns' } : { generateName: 'p-' };
    if (annotations !== undefined) metadata['annotations'] = annotations;
    return { apiVersion: 'v1', kind: 'Pod', metadata, spec };
  });

/** Valid templates, parsed by the real loader from JSON (which is YAML). */
const template: fc.Arbitrary<SidecarTemplate> = fc
  .record({
    containers: uniqueByName(container.map(({ name, image }) => ({ name, image })), 3),
    initContainers: uniqueByName(container.map(({ name, image }) => ({ name, image })), 2),
    volumes: uniqueByName(volume, 3),
    imagePullSecrets: uniqueByName(pullSecret, 2),
  })
  .filter(({ containers, initContainers, volumes, imagePullSecrets }) => {
    const names = [...containers, ...initContainers].map((c) => c.name);
    return new Set(names).size === names.length && names.length + volumes.length + imagePullSecrets.length > 0;
  })
  .map((content) => parseTemplateData({ config: JSON.stringify(content) }).defaultTemplate);

const scenario = fc.record({ pod, template, nativeSidecar: fc.boolean() });

function namesOf(list: JsonValue | undefined): string[] {
  return Array.isArray(list) ? list.map((entry) => (entry as JsonObject)['name'] as string) : [];
}

function withoutMerged(received: JsonObject): JsonObject {
  const copy = structuredClone(received);
  const spec = copy['spec'] as JsonObject;
  for (const list of LISTS) delete spec[list];
  const annotations = (copy['metadata'] as JsonObject)['annotations'] as JsonObject | undefined;
  if (annotations !== undefined) delete annotations['envoy-injector.io/status'];
  // Extended, never replaced: checked in (c) on its own.
  if (annotations !== undefined) delete annotations[SAFE_TO_EVICT];
  if (annotations !== undefined && Object.keys(annotations).length === 0) delete (copy['metadata'] as JsonObject)['annotations'];
  // The injected label is ours; the Pod's own labels are compared whole.
  const labels = (copy['metadata'] as JsonObject)['labels'] as JsonObject | undefined;
  if (labels !== undefined) delete labels[InjectedLabel.key];
  if (labels !== undefined && Object.keys(labels).length === 0) delete (copy['metadata'] as JsonObject)['labels'];
  return copy;
}

/** The injected Pod as `inject` obtains it: the merge's patch applied to the received Pod. */
function injected(pod: JsonObject, template: SidecarTemplate, nativeSidecar: boolean): JsonObject {
  return applyPodPatch(pod, injectPod(pod, template, { nativeSidecar }).patch);
}

describe('properties of injection over generated Pods and templates', () => {
  it('(a) our patch applies under an independent JSON Patch implementation and gives the Pod inject prints, the input untouched', () => {
    fc.assert(
      fc.property(scenario, ({ pod, template, nativeSidecar }) => {
        const received = structuredClone(pod);
        const { patch } = injectPod(pod, template, { nativeSidecar });
        const built = applyPodPatch(pod, patch);
        assert.deepEqual(applyIndependently(pod, patch), built);
        // Both cloned alike: generated maps may have a null prototype, which a strict compare would count.
        assert.deepEqual(structuredClone(pod), received, 'neither the merge nor applying its patch mutates the received Pod');
      }),
      RUNS,
    );
  });

  it('(b) injecting the result again gives an empty patch', () => {
    fc.assert(
      fc.property(scenario, ({ pod, template, nativeSidecar }) => {
        const built = injected(pod, template, nativeSidecar);
        const again = decideInjection({
          operation: 'CREATE',
          kind: { group: '', kind: 'Pod' },
          namespace: 'ns',
          namespaceLabels: { 'envoy-injector.io/inject': 'enabled' },
          pod: built,
          templates: { templates: new Map([[template.name, template]]), defaultTemplate: template },
          options: { nativeSidecar },
        });
        assert.equal(again.inject, false);
        // Even with the status annotation lost, the merge adds no entry twice.
        const remerged = injectPod(built, template, { nativeSidecar });
        assert.deepEqual(remerged.patch.map((op) => op.path), ['/metadata/annotations/envoy-injector.io~1status', '/metadata/labels/envoy-injector.io~1injected'], 'the autoscaler annotation names each volume once');
        assert.equal(((built['metadata'] as JsonObject)['labels'] as JsonObject)[InjectedLabel.key], InjectedLabel.value, 'the injected Pod carries the label the webhooks\' objectSelector skips');
      }),
      RUNS,
    );
  });

  it('(c) every field of the received Pod is still there, unchanged, its entries in their order', () => {
    fc.assert(
      fc.property(scenario, ({ pod, template, nativeSidecar }) => {
        const received = structuredClone(pod);
        const built = injected(pod, template, nativeSidecar);
        assert.deepEqual(withoutMerged(built), withoutMerged(received));
        const receivedAnnotations = ((received['metadata'] as JsonObject)['annotations'] ?? {}) as JsonObject;
        const builtAnnotations = (built['metadata'] as JsonObject)['annotations'] as JsonObject;
        for (const [key, value] of Object.entries(receivedAnnotations)) {
          if (key === SAFE_TO_EVICT) assert.ok(String(builtAnnotations[key]).startsWith(String(value).replace(/[\s,]+$/, '')), 'the Pod\'s own safe-to-evict list is kept, at its head');
          else if (key !== 'envoy-injector.io/status') assert.equal(builtAnnotations[key], value);
        }
        for (const list of LISTS) {
          const before = ((received['spec'] as JsonObject)[list] ?? []) as JsonObject[];
          const after = ((built['spec'] as JsonObject)[list] ?? []) as JsonObject[];
          const kept = after.filter((entry) => before.some((original) => original['name'] === entry['name']));
          assert.deepEqual(kept, before, `spec.${list}: the Pod's own entries, unchanged and in order`);
        }
      }),
      RUNS,
    );
  });

  it('(d) no merged list holds a name twice, and container names are unique across lists', () => {
    fc.assert(
      fc.property(scenario, ({ pod, template, nativeSidecar }) => {
        const spec = injected(pod, template, nativeSidecar)['spec'] as JsonObject;
        for (const list of LISTS) {
          const names = namesOf(spec[list]);
          assert.equal(new Set(names).size, names.length, `duplicate in spec.${list}: ${names.join(',')}`);
        }
        const containerNames = [...namesOf(spec['containers']), ...namesOf(spec['initContainers'])];
        assert.equal(new Set(containerNames).size, containerNames.length);
      }),
      RUNS,
    );
  });
});
