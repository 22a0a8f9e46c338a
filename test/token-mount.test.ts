import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PatchMemo, reviewAdmission, type AdmissionRequest, type ReviewContext } from '../src/admission/index.js';
import {
  admitPod,
  applyPodPatch,
  parseTemplateData,
  SERVICE_ACCOUNT_TOKEN_PATH,
  serviceAccountTokenVolume,
  type JsonObject,
  type TemplateSet,
} from '../src/injection/index.js';
import { repoFile, seedTemplates } from './helpers/fixtures.js';
import { applyIndependently } from './helpers/patch.js';

/**
 * What kube-apiserver's ServiceAccount admission plugin adds in its rerun
 * after our patch (plugin/pkg/admission/serviceaccount, mountServiceAccountToken,
 * with automount on): the first kube-api-access-* volume's mount to every
 * container and init container without a mount at the path. Written from its
 * source, for these tests only.
 */
function pluginRerunAdds(pod: JsonObject): string[] {
  const spec = pod['spec'] as JsonObject;
  const volume = ((spec['volumes'] ?? []) as JsonObject[]).find((entry) => String(entry['name']).startsWith('kube-api-access-'));
  const added: string[] = [];
  for (const list of ['initContainers', 'containers']) {
    for (const container of (spec[list] ?? []) as JsonObject[]) {
      const mounts = (container['volumeMounts'] ?? []) as JsonObject[];
      if (!mounts.some((mount) => mount['mountPath'] === SERVICE_ACCOUNT_TOKEN_PATH)) added.push(`${list}/${String(container['name'])} (${String(volume?.['name'])})`);
    }
  }
  return added;
}

const POD_CREATE = { kind: { group: '', kind: 'Pod' }, operation: 'CREATE' } as const;
const seedRequest = (): AdmissionRequest => (JSON.parse(repoFile('examples/admission-review.json')) as { request: AdmissionRequest }).request;
const seedObject = (): JsonObject => seedRequest().object as JsonObject;

function withVolumeName(pod: JsonObject, name: string): JsonObject {
  return JSON.parse(JSON.stringify(pod).replaceAll('kube-api-access-7xk2p', JSON.stringify(name).slice(1, -1))) as JsonObject;
}

function review(object: JsonObject, context: Partial<ReviewContext> = {}, templates: TemplateSet = seedTemplates()) {
  const request = { ...seedRequest(), object };
  return reviewAdmission(request, { templates, namespaceLabels: {}, options: { nativeSidecar: false, injectorNamespace: 'envoy-injector' }, ...context });
}

function patchOf(outcome: ReturnType<typeof review>): JsonObject[] {
  return JSON.parse(Buffer.from(outcome.review.response.patch ?? '', 'base64').toString('utf8')) as JsonObject[];
}

const CAPTURE_TEMPLATES = parseTemplateData({
  config: [
    'containers: [{name: envoy, image: "envoy:1", securityContext: {runAsUser: 101}, volumeMounts: [{name: envoy-conf, mountPath: /etc/envoy}]}]',
    'initContainers: [{name: setup, image: "setup:1"}]',
    'volumes: [{name: envoy-conf, emptyDir: {}}]',
    'capture: {image: "init:1", outboundPort: 15001, inboundPort: 15006, enabled: true}',
  ].join('\n'),
  own: `containers: [{name: envoy, image: "envoy:1", volumeMounts: [{name: mine, mountPath: ${SERVICE_ACCOUNT_TOKEN_PATH}}]}]\nvolumes: [{name: mine, emptyDir: {}}]`,
});

