import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildFleetReport, describeKind, namespaceTemplates, ownerKey, readInjectionStatus, resolveWorkload, type OwnerRef, type PodRecord } from '../src/fleet/fleet-report.js';
import { NotRestartedWhy, planRestarts, restartCandidates } from '../src/fleet/restart-plan.js';
import { parseTemplateData } from '../src/injection/index.js';
import { formatReport } from '../src/commands/status-format.js';
import { injectedAnnotations } from './helpers/fleet-fixture.js';

const OLD = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:1"}]', lite: 'containers: [{name: tiny, image: "tiny:1"}]' });
const OLDER = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:0"}]' });
const LIVE = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:2"}]', lite: 'containers: [{name: tiny, image: "tiny:1"}]' });

/** The status annotation exactly as the webhook writes it, from the injector's own code. */
const injectedWith = injectedAnnotations;

/** A Pod as it runs: with the sidecars of both templates when it carries our status (the webhook writes both in one patch), else the app alone. */
function pod(name: string, options: Partial<PodRecord> = {}): PodRecord {
  const injected = options.annotations?.['envoy-injector.io/status'] !== undefined;
  return { namespace: 'shop', name, owner: undefined, annotations: {}, labels: {}, containers: injected ? ['app', 'envoy', 'tiny'] : ['app'], hostNetwork: false, ...options };
}

const LABELS: Record<string, Record<string, string>> = {
  shop: { 'envoy-injector.io/inject': 'enabled' },
  quiet: { 'envoy-injector.io/inject': 'disabled' },
  plain: {},
  'envoy-injector-system': { 'envoy-injector.io/inject': 'enabled' },
};

/** The restart plan when every candidate's object is read back and says nothing against a restart. */
function planWithObjects(fleet: ReturnType<typeof report>) {
  return planRestarts(fleet, new Map(restartCandidates(fleet).map((w) => [ownerKey(w.namespace, w), {}])), { force: false });
}

function report(pods: PodRecord[], owners = new Map<string, OwnerRef>(), templates = LIVE) {
  return buildFleetReport({
    pods,
    owners,
    templates,
    namespaceLabels: (namespace) => LABELS[namespace],
    decision: { injectorNamespace: 'envoy-injector-system', excludedNamespaces: ['batch-jobs'] },
  });
}

