import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { PatchMemo, reviewAdmission, type AdmissionRequest } from '../src/admission/index.js';
import { admitPod, applyPodPatch, parseTemplateData, processManifests, Reason, utf8Length, type Admission, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { formatExplanation, toExplanation } from '../src/commands/explain.js';
import { only, renderChart } from './helpers/helm.js';

/**
 * The bound on the annotations of the injected Pod (issue 50, docs/design.md
 * §14): the API server refuses a Pod whose annotations' keys and values
 * total more than 256 KiB (apimachinery's ValidateAnnotationsSize sums
 * len(k) + len(v) in bytes), and our patch adds annotations (the status, the
 * per-Pod bootstrap): a valid Pod must never come out over it.
 */

type Obj = Record<string, unknown>;
const LIMIT = 262144;
let templates: TemplateSet;
before(async () => {
  templates = parseTemplateData(only(await renderChart({}), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
});

const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');
/** What ValidateAnnotationsSize counts. */
const annotationsBytes = (pod: Obj): number =>
  Object.entries(((pod['metadata'] as Obj)['annotations'] ?? {}) as Record<string, string>).reduce((sum, [key, value]) => sum + utf8(key) + utf8(value), 0);

function pod(annotations: Record<string, string>, containers: Obj[] = [{ name: 'app', image: 'a:1' }]): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'big', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } }, spec: { containers } } as JsonObject;
}

function admit(received: JsonObject): Admission & { injected: Obj | undefined } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options: { nativeSidecar: true } });
  return { ...admission, injected: admission.injection === undefined ? undefined : (applyPodPatch(received, admission.injection.patch) as Obj) };
}

/** The issue's Pod: 341 PROXY protocol ports (2045 characters, the list's bound is 2048) and 70 containers with 210 tcpSocket probes, captured. */
function issuePod(): JsonObject {
  const ports = Array.from({ length: 341 }, (_, index) => 20000 + index).join(',');
  const containers = Array.from({ length: 70 }, (_, index) => {
    const probe = (offset: number): Obj => ({ tcpSocket: { port: 30000 + 3 * index + offset }, periodSeconds: 10 });
    return { name: `app-${index}`, image: 'a:1', startupProbe: probe(0), readinessProbe: probe(1), livenessProbe: probe(2) };
  });
  return pod({ 'envoy-injector.io/capture': 'true', 'envoy-injector.io/inbound-proxy-protocol': ports }, containers);
}

/** A Pod whose own annotations total BYTES (one filler annotation of ASCII). */
function podOfBytes(bytes: number): JsonObject {
  const base = pod({});
  const own = annotationsBytes(base as Obj) + utf8('example.com/filler');
  return pod({ 'example.com/filler': 'x'.repeat(bytes - own) });
}

