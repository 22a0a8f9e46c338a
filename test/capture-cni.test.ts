import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { admitPod, applyPodPatch, parseTemplateData, parseTemplateFile, restoreInitOrder, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { PatchMemo, reviewAdmission, type AdmissionRequest } from '../src/admission/index.js';
import { TemplateError } from '../src/errors.js';
import { CNI_TEMPLATE_RULE_ARGS, ROOT } from './helpers/fixtures.js';

/**
 * CNI mode (docs/design.md §11): the Pod carries no privileged container but
 * the unprivileged check; `auto` turns to it where Pod Security forbids
 * envoy-init; the status says the mode. What the API server's Pod Security
 * admission makes of it is test/e2e/capture-cni.test.ts.
 */

const templates: TemplateSet = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));
type Obj = Record<string, unknown>;
const RESTRICTED = { 'pod-security.kubernetes.io/enforce': 'restricted' };

function pod(template: string, spec: Obj = {}): JsonObject {
  const annotations = { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': template, 'envoy-injector.io/capture': 'true' };
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', annotations }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec } } as JsonObject;
}

function admit(received: JsonObject, namespaceLabels: Record<string, string> = {}, native = false) {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels, pod: received, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  const injected = applyPodPatch(received, admission.injection.patch) as Obj;
  const spec = injected['spec'] as Obj;
  const inits = (spec['initContainers'] as Obj[] | undefined) ?? [];
  const status = JSON.parse(String(((injected['metadata'] as Obj)['annotations'] as Obj)['envoy-injector.io/status'])) as Obj;
  return { ...admission, injected, spec, inits, names: inits.map((init) => init['name']), status };
}

describe('capture in CNI mode: what the Pod gets', () => {
  it('the check container alone, unprivileged, with the rule script\'s arguments; no envoy-init, no lock volume; the status says cni', () => {
    const { capture, inits, spec, status, warnings } = admit(pod('cni'));
    assert.equal(capture?.capture === true && capture.mode, 'cni');
    assert.deepEqual(warnings, []);
    assert.deepEqual(inits, [
      {
        name: 'envoy-capture-check',
        image: 'envoy-injector:0.1.0',
        command: ['/nodejs/bin/node', '/app/bin/envoy-injector.js', 'check-capture'],
        args: CNI_TEMPLATE_RULE_ARGS,
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
        securityContext: {
          runAsNonRoot: true,
          runAsUser: 65532,
          runAsGroup: 65532,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        },
      },
    ]);
    assert.equal(spec['volumes'], undefined);
    assert.equal(status['captureMode'], 'cni');
    assert.deepEqual(status['initContainers'], ['envoy-capture-check']);
  });

  it('a namespace enforcing restricted does not stop it: CNI mode needs no capability', () => {
    const { capture, names } = admit(pod('cni'), RESTRICTED);
    assert.equal(capture?.capture, true);
    assert.deepEqual(names, ['envoy-capture-check']);
  });

  it('the check goes where envoy-init would: last with classic sidecars, first before the proxy with native ones, and stays there', () => {
    const withInit = pod('cni', { initContainers: [{ name: 'migrate', image: 'migrate:3' }] });
    assert.deepEqual(admit(withInit).names, ['migrate', 'envoy-capture-check']);
    assert.deepEqual(admit(withInit, {}, true).names, ['envoy-capture-check', 'envoy', 'migrate']);
    // Another webhook appended an init container after ours: the check is put last again.
    const { injected } = admit(withInit);
    const spec = injected['spec'] as Obj;
    const later = { ...injected, spec: { ...spec, initContainers: [...(spec['initContainers'] as Obj[]), { name: 'vault', image: 'vault:1' }] } } as JsonObject;
    const reordered = applyPodPatch(later, restoreInitOrder(later)) as Obj;
    assert.deepEqual(((reordered['spec'] as Obj)['initContainers'] as Obj[]).map((init) => init['name']), ['migrate', 'vault', 'envoy-capture-check']);
  });

  it('never runs as the proxy\'s uid, which the rules let through: 65533 when the proxy is 65532', () => {
    const { inits } = admit(pod('auto'), RESTRICTED);
    assert.deepEqual(inits.map((init) => (init['securityContext'] as Obj)['runAsUser']), [65533]);
  });

  it('a hostNetwork Pod is never captured, in CNI mode either', () => {
    const { capture, inits } = admit(pod('cni', { hostNetwork: true }));
    assert.equal(capture?.reason, 'host_network');
    assert.deepEqual(inits, []);
  });
});

describe('capture mode auto: envoy-init, except where Pod Security forbids it', () => {
  it('envoy-init with its volume where allowed; the check where baseline or restricted is enforced, and the message says why', () => {
    for (const labels of [{}, { 'pod-security.kubernetes.io/enforce': 'privileged' }]) {
      const { capture, names, status } = admit(pod('auto'), labels);
      assert.equal(capture?.capture === true && capture.mode, 'initContainer');
      assert.deepEqual(names, ['envoy-init']);
      assert.equal(status['captureMode'], undefined);
    }
    for (const level of ['baseline', 'restricted']) {
      const { capture, names, status, spec } = admit(pod('auto'), { 'pod-security.kubernetes.io/enforce': level });
      assert.ok(capture?.capture === true);
      assert.equal(capture.mode, 'cni');
      assert.equal(capture.message, `the Pod is annotated envoy-injector.io/capture: "true"; in CNI mode: namespace "shop" enforces Pod Security "${level}" (pod-security.kubernetes.io/enforce), which forbids the NET_ADMIN capability envoy-init needs`);
      assert.deepEqual(names, ['envoy-capture-check']);
      assert.equal(spec['volumes'], undefined);
      assert.equal(status['captureMode'], 'cni');
    }
  });

  it('the webhook\'s patch memo tells the two apart: the same Pod in a restricted namespace after a privileged one gets the check', () => {
    const memo = new PatchMemo();
    const review = (labels: Record<string, string>, uid: string): string => {
      const request = { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace: 'shop', object: pod('auto') } as unknown as AdmissionRequest;
      const outcome = reviewAdmission(request, { templates, namespaceLabels: labels, namespaceAnnotations: undefined, options: { nativeSidecar: false }, memo });
      return Buffer.from(String(outcome.review.response.patch), 'base64').toString('utf8');
    };
    assert.match(review({}, 'a'), /"name":"envoy-init"/);
    const restricted = review(RESTRICTED, 'b');
    assert.match(restricted, /"name":"envoy-capture-check"/);
    assert.doesNotMatch(restricted, /"name":"envoy-init"/);
  });
});

describe('capture mode in the template', () => {
  const template = (capture: string): string => `containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.39.6\ncapture:\n  image: envoy-injector-init:0.1.0\n  proxyUid: 1337\n  outboundPort: 15001\n  inboundPort: 15006\n${capture}`;
  const problems = (capture: string): string[] => {
    try {
      parseTemplateData({ config: template(capture) });
      return [];
    } catch (error) {
      if (error instanceof TemplateError) return [...error.problems];
      throw error;
    }
  };

  it('mode is initContainer, cni or auto; cni and auto need the check image', () => {
    assert.deepEqual(problems(''), []);
    assert.deepEqual(problems('  mode: initContainer\n'), []);
    assert.deepEqual(problems('  mode: cni\n  checkImage: envoy-injector:0.1.0\n'), []);
    assert.deepEqual(problems('  mode: sidecar\n'), ['config: capture.mode: "sidecar" is not one of initContainer, cni, auto']);
    assert.deepEqual(problems('  mode: auto\n'), ["config: capture.checkImage: required when mode is auto (the image of envoy-capture-check: the injector's own)"]);
    assert.deepEqual(problems('  mode: cni\n  checkImage: ""\n'), ['config: capture.checkImage: must be an image name']);
    // The check's name is taken in CNI mode (the template's own would take its place), not in initContainer mode.
    const withCheck = (mode: string): string[] => {
      try {
        parseTemplateData({ config: `initContainers:\n  - name: envoy-capture-check\n    image: mine:1\n${template(`  mode: ${mode}\n  checkImage: envoy-injector:0.1.0\n`)}` });
        return [];
      } catch (error) {
        if (error instanceof TemplateError) return [...error.problems];
        throw error;
      }
    };
    assert.deepEqual(withCheck('cni'), ['config: initContainers: "envoy-capture-check" is the name traffic capture adds; rename it, or remove the capture section']);
    assert.deepEqual(withCheck('initContainer'), []);
  });
});
