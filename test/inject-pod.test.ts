import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { applyPodPatch, escapePointerToken, injectPod, jsonPointer, parseTemplateData, type JsonObject } from '../src/injection/index.js';
import { PatchError } from '../src/errors.js';
import { controllerPod, seedPod, seedTemplates } from './helpers/fixtures.js';
import { applyIndependently } from './helpers/patch.js';

const seed = seedTemplates().defaultTemplate;

/**
 * Injects and applies the patch as `inject` does, checking that rfc6902 (an
 * independent implementation) gives the same Pod and that the input is never mutated.
 */
function injectChecked(pod: JsonObject, nativeSidecar = false, template = seed) {
  const before = structuredClone(pod);
  const result = injectPod(pod, template, { nativeSidecar });
  const built = applyPodPatch(pod, result.patch);
  assert.deepEqual(pod, before, 'the received Pod is never mutated');
  assert.deepEqual(applyIndependently(pod, result.patch), built, 'rfc6902 and fast-json-patch agree on the injected Pod');
  return { ...result, pod: built };
}

describe('JSON Pointer escaping (RFC 6901)', () => {
  it('escapes ~ before /', () => {
    assert.equal(escapePointerToken('a~1/b'), 'a~01~1b');
    assert.equal(jsonPointer('metadata', 'annotations', 'example.com/x~y'), '/metadata/annotations/example.com~1x~0y');
  });
});