describe('fleet report: the workload of a Pod', () => {
  const owners = new Map<string, OwnerRef>([
    [ownerKey('shop', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f' }), { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }],
    [ownerKey('shop', { apiVersion: 'batch/v1', kind: 'Job', name: 'report-2889' }), { apiVersion: 'batch/v1', kind: 'CronJob', name: 'report' }],
  ]);
  const cases: [string, OwnerRef | undefined, OwnerRef][] = [
    ['a ReplicaSet of a Deployment: the Deployment', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f' }, { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }],
    ['a ReplicaSet not listed or without a controller: the ReplicaSet', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'solo' }, { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'solo' }],
    ['a Job of a CronJob: the CronJob', { apiVersion: 'batch/v1', kind: 'Job', name: 'report-2889' }, { apiVersion: 'batch/v1', kind: 'CronJob', name: 'report' }],
    ['a Job of its own', { apiVersion: 'batch/v1', kind: 'Job', name: 'migrate' }, { apiVersion: 'batch/v1', kind: 'Job', name: 'migrate' }],
    ['a StatefulSet', { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db' }, { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db' }],
    ['a DaemonSet', { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent' }, { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent' }],
    ['another controller (a CRD)', { apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', name: 'canary' }, { apiVersion: 'argoproj.io/v1alpha1', kind: 'Rollout', name: 'canary' }],
    ['no controller: the bare Pod', undefined, { apiVersion: 'v1', kind: 'Pod', name: 'debug' }],
  ];
  for (const [title, owner, expected] of cases) {
    it(title, () => assert.deepEqual(resolveWorkload(pod('debug', { owner }), owners), expected));
  }
  it('owners are per namespace: the same ReplicaSet name elsewhere is not followed', () => {
    assert.deepEqual(resolveWorkload(pod('x', { namespace: 'other', owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f' } }), owners), { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f' });
  });
});

describe('fleet report: current, outdated, not injected', () => {
  it('compares the status hash with the hash the injector computes for the live template', () => {
    const { workloads, totals } = report([
      pod('a', { annotations: injectedWith(LIVE, 'config') }),
      pod('b', { annotations: injectedWith(OLD, 'config') }),
      pod('c', { annotations: injectedWith(OLD, 'lite') }),
    ]);
    assert.deepEqual(workloads.map((w) => [w.name, w.current, w.outdated]), [['a', 1, 0], ['b', 0, 1], ['c', 1, 0]]);
    assert.deepEqual(workloads[1]?.outdatedHashes, [{ template: 'config', hash: OLD.defaultTemplate.hash, pods: 1 }]);
    assert.deepEqual(totals, { pods: 3, current: 2, outdated: 1, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
  });

  it('counts the injected Pods whose tcpSocket probes the proxy answers (envoy-injector.io/tcp-probes), and says so', () => {
    const probes = { 'envoy-injector.io/tcp-probes': '[{"container":"app","probe":"livenessProbe","port":8081}]' };
    const fleet = report([
      pod('a', { annotations: { ...injectedWith(LIVE, 'config'), ...probes } }),
      pod('b', { annotations: { ...injectedWith(OLD, 'config'), ...probes } }),
      pod('c', { annotations: { ...injectedWith(LIVE, 'config'), 'envoy-injector.io/tcp-probes': 'not json' } }),
      // Not injected: its copied record counts for nothing.
      pod('d', { annotations: probes }),
    ]);
    assert.deepEqual(fleet.workloads.map((w) => [w.name, w.tcpProbes]), [['a', 1], ['b', 1], ['c', 0], ['d', 0]]);
    assert.equal(fleet.totals.tcpProbes, 2);
  });

  it('counts the injected Pods with the PROXY protocol to the app (the status\'s inboundProxyProtocol), and says so', () => {
    const withPorts = (annotations: Record<string, string>, ports: unknown): Record<string, string> => {
      const status = JSON.parse(annotations['envoy-injector.io/status'] ?? '{}') as Record<string, unknown>;
      return { ...annotations, 'envoy-injector.io/status': JSON.stringify({ ...status, inboundProxyProtocol: ports }) };
    };
    const fleet = report([
      pod('a', { annotations: withPorts(injectedWith(LIVE, 'config'), [8080]) }),
      pod('b', { annotations: withPorts(injectedWith(LIVE, 'config'), []) }),
      pod('c', { annotations: injectedWith(LIVE, 'config') }),
    ]);
    assert.deepEqual(fleet.workloads.map((w) => [w.name, w.proxyProtocol]), [['a', 1], ['b', 0], ['c', 0]]);
    assert.equal(fleet.totals.proxyProtocol, 1);
    const plan = planRestarts(fleet, new Map(), { force: false });
    assert.match(formatReport(fleet, plan, 'ConfigMap x/y', 'all namespaces', false), /, 1 with the PROXY protocol to the app\.$/m);
  });

  it('counts the injected Pods captured by TPROXY (the status\'s interception), and says so', () => {
    const withInterception = (annotations: Record<string, string>, interception: string): Record<string, string> => {
      const status = JSON.parse(annotations['envoy-injector.io/status'] ?? '{}') as Record<string, unknown>;
      return { ...annotations, 'envoy-injector.io/status': JSON.stringify({ ...status, interception }) };
    };
    const fleet = report([
      pod('a', { annotations: withInterception(injectedWith(LIVE, 'config'), 'tproxy') }),
      pod('b', { annotations: withInterception(injectedWith(LIVE, 'config'), 'redirect') }),
      pod('c', { annotations: injectedWith(LIVE, 'config') }),
    ]);
    assert.deepEqual(fleet.workloads.map((w) => [w.name, w.tproxy]), [['a', 1], ['b', 0], ['c', 0]]);
    assert.equal(fleet.totals.tproxy, 1);
    const plan = planRestarts(fleet, new Map(), { force: false });
    assert.match(formatReport(fleet, plan, 'ConfigMap x/y', 'all namespaces', false), /, 1 captured by TPROXY \(proxy as root with NET_ADMIN\)\.$/m);
  });

  it('a template whose YAML only changed layout and key order keeps its Pods current', () => {
    const relaid = parseTemplateData({ config: 'containers:\n  - image: "envoy:2"\n    name: envoy\n', lite: 'containers: [{name: tiny, image: "tiny:1"}]' });
    assert.equal(report([pod('a', { annotations: injectedWith(LIVE, 'config') })], new Map(), relaid).totals.current, 1);
  });

  it('a template no longer in the set, or a status that does not parse, is outdated', () => {
    const onlyConfig = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoy:2"}]' });
    const { workloads } = report(
      [pod('gone', { annotations: injectedWith(LIVE, 'lite') }), pod('garbled', { annotations: { 'envoy-injector.io/status': '{not json' } }), pod('partial', { annotations: { 'envoy-injector.io/status': '{"template":"config"}' } })],
      new Map(),
      onlyConfig,
    );
    assert.deepEqual(workloads.map((w) => [w.name, w.outdated, w.outdatedHashes.map((h) => `${h.template}@${h.hash}`)]), [
      ['garbled', 1, ['?@unreadable']],
      ['gone', 1, [`lite@${LIVE.templates.get('lite')?.hash}`]],
      ['partial', 1, ['?@unreadable']],
    ]);
  });

  it('counts a Pod without a status as not injected only when the webhook would inject it now', () => {
    const { workloads } = report([
      pod('labeled-namespace'),
      pod('annotated-true', { namespace: 'plain', annotations: { 'envoy-injector.io/inject': 'true' } }),
      pod('legacy-annotation', { namespace: 'plain', annotations: { 'initializer.kubernetes.io/envoy': 'true' } }),
      pod('opted-out', { annotations: { 'envoy-injector.io/inject': 'false' } }),
      pod('host-network', { hostNetwork: true }),
      pod('unlabeled', { namespace: 'plain' }),
      pod('disabled-namespace', { namespace: 'quiet', annotations: { 'envoy-injector.io/inject': 'true' } }),
      pod('injector-itself', { namespace: 'envoy-injector-system' }),
      pod('excluded', { namespace: 'batch-jobs', annotations: { 'envoy-injector.io/inject': 'true' } }),
      pod('kube', { namespace: 'kube-system', annotations: { 'envoy-injector.io/inject': 'true' } }),
      pod('labels-unknown', { namespace: 'unlisted' }),
      pod('unknown-template', { annotations: { 'envoy-injector.io/template': 'nope' } }),
      // Issue 50: another mesh's Pod, and one with its own envoy, are never the webhook's to inject: not counted, never restarted.
      pod('other-mesh-istio', { annotations: { 'sidecar.istio.io/status': '{}' }, containers: ['app', 'istio-proxy'] }),
      pod('other-mesh-linkerd', { containers: ['linkerd-init', 'linkerd-proxy', 'app'] }),
      pod('own-envoy', { containers: ['shutdown-manager', 'envoy'] }),
    ]);
    assert.deepEqual(workloads.map((w) => `${w.namespace}/${w.name}:${w.notInjected}`), ['plain/annotated-true:1', 'plain/legacy-annotation:1', 'shop/labeled-namespace:1']);
  });
});

describe('fleet report: marks copied into a Pod template (issue 35)', () => {
  const status = injectedWith(LIVE, 'config');
  const label = { 'envoy-injector.io/injected': 'true' };
  const web = { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' } as const;

  it("a status naming containers the Pod lacks, or the injected label without a status, is its own state: copied, with the marks it carries", () => {
    const { workloads, totals } = report([
      pod('both', { owner: web, annotations: status, labels: label, containers: ['app'] }),
      pod('status-only', { annotations: status, containers: ['app'] }),
      pod('label-only', { labels: label, containers: ['app'] }),
      // Injected for real: the containers its status names are there.
      pod('real', { annotations: status, labels: label, containers: ['app', 'envoy'] }),
      // Copied marks where the webhook would not inject anyway: none of our business.
      pod('elsewhere', { namespace: 'plain', annotations: status, labels: label, containers: ['app'] }),
    ]);
    assert.deepEqual(workloads.map((w) => `${w.kind}/${w.name} ${w.current}/${w.outdated}/${w.notInjected}/${w.copied} ${w.copiedMarks.join(',')}`), [
      'Deployment/web 0/0/0/1 injectedLabel,statusAnnotation',
      'Pod/label-only 0/0/0/1 injectedLabel',
      'Pod/real 1/0/0/0 ',
      'Pod/status-only 0/0/0/1 statusAnnotation',
    ]);
    assert.deepEqual(totals, { pods: 4, current: 1, outdated: 0, resizable: 0, notInjected: 0, unknown: 0, copied: 3, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
  });

  it('--restart: a workload with copied marks is a candidate; rolled once its template is clean, else left to a human saying which mark to remove', () => {
    const fleet = report([pod('web-1', { owner: web, annotations: status, labels: label, containers: ['app'] })]);
    assert.deepEqual(restartCandidates(fleet).map((w) => w.name), ['web']);
    const key = ownerKey('shop', web);
    const marked = { spec: { template: { metadata: { annotations: { 'envoy-injector.io/status': '{}' }, labels: label } } } };
    const byHand = planRestarts(fleet, new Map([[key, marked]]), { force: false });
    assert.deepEqual(byHand.byHand.map((entry) => `${entry.workload.name}: ${entry.why}`), [`web: ${NotRestartedWhy.copiedStatus}`]);
    const clean = planRestarts(fleet, new Map([[key, { spec: { template: { metadata: { labels: { app: 'web' } } } } }]]), { force: false });
    assert.deepEqual(clean.restart.map((w) => w.name), ['web']);
  });
});

describe('fleet report: namespace labels that could not be read', () => {
  it('Pods without a status count as unknown when the labels would decide, and as what they are when not', () => {
    const unreadable = buildFleetReport({
      pods: [
        pod('plain', { namespace: 'app' }),
        pod('opted-in', { namespace: 'app', annotations: { 'envoy-injector.io/inject': 'true' } }),
        pod('opted-out', { namespace: 'app', annotations: { 'envoy-injector.io/inject': 'false' } }),
        pod('injected', { namespace: 'app', annotations: injectedWith(LIVE, 'config') }),
        pod('elsewhere', { namespace: 'shop' }),
      ],
      owners: new Map(),
      templates: LIVE,
      namespaceLabels: (namespace) => LABELS[namespace],
      namespaceLabelsUnreadable: (namespace) => namespace === 'app',
      decision: { injectorNamespace: 'envoy-injector-system' },
    });
    assert.deepEqual(unreadable.workloads.map((w) => `${w.namespace}/${w.name} ${w.current}/${w.outdated}/${w.notInjected}/${w.unknown}`), [
      // opted-in: a namespace labeled disabled would refuse it, so it is unknown too.
      'app/injected 1/0/0/0',
      'app/opted-in 0/0/0/1',
      'app/plain 0/0/0/1',
      'shop/elsewhere 0/0/1/0',
    ]);
    assert.deepEqual(unreadable.totals, { pods: 4, current: 1, outdated: 0, resizable: 0, notInjected: 1, unknown: 2, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
  });
});

describe('fleet report: grouping and the restart plan', () => {
  const owners = new Map<string, OwnerRef>([
    [ownerKey('shop', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-new' }), { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }],
    [ownerKey('shop', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-old' }), { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web' }],
    [ownerKey('shop', { apiVersion: 'batch/v1', kind: 'Job', name: 'report-1' }), { apiVersion: 'batch/v1', kind: 'CronJob', name: 'report' }],
  ]);
  const live = injectedWith(LIVE, 'config');
  const old = injectedWith(OLD, 'config');
  // lite did not change between the two sets: its Pods stay current.
  const lite = injectedWith(OLD, 'lite');
  const fleet = report(
    [
      pod('web-new-1', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-new' }, annotations: live }),
      pod('web-old-1', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-old' }, annotations: old }),
      pod('web-old-2', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-old' }, annotations: injectedWith(OLDER, 'config') }),
      pod('web-old-3', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-old' }, annotations: old }),
      pod('web-new-2', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-new' } }),
      pod('db-0', { owner: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db' }, annotations: old }),
      pod('db-1', { owner: { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db' }, annotations: { ...lite, 'envoy-injector.io/template': 'lite' } }),
      pod('agent-x', { owner: { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'agent' }, annotations: live }),
      pod('report-1-abc', { owner: { apiVersion: 'batch/v1', kind: 'Job', name: 'report-1' }, annotations: old }),
      pod('debug', { annotations: old }),
      pod('web-1', { namespace: 'plain', owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1' }, annotations: { ...old, 'envoy-injector.io/inject': 'true' } }),
    ],
    owners,
  );

  it('one row per workload, sorted, with its counts, templates and the hashes of its outdated Pods', () => {
    const rows = fleet.workloads.map((w) => ({ at: `${w.namespace} ${w.kind}/${w.name}`, templates: w.templates.join(','), counts: [w.current, w.outdated, w.notInjected], restartable: w.restartable }));
    assert.deepEqual(rows, [
      { at: 'plain ReplicaSet/web-1', templates: 'config', counts: [0, 1, 0], restartable: false },
      { at: 'shop CronJob/report', templates: 'config', counts: [0, 1, 0], restartable: false },
      { at: 'shop DaemonSet/agent', templates: 'config', counts: [1, 0, 0], restartable: true },
      { at: 'shop Deployment/web', templates: 'config', counts: [1, 3, 1], restartable: true },
      { at: 'shop Pod/debug', templates: 'config', counts: [0, 1, 0], restartable: false },
      { at: 'shop StatefulSet/db', templates: 'config,lite', counts: [1, 1, 0], restartable: true },
    ]);
    const db = fleet.workloads.find((w) => w.name === 'db');
    assert.deepEqual(db?.outdatedHashes, [{ template: 'config', hash: OLD.defaultTemplate.hash, pods: 1 }]);
    const webHashes = [
      { template: 'config', hash: OLD.defaultTemplate.hash, pods: 2 },
      { template: 'config', hash: OLDER.defaultTemplate.hash, pods: 1 },
    ].sort((a, b) => (a.hash < b.hash ? -1 : 1));
    assert.deepEqual(fleet.workloads.find((w) => w.name === 'web')?.outdatedHashes, webHashes);
    assert.deepEqual(fleet.totals, { pods: 11, current: 3, outdated: 7, resizable: 0, notInjected: 1, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
    assert.deepEqual(fleet.templates, [...LIVE.templates.values()].map((t) => ({ name: t.name, hash: t.hash })));
  });

  it('--restart rolls outdated Deployments, StatefulSets and DaemonSets; everything else outdated is for a human', () => {
    const plan = planWithObjects(fleet);
    assert.deepEqual(plan.restart.map((w) => `${w.kind}/${w.name}`), ['Deployment/web', 'StatefulSet/db']);
    assert.deepEqual(plan.byHand.map(({ workload: w }) => `${w.kind}/${w.name}`), ['ReplicaSet/web-1', 'CronJob/report', 'Pod/debug']);
  });

  it('owners of another group are other workloads: example.com/v1 Deployment web is neither apps/v1 web nor restarted', () => {
    const withForeign = report(
      [
        pod('web-new-1', { owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-new' }, annotations: old }),
        pod('web-x', { owner: { apiVersion: 'example.com/v1', kind: 'Deployment', name: 'web' }, annotations: old }),
        pod('rs-x', { owner: { apiVersion: 'example.com/v1', kind: 'ReplicaSet', name: 'web-new' }, annotations: old }),
        pod('db-x', { owner: { apiVersion: 'apps.kruise.io/v1beta1', kind: 'StatefulSet', name: 'db' }, annotations: old }),
      ],
      owners,
    );
    assert.deepEqual(withForeign.workloads.map((w) => `${w.apiVersion} ${w.kind}/${w.name} ${w.outdated} ${w.restartable}`), [
      'apps/v1 Deployment/web 1 true',
      'example.com/v1 Deployment/web 1 false',
      'example.com/v1 ReplicaSet/web-new 1 false',
      'apps.kruise.io/v1beta1 StatefulSet/db 1 false',
    ]);
    const plan = planWithObjects(withForeign);
    assert.deepEqual(plan.restart.map((w) => `${w.apiVersion} ${w.kind}/${w.name}`), ['apps/v1 Deployment/web']);
    assert.deepEqual(plan.byHand.map(({ workload: w, why, detail }) => `${describeKind(w)}/${w.name}: ${why} (${detail ?? ''})`), [
      'Deployment.example.com/web: not an apps/v1 workload (group example.com)',
      'ReplicaSet.example.com/web-new: not an apps/v1 workload (group example.com)',
      'StatefulSet.apps.kruise.io/db: not an apps/v1 workload (group apps.kruise.io)',
    ]);
  });

  it('reads the status annotation the webhook writes', () => {
    assert.deepEqual(readInjectionStatus(live), { template: 'config', hash: LIVE.defaultTemplate.hash, hashWithoutResources: LIVE.defaultTemplate.hashWithoutResources });
    assert.equal(readInjectionStatus({}), undefined);
  });
});

describe('fleet report: a namespace picking its template (issue 28)', () => {
  const labels: Record<string, Record<string, string>> = {
    canary: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'lite' },
    shop: { 'envoy-injector.io/inject': 'enabled' },
  };
  const build = (pods: PodRecord[], unreadable = false) =>
    buildFleetReport({
      pods,
      owners: new Map(),
      templates: LIVE,
      namespaceLabels: (namespace) => labels[namespace],
      ...(unreadable ? { namespaceLabelsUnreadable: () => true } : {}),
      decision: {},
    });
  const live = (name: 'config' | 'lite') => {
    const annotations = { ...injectedAnnotations(LIVE, name) };
    delete annotations['envoy-injector.io/template'];
    return annotations;
  };

  it('a Pod injected with the default in a namespace now picking another is outdated; one with the picked template is current', () => {
    const { totals } = build([pod('old', { namespace: 'canary', annotations: live('config') }), pod('new', { namespace: 'canary', annotations: live('lite') })]);
    assert.deepEqual([totals.current, totals.outdated], [1, 1]);
  });

  it("a Pod naming its own template stays current whatever its namespace picks", () => {
    const { totals } = build([pod('own', { namespace: 'canary', annotations: { ...live('config'), 'envoy-injector.io/template': 'config' } })]);
    assert.deepEqual([totals.current, totals.outdated], [1, 0]);
  });

  it('a Pod on the canary after the label was removed is outdated (a roll-back); unknown labels change nothing', () => {
    assert.equal(build([pod('back', { namespace: 'shop', annotations: live('lite') })]).totals.outdated, 1);
    assert.equal(build([pod('back', { namespace: 'shop', annotations: live('lite') })], true).totals.outdated, 0);
  });

  it('lists the namespaces that pick a template, and whether it exists', () => {
    const picked = namespaceTemplates(new Map([['b', { 'envoy-injector.io/template': 'nope' }], ['a', { 'envoy-injector.io/template': 'lite' }], ['c', {}]]), LIVE);
    assert.deepEqual(picked, [{ namespace: 'a', template: 'lite', known: true }, { namespace: 'b', template: 'nope', known: false }]);
  });
});
