import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventName, eventObject, microTime, newSeries, PendingNotices, seriesPatch, storedEventOf } from '../src/events/event-series.js';
import { controllerOf, NOTE_MAX_BYTES, ownerLookupPath, truncateNote, WORKLOAD_EVENTS, workloadNotices, type ObjectRef, type WorkloadNotice } from '../src/events/workload-notices.js';
import { admitPod, parseTemplateData, BUNDLED_TEMPLATE_DATA, DEFAULT_ALLOWED_OVERRIDES, Reason, type JsonObject } from '../src/injection/index.js';

const templates = parseTemplateData(BUNDLED_TEMPLATE_DATA);
const replicaSet: ObjectRef = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f7', uid: 'rs-uid' };

function pod(annotations: Record<string, string>, owners: JsonObject[] = [{ ...replicaSet, controller: true, blockOwnerDeletion: true }]): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { generateName: 'web-5d8f7-', annotations, ownerReferences: owners }, spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] } };
}

function notices(subject: JsonObject, { dryRun = false, labelsUnknown = false } = {}): WorkloadNotice[] {
  const admission = labelsUnknown
    ? undefined
    : admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, pod: subject, templates, options: { allowedOverrides: DEFAULT_ALLOWED_OVERRIDES } });
  return workloadNotices({ namespace: 'shop', pod: subject, dryRun, admission });
}