describe('the annotations of the injected Pod stay within the API server\'s bound', () => {
  it('the issue\'s Pod (341 PROXY protocol ports, 210 tcpSocket probes) is left uninjected with a reason of its own, not made invalid', () => {
    const received = issuePod();
    assert.ok(annotationsBytes(received as Obj) < LIMIT, 'the Pod as written is valid');
    const { decision, injection, warnings } = admit(received);
    assert.equal(injection, undefined);
    assert.equal(decision.inject, false);
    assert.equal(decision.reason, Reason.annotationsTooLarge);
    assert.equal(decision.rule, 'annotations-size');
    const warning = warnings.find((text) => text.includes('262144'));
    assert.ok(warning !== undefined, `a warning names the limit: ${warnings.join(' | ')}`);
    assert.match(warning, /envoy-injector\.io\/proxy-config/, 'it names the annotation that weighs most');
    assert.equal(decision.trace.at(-1)?.rule, 'annotations-size');
  });

  it('counts the Pod\'s own annotations too: a valid Pod near the bound is injected up to it exactly, and skipped one byte past', () => {
    // What our patch adds to this Pod, measured on a small one of the same shape.
    const small = admit(podOfBytes(1000));
    assert.ok(small.injected !== undefined);
    const added = annotationsBytes(small.injected) - 1000;
    assert.ok(added > 0);
    const fits = admit(podOfBytes(LIMIT - added));
    assert.ok(fits.injected !== undefined, 'exactly at the bound: injected');
    assert.equal(annotationsBytes(fits.injected), LIMIT);
    const over = admit(podOfBytes(LIMIT - added + 1));
    assert.equal(over.injection, undefined, 'one byte past: left as it was');
    assert.equal(over.decision.reason, Reason.annotationsTooLarge);
  });

  it('counts bytes of UTF-8, as the API server does, not characters', () => {
    const small = admit(podOfBytes(1000));
    const added = annotationsBytes(small.injected ?? {}) - 1000;
    // Each "é" is two bytes: as many characters as fit in bytes, but twice the bytes.
    const base = podOfBytes(LIMIT - added);
    const filler = ((base['metadata'] as Obj)['annotations'] as Record<string, string>)['example.com/filler'] ?? '';
    const wide = pod({ 'example.com/filler': 'é'.repeat(Math.ceil(filler.length / 2) + 1) });
    assert.ok(annotationsBytes(wide as Obj) <= LIMIT, 'the Pod as written is valid');
    assert.equal(admit(wide).decision.reason, Reason.annotationsTooLarge);
  });

  it('utf8Length is what Go\'s len() gives of the string the API server decodes (Buffer.byteLength: a lone surrogate is U+FFFD)', () => {
    for (const text of ['', 'a', 'é', '€', '\u{1F600}', '\ud800', 'x\udc00y', 'a\u{1F600}é\ud83d', 'é'.repeat(1000)]) assert.equal(utf8Length(text), Buffer.byteLength(text, 'utf8'), JSON.stringify(text));
  });

  it('through the webhook: a patch the memo holds for the shape is not served to a Pod whose own annotations it would push over', () => {
    const memo = new PatchMemo();
    const review = (object: JsonObject): ReturnType<typeof reviewAdmission> =>
      reviewAdmission({ uid: 'u', kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace: 'shop', object } as AdmissionRequest, {
        templates,
        namespaceLabels: {},
        options: { nativeSidecar: true },
        memo,
      });
    assert.equal(review(podOfBytes(1000)).result, 'injected');
    assert.equal(memo.size, 1);
    const near = review(podOfBytes(LIMIT - 10));
    assert.equal(near.result, 'skipped');
    assert.equal(near.reason, Reason.annotationsTooLarge);
    assert.equal(near.review.response.patch, undefined);
    assert.ok((near.review.response.warnings ?? []).some((text) => text.includes('262144')));
    assert.equal(near.review.response.auditAnnotations?.['reason'], Reason.annotationsTooLarge);
    // And the memo still serves the next small Pod.
    assert.equal(review(podOfBytes(1000)).result, 'injected');
  });

  it('explain says why, and with --mode policy that the policy, which writes no per-Pod bootstrap, injects the issue\'s Pod but not one full of its own', () => {
    const explained = (subject: JsonObject, mode: 'webhook' | 'policy'): string => {
      const { reports } = processManifests(JSON.stringify({ ...subject, metadata: { ...(subject['metadata'] as Obj), namespace: 'shop' } }), { templates, decision: { nativeSidecar: true } });
      const [report] = reports;
      assert.ok(report !== undefined);
      return formatExplanation(toExplanation(report, mode));
    };
    const webhook = explained(issuePod(), 'webhook');
    assert.match(webhook, /NOT INJECTED/);
    assert.match(webhook, /annotations_too_large/);
    assert.match(webhook, /over the API server's limit of 262144/);
    assert.doesNotMatch(webhook, /policy mode injects this Pod/);
    assert.match(explained(issuePod(), 'policy'), /policy mode injects this Pod: it writes no per-Pod bootstrap/);
    assert.doesNotMatch(explained(podOfBytes(LIMIT - 10), 'policy'), /policy mode injects this Pod/);
  });

  it('a Pod whose own annotations are already over the bound is no business of ours: it is refused as written either way', () => {
    const { decision } = admit(podOfBytes(LIMIT + 1));
    assert.equal(decision.reason, Reason.annotationsTooLarge);
  });
});