describe('the ServiceAccount token mount of the added containers', () => {
  it('the seed Pod: the API server\'s rerun of the ServiceAccount plugin finds nothing left to add', () => {
    const pod = seedObject();
    assert.deepEqual(pluginRerunAdds(applyPodPatch(pod, admitWithoutMount(pod))), ['containers/envoy (kube-api-access-7xk2p)'], 'without the mount, the rerun changes the Pod');
    const injected = applyIndependently(pod, patchOf(review(pod)));
    assert.deepEqual(pluginRerunAdds(injected), []);
    const envoy = ((injected['spec'] as JsonObject)['containers'] as JsonObject[])[1];
    assert.deepEqual((envoy?.['volumeMounts'] as JsonObject[]).at(-1), { name: 'kube-api-access-7xk2p', readOnly: true, mountPath: SERVICE_ACCOUNT_TOKEN_PATH });
  });

  it('every container added gets it: native sidecar, capture and template init containers; one with its own mount at the path keeps its own', () => {
    for (const nativeSidecar of [false, true]) {
      const pod = seedObject();
      const outcome = review(pod, { options: { nativeSidecar, injectorNamespace: 'envoy-injector' } }, CAPTURE_TEMPLATES);
      assert.equal(outcome.result, 'injected');
      assert.equal(outcome.capture?.capture, true);
      const injected = applyIndependently(pod, patchOf(outcome));
      assert.deepEqual(pluginRerunAdds(injected), [], `nativeSidecar ${nativeSidecar}`);
      const spec = injected['spec'] as JsonObject;
      const initNames = ((spec['initContainers'] ?? []) as JsonObject[]).map((container) => container['name']);
      assert.deepEqual(initNames, nativeSidecar ? ['envoy-init', 'envoy', 'setup'] : ['setup', 'envoy-init']);
    }
    const pod = seedObject();
    (pod['metadata'] as JsonObject)['annotations'] = { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': 'own' };
    const injected = applyIndependently(pod, patchOf(review(pod, {}, CAPTURE_TEMPLATES)));
    const envoy = ((injected['spec'] as JsonObject)['containers'] as JsonObject[])[1];
    assert.deepEqual(envoy?.['volumeMounts'], [{ name: 'mine', mountPath: SERVICE_ACCOUNT_TOKEN_PATH }]);
  });

  it('not added when the plugin would not add it: automount off (Pod or ServiceAccount), a mirror Pod, no kube-api-access volume', () => {
    const cases: [string, (pod: JsonObject) => void][] = [
      ['automountServiceAccountToken: false', (pod) => void ((pod['spec'] as JsonObject)['automountServiceAccountToken'] = false)],
      ['the ServiceAccount\'s automount off: the app container has no mount at the path', (pod) => void (((pod['spec'] as JsonObject)['containers'] as JsonObject[])[0]!['volumeMounts'] = [])],
      ['a mirror Pod', (pod) => void (((pod['metadata'] as JsonObject)['annotations'] as JsonObject)['kubernetes.io/config.mirror'] = 'x')],
      ['no kube-api-access volume', (pod) => void ((pod['spec'] as JsonObject)['volumes'] = [{ name: 'token', emptyDir: {} }])],
      ['a volume of that name the app does not mount there', (pod) => void (((pod['spec'] as JsonObject)['containers'] as JsonObject[])[0]!['volumeMounts'] = [{ name: 'other', mountPath: SERVICE_ACCOUNT_TOKEN_PATH }])],
    ];
    for (const [what, change] of cases) {
      const pod = seedObject();
      change(pod);
      assert.equal(serviceAccountTokenVolume(pod), undefined, what);
      const injected = applyIndependently(pod, patchOf(review(pod)));
      const envoy = ((injected['spec'] as JsonObject)['containers'] as JsonObject[]).find((container) => container['name'] === 'envoy');
      assert.ok(!JSON.stringify(envoy).includes(SERVICE_ACCOUNT_TOKEN_PATH), what);
    }
  });

  it('the patch memo keeps one answer for Pods that differ only by the volume\'s random suffix, each patched with its own name', () => {
    const memo = new PatchMemo();
    const names = ['kube-api-access-abcde', 'kube-api-access-x9z8w', 'kube-api-access-q', 'kube-api-access-"é\\'];
    for (const name of names) {
      const pod = withVolumeName(seedObject(), name);
      const memoized = review(structuredClone(pod), { memo });
      const computed = review(structuredClone(pod));
      assert.equal(memoized.review.response.patch, computed.review.response.patch, name);
      const envoy = ((applyIndependently(pod, patchOf(memoized))['spec'] as JsonObject)['containers'] as JsonObject[])[1];
      assert.deepEqual((envoy?.['volumeMounts'] as JsonObject[]).at(-1), { name, readOnly: true, mountPath: SERVICE_ACCOUNT_TOKEN_PATH });
    }
    assert.equal(memo.size, 1);
  });

  it('`inject` (admitPod) names the Pod\'s own volume, as the webhook does', () => {
    const pod = seedObject();
    const admission = admitPod({ ...POD_CREATE, pod, namespace: 'default', namespaceLabels: {}, templates: seedTemplates(), options: { nativeSidecar: false, injectorNamespace: 'envoy-injector' } });
    const injected = applyPodPatch(pod, admission.injection?.patch ?? []);
    assert.deepEqual(injected, applyIndependently(pod, patchOf(review(pod))));
  });
});

/** The patch as it was before the token mount: the merge without it. */
function admitWithoutMount(pod: JsonObject) {
  const stripped = structuredClone(pod);
  (stripped['spec'] as JsonObject)['automountServiceAccountToken'] = false;
  const admission = admitPod({ ...POD_CREATE, pod: stripped, namespace: 'default', namespaceLabels: {}, templates: seedTemplates(), options: { nativeSidecar: false, injectorNamespace: 'envoy-injector' } });
  return admission.injection?.patch ?? [];
}