describe('the merge and its patch (docs/design.md §5)', () => {
  it('adds the envoy container and envoy-conf volume to the seed Pod, app container untouched', () => {
    const pod = seedPod();
    const { pod: built, status } = injectChecked(pod);
    const spec = built['spec'] as JsonObject;
    assert.deepEqual((spec['containers'] as JsonObject[]).map((c) => c['name']), ['myapp-container', 'envoy']);
    assert.deepEqual((spec['containers'] as JsonObject[])[0], ((pod['spec'] as JsonObject)['containers'] as JsonObject[])[0]);
    assert.deepEqual(spec['volumes'], [{ name: 'envoy-conf', configMap: { name: 'envoy' } }]);
    assert.deepEqual(status, { template: 'config', hash: seed.hash, hashWithoutResources: seed.hashWithoutResources, containers: ['envoy'], initContainers: [], volumes: ['envoy-conf'], imagePullSecrets: [] });
    const annotations = (built['metadata'] as JsonObject)['annotations'] as JsonObject;
    assert.deepEqual(JSON.parse(annotations['envoy-injector.io/status'] as string), status);
  });

  it('classic bug: `add /spec/volumes/-` on a missing list. A missing list is added whole', () => {
    const { patch } = injectChecked(seedPod());
    assert.deepEqual(patch.find((op) => op.path.startsWith('/spec/volumes')), {
      op: 'add',
      path: '/spec/volumes',
      value: [{ name: 'envoy-conf', configMap: { name: 'envoy' } }],
    });
  });

  it('an existing list only gets adds for its new entries, never a replace', () => {
    const pod = seedPod();
    (pod['spec'] as JsonObject)['volumes'] = [{ name: 'data', emptyDir: {} }];
    const { patch, pod: built } = injectChecked(pod);
    assert.deepEqual(patch.filter((op) => op.path.startsWith('/spec/volumes')).map((op) => op.path), ['/spec/volumes/-']);
    assert.deepEqual(((built['spec'] as JsonObject)['volumes'] as JsonObject[]).map((v) => v['name']), ['data', 'envoy-conf']);
  });

  it('classic bug: `add /metadata/annotations` wiping existing annotations. Only the new key is added', () => {
    const pod = seedPod();
    (pod['metadata'] as JsonObject)['annotations'] = { 'team.example.com/owner': 'payments', note: 'keep me' };
    const { patch, pod: built } = injectChecked(pod);
    const annotationOps = patch.filter((op) => op.path.startsWith('/metadata/annotations'));
    assert.deepEqual(annotationOps.map((op) => op.path), ['/metadata/annotations/envoy-injector.io~1status']);
    const annotations = (built['metadata'] as JsonObject)['annotations'] as JsonObject;
    assert.equal(annotations['team.example.com/owner'], 'payments');
    assert.equal(annotations['note'], 'keep me');
  });

  it('labels the Pod envoy-injector.io/injected (what the webhooks\' objectSelector skips), adding to its labels, never replacing them', () => {
    const labeled = seedPod();
    (labeled['metadata'] as JsonObject)['labels'] = { app: 'web', 'pod-template-hash': '5d8f' };
    const { patch, pod: built } = injectChecked(labeled);
    assert.deepEqual(patch.filter((op) => op.path.startsWith('/metadata/labels')), [{ op: 'add', path: '/metadata/labels/envoy-injector.io~1injected', value: 'true' }]);
    assert.deepEqual((built['metadata'] as JsonObject)['labels'], { app: 'web', 'pod-template-hash': '5d8f', 'envoy-injector.io/injected': 'true' });
    const unlabeled = seedPod();
    delete (unlabeled['metadata'] as JsonObject)['labels'];
    assert.deepEqual(injectChecked(unlabeled).patch.filter((op) => op.path.startsWith('/metadata/labels')), [{ op: 'add', path: '/metadata/labels', value: { 'envoy-injector.io/injected': 'true' } }]);
    const bare = injectChecked({ apiVersion: 'v1', kind: 'Pod', spec: { containers: [{ name: 'app', image: 'app:1' }] } });
    assert.deepEqual(bare.patch.filter((op) => op.path.startsWith('/metadata')).map((op) => op.path), ['/metadata'], 'a Pod without metadata: one add of both maps');
    assert.deepEqual(((bare.pod['metadata'] as JsonObject)['labels'] as JsonObject), { 'envoy-injector.io/injected': 'true' });
  });

  it('classic bug: `~` and `/` in annotation keys. Keys are escaped, others stay intact', () => {
    const pod = seedPod();
    const annotations = { 'a~b/c': '1', '~0~1': '2', 'example.com/~': '3' };
    (pod['metadata'] as JsonObject)['annotations'] = { ...annotations };
    const { pod: built } = injectChecked(pod);
    const after = (built['metadata'] as JsonObject)['annotations'] as JsonObject;
    for (const [key, value] of Object.entries(annotations)) assert.equal(after[key], value);
  });

  it('classic bug: a Pod with only generateName and no metadata.namespace', () => {
    const pod = controllerPod();
    const { pod: built, patch } = injectChecked(pod);
    assert.equal((built['metadata'] as JsonObject)['generateName'], 'web-7d4b9c-');
    assert.equal((built['metadata'] as JsonObject)['namespace'], undefined, 'no namespace is invented');
    assert.deepEqual(patch.find((op) => op.path.startsWith('/metadata')), {
      op: 'add',
      path: '/metadata/annotations',
      value: { 'envoy-injector.io/status': JSON.stringify({ template: 'config', hash: seed.hash, hashWithoutResources: seed.hashWithoutResources, containers: ['envoy'], initContainers: [], volumes: ['envoy-conf'], imagePullSecrets: [] }) },
    });
  });

  it("a container the Pod already has by name is left out: the Pod's own wins, with a warning", () => {
    const pod = seedPod();
    const own = { name: 'envoy', image: 'my/envoy:custom' };
    (pod['spec'] as JsonObject)['containers'] = [...((pod['spec'] as JsonObject)['containers'] as JsonObject[]), own];
    const { pod: built, kept, warnings, status } = injectChecked(pod);
    const containers = (built['spec'] as JsonObject)['containers'] as JsonObject[];
    assert.deepEqual(containers.filter((c) => c['name'] === 'envoy'), [own]);
    assert.deepEqual(kept, [{ list: 'containers', name: 'envoy' }]);
    assert.deepEqual(warnings, ['containers "envoy" from template "config" is already in the Pod; kept the Pod\'s own']);
    assert.deepEqual(status.containers, []);
    assert.deepEqual(status.volumes, ['envoy-conf']);
  });

  it('a sidecar name taken by an init container is not added twice (names are unique across lists)', () => {
    const pod = seedPod();
    (pod['spec'] as JsonObject)['initContainers'] = [{ name: 'envoy', image: 'x' }];
    const { pod: built } = injectChecked(pod);
    assert.deepEqual(((built['spec'] as JsonObject)['containers'] as JsonObject[]).map((c) => c['name']), ['myapp-container']);
  });

  it('fields no type of ours names survive byte for byte', () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'future', managedFields: [{ manager: 'kubectl', operation: 'Update', fieldsV1: { 'f:spec': {} } }] },
      spec: {
        hostUsers: false,
        futureField: { nested: [1, 'two', { three: null }] },
        resourceClaims: [{ name: 'gpu', resourceClaimTemplateName: 'gpu-template' }],
        initContainers: [{ name: 'log-shipper', image: 'fluent-bit', restartPolicy: 'Always' }],
        containers: [
          {
            name: 'app',
            image: 'app:1',
            resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }],
            resources: { claims: [{ name: 'gpu' }] },
          },
        ],
      },
      status: { phase: 'Pending' },
    } as JsonObject;
    const received = JSON.stringify(pod);
    const { pod: built } = injectChecked(pod);
    const expected = JSON.parse(received) as JsonObject;
    const builtSpec = built['spec'] as JsonObject;
    const expectedSpec = expected['spec'] as JsonObject;
    for (const key of ['hostUsers', 'futureField', 'resourceClaims', 'initContainers']) {
      assert.equal(JSON.stringify(builtSpec[key]), JSON.stringify(expectedSpec[key]), `spec.${key} unchanged`);
    }
    assert.equal(JSON.stringify((builtSpec['containers'] as JsonObject[])[0]), JSON.stringify((expectedSpec['containers'] as JsonObject[])[0]));
    assert.equal(JSON.stringify((built['metadata'] as JsonObject)['managedFields']), JSON.stringify((expected['metadata'] as JsonObject)['managedFields']));
    assert.equal(JSON.stringify(built['status']), JSON.stringify(expected['status']));
  });

  it('a Pod without spec gets one whole `add /spec`', () => {
    const { patch, pod: built } = injectChecked({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bare' } });
    assert.deepEqual(patch.map((op) => op.path), ['/spec', '/metadata/annotations', '/metadata/labels']);
    assert.deepEqual(Object.keys(built['spec'] as JsonObject), ['containers', 'volumes']);
  });

  it('null lists are replaced by an add of the whole list', () => {
    const pod = seedPod();
    (pod['spec'] as JsonObject)['volumes'] = null;
    const { patch } = injectChecked(pod);
    assert.ok(patch.some((op) => op.path === '/spec/volumes'));
  });

  it('shares the template\'s frozen entries instead of copying them, so no Pod can change the template', () => {
    const { pod: built } = injectChecked(seedPod());
    const envoy = ((built['spec'] as JsonObject)['containers'] as JsonObject[])[1] as JsonObject;
    assert.equal(envoy, seed.containers[0], 'the same object: no copy per request');
    assert.ok(Object.isFrozen(envoy) && Object.isFrozen(envoy['resources']));
    assert.throws(() => {
      'use strict';
      envoy['image'] = 'changed';
    }, TypeError);
    assert.equal(seed.containers[0]?.['image'], 'lyft/envoy:845747db88f102c0fd262ab234308e9e22f693a1');
  });
});

