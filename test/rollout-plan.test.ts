import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { FleetReport, WorkloadReport } from '../src/fleet/fleet-report.js';
import { rolloutHealth } from '../src/fleet/rollout-health.js';
import { inheritedInFlight, parseRolloutStop, planRollout, RolloutWait, stopHolds, templatesFingerprint, type InFlight, type RolloutInput } from '../src/fleet/rollout-plan.js';
import type { JsonObject } from '../src/injection/index.js';

const NOW = Date.parse('2026-12-06T10:00:00Z');
const MINUTE = 60_000;

function workload(namespace: string, name: string, outdated = 1, kind = 'Deployment'): WorkloadReport {
  return {
    namespace, apiVersion: 'apps/v1', kind, name, templates: ['config'], current: 0, outdated, resizable: 0, notInjected: 0, unknown: 0, copied: 0, copiedMarks: [],
    tcpProbes: 0, proxyProtocol: 0, tproxy: 0, outdatedHashes: [], restartable: true,
  };
}

/** A Deployment object of REPLICAS, all updated and available, unless STATUS says otherwise. */
function deployment(replicas = 2, status: JsonObject = {}, extra: { annotations?: Record<string, string>; templateAnnotations?: Record<string, string>; generation?: number } = {}): JsonObject {
  return {
    metadata: { generation: extra.generation ?? 3, ...(extra.annotations === undefined ? {} : { annotations: extra.annotations }) },
    spec: { replicas, template: { metadata: { annotations: extra.templateAnnotations ?? {} } } },
    status: { observedGeneration: 3, replicas, updatedReplicas: replicas, readyReplicas: replicas, availableReplicas: replicas, ...status },
  };
}

function report(...workloads: WorkloadReport[]): FleetReport {
  return { templates: [{ name: 'config', hash: 'sha256:aaaa' }], workloads, totals: { pods: 0, current: 0, outdated: 0, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 } };
}

const key = (w: WorkloadReport) => `${w.namespace}/apps/${w.kind}/${w.name}`;

function input(workloads: WorkloadReport[], objects: [WorkloadReport, JsonObject][], options: Partial<RolloutInput> = {}): RolloutInput {
  return {
    report: report(...workloads),
    objects: new Map(objects.map(([w, o]) => [key(w), o])),
    namespaceMetadata: () => ({ labels: {}, annotations: undefined }),
    decision: { injectorNamespace: 'envoy-injector-system', excludedNamespaces: ['legacy'] },
    inFlight: [],
    settings: { maxConcurrent: 2, readyTimeoutMs: 10 * MINUTE },
    now: NOW,
    ...options,
  };
}

const names = (list: readonly { namespace: string; name: string }[]) => list.map((w) => `${w.namespace}/${w.name}`);