describe('which reviews make a workload Event', () => {
  it('an unknown template: one UnknownTemplate notice on the Pod\'s controller, naming the template', () => {
    const [notice, ...rest] = notices(pod({ 'envoy-injector.io/template': 'canary' }));
    assert.deepEqual(rest, []);
    assert.ok(notice !== undefined);
    assert.deepEqual(notice.owner, replicaSet);
    assert.equal(notice.reason, 'UnknownTemplate');
    assert.equal(notice.cause, Reason.unknownTemplate);
    assert.match(notice.note, /no template named "canary"/);
    assert.doesNotMatch(notice.note, /web-5d8f7-/, 'no Pod name in the note: every Pod of the template shares it');
  });

  it('annotations the injection would push over the API server\'s bound: AnnotationsTooLarge, saying how many bytes and what to cut', () => {
    const [notice, ...rest] = notices(pod({ 'example.com/filler': 'x'.repeat(262100) }));
    assert.deepEqual(rest, []);
    assert.equal(notice?.reason, 'AnnotationsTooLarge');
    assert.equal(notice?.cause, Reason.annotationsTooLarge);
    assert.match(notice?.note ?? '', /over the API server's limit of 262144 .*envoy-injector\.io\/inbound-proxy-protocol/);
  });

  it('a copied status and the namespace labels unknown have theirs; an injected Pod or an opt-out has none', () => {
    assert.equal(notices(pod({ 'envoy-injector.io/status': '{"containers":["envoy"]}' }))[0]?.reason, 'StatusAnnotationCopied');
    assert.equal(notices(pod({}), { labelsUnknown: true })[0]?.reason, 'NamespaceLabelsUnknown');
    assert.deepEqual(notices(pod({ 'envoy-injector.io/inject': 'false' }), { labelsUnknown: true }), []);
    assert.deepEqual(notices(pod({})), []);
    assert.deepEqual(notices(pod({ 'envoy-injector.io/inject': 'false' })), []);
    assert.deepEqual(notices(pod({ 'envoy-injector.io/proxy-cpu': '250m' })), [], 'an applied override is no notice');
  });

  it('a Windows Pod that asked: WindowsPod, saying why and how to say it is meant', () => {
    const windows = { ...pod({}), spec: { os: { name: 'windows' }, containers: [{ name: 'web', image: 'mcr.microsoft.com/windows/servercore:ltsc2022' }] } };
    const [notice, ...rest] = notices(windows);
    assert.deepEqual(rest, []);
    assert.equal(notice?.reason, 'WindowsPod');
    assert.equal(notice?.note, 'Pods were created without the envoy-injector sidecar: the Pod runs on Windows (spec.os.name: windows): a Linux proxy cannot run there; annotate the Pod template envoy-injector.io/inject: "false" to say it is meant, or run it on Linux nodes');
  });

  it('a Pod another mesh injected: OtherMeshInjected, naming the mesh and its marks', () => {
    const istio = { ...pod({ 'sidecar.istio.io/status': '{"containers":["istio-proxy"]}' }), spec: { containers: [{ name: 'web', image: 'nginx:1.27' }, { name: 'istio-proxy', image: 'istio/proxyv2:1.24.0' }] } };
    const [notice, ...rest] = notices(istio);
    assert.deepEqual(rest, []);
    assert.equal(notice?.reason, 'OtherMeshInjected');
    assert.equal(notice?.cause, Reason.otherMeshInjected);
    assert.equal(
      notice?.note,
      'Pods were created without the envoy-injector sidecar: the Pod was already injected by Istio (annotation sidecar.istio.io/status, container istio-proxy); a second proxy would fight the first over the traffic: annotate the Pod template envoy-injector.io/inject: "false" to say it is meant, or take its namespace out of one mesh',
    );
  });

  it("a Pod with its own container of the proxy's name: ProxyNameTaken, not an injected Pod", () => {
    const contour = { ...pod({}), spec: { containers: [{ name: 'shutdown-manager', image: 'contour:1' }, { name: 'envoy', image: 'envoyproxy/envoy:v1.31.2' }] } };
    const [notice, ...rest] = notices(contour);
    assert.deepEqual(rest, []);
    assert.equal(notice?.reason, 'ProxyNameTaken');
    assert.match(notice?.note ?? '', /^Pods were created without the envoy-injector sidecar: the Pod already has a container named "envoy" that the injector did not add/);
  });

  it('an ignored override: OverrideIgnored with the warning that says why', () => {
    const found = notices(pod({ 'envoy-injector.io/proxy-image': 'evil/envoy:1', 'envoy-injector.io/proxy-cpu': '250m' }));
    assert.equal(found.length, 1);
    assert.equal(found[0]?.reason, 'OverrideIgnored');
    assert.match(found[0]?.note ?? '', /envoy-injector\.io\/proxy-image: overriding the proxy image is not allowed/);
    assert.doesNotMatch(found[0]?.note ?? '', /proxy-cpu:/);
  });

  it('a dry run, or a Pod without a controller, makes none', () => {
    assert.deepEqual(notices(pod({ 'envoy-injector.io/template': 'canary' }), { dryRun: true }), []);
    assert.deepEqual(notices(pod({ 'envoy-injector.io/template': 'canary' }, [])), []);
    assert.deepEqual(notices(pod({ 'envoy-injector.io/template': 'canary' }, [{ ...replicaSet, controller: false }])), []);
  });

  it('every reason of the mapping is UpperCamelCase within the API server\'s 128 characters', () => {
    for (const [cause, kind] of Object.entries(WORKLOAD_EVENTS)) assert.match(kind?.reason ?? '', /^[A-Z][A-Za-z]{1,127}$/, cause);
  });
});

describe('owner mapping', () => {
  it('the controller reference with its uid; none without controller: true or without a uid', () => {
    assert.deepEqual(controllerOf({ ownerReferences: [{ apiVersion: 'v1', kind: 'X', name: 'a', uid: 'u' }, { ...replicaSet, controller: true }] }), replicaSet);
    assert.equal(controllerOf({ ownerReferences: [{ ...replicaSet, controller: true, uid: '' }] }), undefined);
    assert.equal(controllerOf({ ownerReferences: 'x' }), undefined);
    assert.equal(controllerOf(undefined), undefined);
  });

  it('ReplicaSets and Jobs are read for their owner; StatefulSets, DaemonSets and other kinds are the workload', () => {
    assert.equal(ownerLookupPath('shop', replicaSet), '/apis/apps/v1/namespaces/shop/replicasets/web-5d8f7');
    assert.equal(ownerLookupPath('shop', { apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29', uid: 'j' }), '/apis/batch/v1/namespaces/shop/jobs/nightly-29');
    for (const kind of ['StatefulSet', 'DaemonSet']) assert.equal(ownerLookupPath('shop', { apiVersion: 'apps/v1', kind, name: 'db', uid: 'u' }), undefined, kind);
    assert.equal(ownerLookupPath('shop', { apiVersion: 'example.com/v1', kind: 'ReplicaSet', name: 'x', uid: 'u' }), undefined, 'another group\'s ReplicaSet is not followed');
  });
});

describe('aggregation', () => {
  const notice = (name: string, reason = 'UnknownTemplate', note = 'n'): WorkloadNotice => ({ namespace: 'shop', owner: { ...replicaSet, name, uid: `${name}-uid` }, cause: Reason.unknownTemplate, reason, note });

  it('repeats of one controller, reason and note are one entry with a count; the first and last times kept', () => {
    const queue = new PendingNotices(10);
    for (let second = 0; second < 2_000; second += 1) assert.equal(queue.add(notice('web'), new Date(second * 1000)), true);
    queue.add(notice('web', 'OverrideIgnored'), new Date(0));
    queue.add(notice('web', 'UnknownTemplate', 'other'), new Date(0));
    const [web, ...others] = queue.take();
    assert.equal(web?.count, 2_000);
    assert.equal(web?.firstAt.getTime(), 0);
    assert.equal(web?.lastAt.getTime(), 1_999_000);
    assert.equal(others.length, 2, 'another reason or note is another entry');
    assert.equal(queue.size, 0, 'take empties the queue');
  });

  it('the cap refuses new entries only: repeats of a queued one still count', () => {
    const queue = new PendingNotices(2);
    assert.equal(queue.add(notice('a'), new Date(0)), true);
    assert.equal(queue.add(notice('b'), new Date(0)), true);
    assert.equal(queue.add(notice('c'), new Date(0)), false);
    assert.equal(queue.add(notice('a'), new Date(0)), true);
    assert.deepEqual(queue.take().map((entry) => [entry.notice.owner.name, entry.count]), [['a', 2], ['b', 1]]);
  });

  it('an Event of one occurrence has no series; of more, a series of their count; the patch adds to the stored count', () => {
    const deployment: ObjectRef = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'd-uid' };
    const series = newSeries('shop', deployment, { notice: notice('web'), count: 1, firstAt: new Date(Date.UTC(2026, 11, 2, 0, 0, 0, 5)), lastAt: new Date(Date.UTC(2026, 11, 2, 0, 0, 1)), attempts: 0 });
    series.unwritten = 1;
    const single = eventObject(series, 'envoy-injector-7c9-x');
    assert.equal(single['series'], undefined);
    assert.equal(single['eventTime'], '2026-12-02T00:00:00.005000Z');
    assert.deepEqual(single['regarding'], { ...deployment, namespace: 'shop' });
    assert.equal(single['type'], 'Warning');
    series.unwritten = 7;
    assert.deepEqual(eventObject(series, 'i')['series'], { count: 7, lastObservedTime: '2026-12-02T00:00:01.000000Z' });
    assert.deepEqual(seriesPatch(series, { resourceVersion: '42', count: 3 }), { metadata: { resourceVersion: '42' }, series: { count: 10, lastObservedTime: microTime(series.lastAt) } });
    assert.deepEqual(storedEventOf({ metadata: { resourceVersion: '9' } }), { resourceVersion: '9', count: 1 });
    assert.deepEqual(storedEventOf({ metadata: { resourceVersion: '9' }, series: { count: 4 } }), { resourceVersion: '9', count: 4 });
  });

  it('Event names: the same for the same series on every replica, a DNS subdomain of at most 253 characters', () => {
    const long: ObjectRef = { apiVersion: 'apps/v1', kind: 'Deployment', name: `${'a'.repeat(240)}-b`, uid: 'u' };
    const name = eventName(long, 'UnknownTemplate', 'n');
    assert.ok(name.length <= 253);
    assert.match(name, /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/);
    assert.equal(eventName(long, 'UnknownTemplate', 'n'), name);
    assert.notEqual(eventName(long, 'UnknownTemplate', 'other note'), name);
    assert.notEqual(eventName({ ...long, uid: 'v' }, 'UnknownTemplate', 'n'), name, 'a recreated workload (new uid) has Events of its own');
  });

  it('notes are cut to 1 KiB of UTF-8 without splitting a character', () => {
    const cut = truncateNote('é'.repeat(2_000));
    assert.ok(Buffer.byteLength(cut, 'utf8') <= NOTE_MAX_BYTES);
    assert.ok(cut.endsWith('...') && !cut.includes('\ufffd'));
    assert.equal(truncateNote('short'), 'short');
    const emoji = truncateNote('😀'.repeat(600));
    assert.ok(Buffer.byteLength(emoji, 'utf8') <= NOTE_MAX_BYTES && Buffer.from(emoji, 'utf8').toString('utf8') === emoji);
  });
});

describe('workload Events for the namespace rules (issue 28)', () => {
  const admitIn = (subject: JsonObject, labels: Record<string, string>, annotations?: Record<string, string>) =>
    workloadNotices({
      namespace: 'shop',
      pod: subject,
      dryRun: false,
      admission: admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: labels, namespaceAnnotations: annotations, pod: subject, templates, options: { allowedOverrides: DEFAULT_ALLOWED_OVERRIDES } }),
    });

  it("a namespace's unknown template: an UnknownNamespaceTemplate notice naming it", () => {
    const [notice, ...rest] = admitIn(pod({}), { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'nope' });
    assert.deepEqual(rest, []);
    assert.equal(notice?.reason, 'UnknownNamespaceTemplate');
    assert.equal(notice?.cause, Reason.unknownNamespaceTemplate);
    assert.match(notice?.note ?? '', /labeled envoy-injector\.io\/template=nope/);
  });

  it("the Pod's own invalid override is ignored even when its namespace's default of that name applies; a namespace's own bad default is no workload notice", () => {
    const enabled = { 'envoy-injector.io/inject': 'enabled' };
    const [notice] = admitIn(pod({ 'envoy-injector.io/proxy-cpu': 'lots' }), enabled, { 'envoy-injector.io/proxy-cpu': '200m' });
    assert.equal(notice?.reason, 'OverrideIgnored');
    assert.match(notice?.note ?? '', /envoy-injector\.io\/proxy-cpu: "lots" is not a quantity/);
    assert.deepEqual(admitIn(pod({}), enabled, { 'envoy-injector.io/proxy-cpu': 'lots' }), []);
  });
});