describe('native sidecars (Kubernetes 1.29+)', () => {
  it('puts sidecars first in initContainers with restartPolicy Always, before the app init containers', () => {
    const pod = seedPod();
    (pod['spec'] as JsonObject)['initContainers'] = [{ name: 'migrate', image: 'app:1' }];
    const { pod: built, patch, status } = injectChecked(pod, true);
    const spec = built['spec'] as JsonObject;
    assert.deepEqual((spec['initContainers'] as JsonObject[]).map((c) => [c['name'], c['restartPolicy']]), [['envoy', 'Always'], ['migrate', undefined]]);
    assert.deepEqual((spec['containers'] as JsonObject[]).map((c) => c['name']), ['myapp-container']);
    assert.ok(patch.some((op) => op.path === '/spec/initContainers/0'));
    assert.deepEqual(status.initContainers, ['envoy']);
    assert.deepEqual(status.containers, []);
  });

  it("a Job's Pod completes when its app does: no sidecar among containers, the sidecar restartable", () => {
    const jobPod = controllerPod({ spec: { restartPolicy: 'Never', containers: [{ name: 'batch', image: 'batch:1' }] } });
    const { pod: built } = injectChecked(jobPod, true);
    const spec = built['spec'] as JsonObject;
    // Kubernetes ends a Pod when every regular container has terminated; init
    // containers with restartPolicy Always are stopped then, not waited for.
    assert.deepEqual((spec['containers'] as JsonObject[]).map((c) => c['name']), ['batch']);
    assert.ok((spec['initContainers'] as JsonObject[]).every((c) => c['restartPolicy'] === 'Always'));
    assert.equal(spec['restartPolicy'], 'Never');
  });

  it('keeps a startupProbe the template gives (it orders app start after the proxy)', () => {
    const set = parseTemplateData({
      config: 'containers: [{name: envoy, image: "e:1", startupProbe: {httpGet: {path: /ready, port: 9901}}}]',
    });
    const { pod: built } = injectChecked(seedPod(), true, set.defaultTemplate);
    const init = ((built['spec'] as JsonObject)['initContainers'] as JsonObject[])[0];
    assert.deepEqual(init?.['startupProbe'], { httpGet: { path: '/ready', port: 9901 } });
  });

  it("template initContainers go after the app's own", () => {
    const set = parseTemplateData({ config: 'initContainers: [{name: setup, image: "s:1"}]\ncontainers: [{name: envoy, image: "e:1"}]' });
    const pod = seedPod();
    (pod['spec'] as JsonObject)['initContainers'] = [{ name: 'migrate', image: 'app:1' }];
    const result = injectChecked(pod, true, set.defaultTemplate);
    assert.deepEqual((((result.pod['spec'] as JsonObject)['initContainers']) as JsonObject[]).map((c) => c['name']), ['envoy', 'migrate', 'setup']);
  });
});

describe('applying the patch (what inject and explain print)', () => {
  it('refuses a patch that does not apply, with a stable code, naming the operation, the Pod untouched', () => {
    const pod = seedPod();
    const before = structuredClone(pod);
    const patch = [
      { op: 'add', path: '/metadata/labels/app', value: 'x' },
      { op: 'add', path: '/spec/containers/5', value: { name: 'late' } },
    ] as const;
    assert.throws(
      () => applyPodPatch(pod, patch),
      (error: unknown) =>
        error instanceof PatchError &&
        error.code === 'EI_PATCH_REJECTED' &&
        error.message.includes('operation 1 (add /spec/containers/5)') &&
        !error.message.includes('myapp-container'),
    );
    assert.deepEqual(pod, before);
  });
});