describe('the rollout by budget: what to start, what is done, what failed', () => {
  it('one workload a namespace, at most maxConcurrent in the cluster, in the report\'s order', () => {
    const all = [workload('a', 'one'), workload('a', 'two'), workload('b', 'one'), workload('c', 'one')];
    const step = planRollout(input(all, all.map((w) => [w, deployment()])));
    assert.deepEqual(names(step.start), ['a/one', 'b/one']);
    assert.deepEqual(step.waiting.map((w) => `${w.workload.namespace}/${w.workload.name}: ${w.why}`), [`a/two: ${RolloutWait.namespaceBusy}`, `c/one: ${RolloutWait.budget}`]);
    assert.equal(step.inFlight.length, 2);
  });

  it('the next one only once the previous rollout has settled: all Pods updated, none old, all available', () => {
    const [first, second] = [workload('a', 'one', 0), workload('a', 'two')];
    const inFlight: InFlight[] = [{ workload: first, startedAt: NOW - MINUTE }];
    const cases: [string, JsonObject, string[]][] = [
      ['generation not observed', deployment(2, { observedGeneration: 2 }), []],
      ['1 of 2 updated', deployment(2, { updatedReplicas: 1 }), []],
      ['an old Pod left', deployment(2, { replicas: 3 }), []],
      ['1 of 2 available', deployment(2, { availableReplicas: 1, readyReplicas: 1 }), []],
      ['settled', deployment(2), ['a/two']],
    ];
    for (const [what, object, expected] of cases) {
      const step = planRollout(input([first, second], [[first, object], [second, deployment()]], { inFlight }));
      assert.deepEqual(names(step.start), expected, what);
      assert.deepEqual(names(step.settled), expected.length === 0 ? [] : ['a/one'], what);
    }
  });

  it('a restart the watch has not yet shown (the cached object still of the old generation) is not settled', () => {
    const [first, second] = [workload('a', 'one', 0), workload('a', 'two')];
    const step = planRollout(input([first, second], [[first, deployment()], [second, deployment()]], { inFlight: [{ workload: first, startedAt: NOW, awaitGeneration: 4 }] }));
    assert.deepEqual(names(step.start), []);
    assert.deepEqual(names(step.settled), []);
    const seen = planRollout(input([first, second], [[first, deployment(2, { observedGeneration: 4 }, { generation: 4 })], [second, deployment()]], { inFlight: [{ workload: first, startedAt: NOW, awaitGeneration: 4 }] }));
    assert.deepEqual(names(seen.settled), ['a/one']);
  });

  it('a Deployment past its progress deadline, or any rollout not settled within the ready timeout, has failed', () => {
    const [first, second] = [workload('a', 'one', 0), workload('b', 'two')];
    const stalled = deployment(2, { availableReplicas: 0, conditions: [{ type: 'Progressing', status: 'False', reason: 'ProgressDeadlineExceeded', message: 'ReplicaSet "one-7d" has timed out progressing.' }] });
    let step = planRollout(input([first, second], [[first, stalled], [second, deployment()]], { inFlight: [{ workload: first, startedAt: NOW - MINUTE }] }));
    assert.deepEqual(step.failed.map((f) => f.why), ['progress deadline exceeded: ReplicaSet "one-7d" has timed out progressing.']);
    const slow = deployment(2, { availableReplicas: 1 });
    step = planRollout(input([first, second], [[first, slow], [second, deployment()]], { inFlight: [{ workload: first, startedAt: NOW - 10 * MINUTE }] }));
    assert.deepEqual(step.failed.map((f) => f.why), ['not settled 600 s after it started: 1 of 2 Pods available']);
    step = planRollout(input([first, second], [[first, slow], [second, deployment()]], { inFlight: [{ workload: first, startedAt: NOW - 9 * MINUTE }] }));
    assert.deepEqual(step.failed, []);
  });

  it('paused by the annotation on the namespace or the workload; never a namespace or workload that opted out', () => {
    const all = [workload('paused-ns', 'web'), workload('a', 'paused'), workload('off', 'web'), workload('legacy', 'web'), workload('envoy-injector-system', 'x'), workload('b', 'optout'), workload('unknown', 'web'), workload('c', 'go')];
    const objects: [WorkloadReport, JsonObject][] = all.map((w) => [w, w.name === 'paused' ? deployment(2, {}, { annotations: { 'envoy-injector.io/rollout': 'paused' } }) : w.name === 'optout' ? deployment(2, {}, { templateAnnotations: { 'envoy-injector.io/inject': 'false' } }) : deployment()]);
    const namespaceMetadata: RolloutInput['namespaceMetadata'] = (namespace) =>
      namespace === 'unknown' ? undefined : namespace === 'paused-ns' ? { labels: {}, annotations: { 'envoy-injector.io/rollout': 'paused' } } : namespace === 'off' ? { labels: { 'envoy-injector.io/inject': 'disabled' }, annotations: undefined } : { labels: {}, annotations: undefined };
    const step = planRollout(input(all, objects, { namespaceMetadata, settings: { maxConcurrent: 10, readyTimeoutMs: MINUTE } }));
    assert.deepEqual(names(step.start), ['c/go']);
    assert.deepEqual(step.waiting.map((w) => `${w.workload.namespace}/${w.workload.name}: ${w.why} (${w.detail ?? ''})`), [
      'paused-ns/web: paused (namespace annotation envoy-injector.io/rollout=paused)',
      'a/paused: paused (annotation envoy-injector.io/rollout=paused)',
      'off/web: opted out of injection (namespace label envoy-injector.io/inject=disabled)',
      'legacy/web: opted out of injection (excluded namespace)',
      'envoy-injector-system/x: opted out of injection (excluded namespace)',
      'b/optout: opted out of injection (Pod template annotation envoy-injector.io/inject: "false")',
      'unknown/web: opted out of injection (namespace labels unknown)',
    ]);
  });

  it('a rollout someone else started holds its namespace; current, non-apps and OnDelete workloads are never started', () => {
    const rolling = workload('a', 'rolling');
    const all = [rolling, workload('a', 'next'), workload('b', 'current', 0), { ...workload('b', 'cron', 1, 'CronJob'), apiVersion: 'batch/v1', restartable: false }, workload('b', 'ondelete', 1, 'StatefulSet')];
    const onDelete: JsonObject = { metadata: { generation: 1 }, spec: { replicas: 1, updateStrategy: { type: 'OnDelete' }, template: {} }, status: { observedGeneration: 1, replicas: 1, updatedReplicas: 1, readyReplicas: 1 } };
    const step = planRollout(input(all, [[rolling, deployment(2, { updatedReplicas: 1 })], [all[1] as WorkloadReport, deployment()], [all[4] as WorkloadReport, onDelete]]));
    assert.deepEqual(names(step.start), []);
    assert.deepEqual(step.waiting.map((w) => `${w.workload.name}: ${w.why}`), [`rolling: ${RolloutWait.namespaceBusy}`, `next: ${RolloutWait.namespaceBusy}`, `ondelete: ${RolloutWait.notRestartable}`]);
  });

  it('a new leader inherits the rollouts restarted within the ready timeout that have not settled', () => {
    const [fresh, old, done] = [workload('a', 'fresh', 0), workload('b', 'old', 0), workload('c', 'done', 0)];
    const restarted = (at: number) => ({ templateAnnotations: { 'kubectl.kubernetes.io/restartedAt': new Date(at).toISOString() } });
    const objects = new Map([
      [key(fresh), deployment(2, { availableReplicas: 1 }, restarted(NOW - MINUTE))],
      [key(old), deployment(2, { availableReplicas: 1 }, restarted(NOW - 20 * MINUTE))],
      [key(done), deployment(2, {}, restarted(NOW - MINUTE))],
    ]);
    const inherited = inheritedInFlight(report(fresh, old, done), objects, { maxConcurrent: 1, readyTimeoutMs: 10 * MINUTE }, NOW);
    assert.deepEqual(inherited.map((entry) => `${entry.workload.name} ${entry.startedAt === NOW - MINUTE}`), ['fresh true']);
  });

  it('a stop holds until the templates change or the failed workload settles; an unreadable one is none', () => {
    const failedOne = workload('a', 'one');
    const stop = { namespace: 'a', kind: 'Deployment', name: 'one', why: 'x', templates: templatesFingerprint(report()), at: '2026-12-06T10:00:00Z' };
    assert.deepEqual(parseRolloutStop(JSON.stringify(stop)), stop);
    assert.equal(parseRolloutStop('{"namespace":1}'), undefined);
    assert.equal(parseRolloutStop('not json'), undefined);
    const stuck = new Map([[key(failedOne), deployment(2, { availableReplicas: 0 })]]);
    assert.equal(stopHolds(stop, report(failedOne), stuck), true);
    assert.equal(stopHolds(stop, { ...report(failedOne), templates: [{ name: 'config', hash: 'sha256:bbbb' }] }, stuck), false);
    assert.equal(stopHolds(stop, report(failedOne), new Map([[key(failedOne), deployment()]])), false);
  });

  it('StatefulSet and DaemonSet health: revisions, partition, readiness, availability', () => {
    const sts = (status: JsonObject, partition?: number): JsonObject => ({ metadata: { generation: 2 }, spec: { replicas: 3, ...(partition === undefined ? {} : { updateStrategy: { rollingUpdate: { partition } } }) }, status: { observedGeneration: 2, updatedReplicas: 3, readyReplicas: 3, currentRevision: 'r2', updateRevision: 'r2', ...status } });
    assert.deepEqual(rolloutHealth('StatefulSet', sts({})), { state: 'settled' });
    assert.equal(rolloutHealth('StatefulSet', sts({ currentRevision: 'r1' })).state, 'progressing');
    assert.equal(rolloutHealth('StatefulSet', sts({ readyReplicas: 2 })).state, 'progressing');
    assert.deepEqual(rolloutHealth('StatefulSet', sts({ updatedReplicas: 1, currentRevision: 'r1' }, 2)), { state: 'settled' });
    const ds = (status: JsonObject): JsonObject => ({ metadata: { generation: 1 }, spec: {}, status: { observedGeneration: 1, desiredNumberScheduled: 2, updatedNumberScheduled: 2, numberAvailable: 2, ...status } });
    assert.deepEqual(rolloutHealth('DaemonSet', ds({})), { state: 'settled' });
    assert.equal(rolloutHealth('DaemonSet', ds({ numberAvailable: 1 })).state, 'progressing');
  });
});
