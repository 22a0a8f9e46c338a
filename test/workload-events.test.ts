import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { NamespaceLabelsUnknownError } from '../src/errors.js';
import type { WorkloadNotice } from '../src/events/workload-notices.js';
import { Reason } from '../src/injection/index.js';
import { WorkloadEvents } from '../src/kube/workload-events.js';
import { InjectorMetrics } from '../src/server/metrics.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { podReview } from './helpers/reviews.js';
import { captureLog, startTestServer } from './helpers/server.js';

const NS = 'shop';

describe('workload Events against a fake API server', () => {
  let fake: FakeApiServer;
  let kubeConfig: KubeConfig;
  let metrics: InjectorMetrics;
  let started: WorkloadEvents[] = [];

  before(async () => {
    fake = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
  });
  after(() => fake.close());
  beforeEach(() => {
    metrics = new InjectorMetrics({ processMetrics: false });
    for (const event of fake.list('events')) fake.remove('events', event.metadata.namespace, event.metadata.name);
    fake.requests.length = 0;
  });
  afterEach(async () => {
    fake.stall(undefined);
    for (const events of started.splice(0)) await events.stop(5_000);
  });

  const poster = (options: { queueSize?: number; instance?: string; requestTimeoutMs?: number } = {}): WorkloadEvents => {
    const events = new WorkloadEvents({ kubeConfig, log: captureLog().logger, recorder: metrics, queueSize: options.queueSize ?? 100, reportingInstance: options.instance ?? 'injector-0', requestTimeoutMs: options.requestTimeoutMs ?? 2_000 });
    started.push(events);
    return events;
  };
  /** A Deployment, its ReplicaSet (owned by it, as the controllers make them); the notice of one of its Pods. */
  const deployment = (name: string): WorkloadNotice => {
    const stored = fake.apply('deployments', { metadata: { name, namespace: NS } });
    const rs = fake.apply('replicasets', { metadata: { name: `${name}-5d8f7`, namespace: NS, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name, uid: stored.metadata['uid'], controller: true }] } });
    return notice({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: rs.metadata.name, uid: String(rs.metadata['uid']) });
  };
  const notice = (owner: WorkloadNotice['owner'], reason = 'UnknownTemplate'): WorkloadNotice => ({ namespace: NS, owner, cause: Reason.unknownTemplate, reason, note: 'Pods were created without the envoy-injector sidecar: no template named "canary"' });
  const metric = async (name: string): Promise<string> => metrics.registry.getSingleMetricAsString(name);
  const gets = (resource: string): number => fake.requests.filter((request) => request.method === 'GET' && request.path.includes(`/${resource}/`)).length;

  it('2,000 Pods of one Deployment: one Event on the Deployment, its series counting them; one read of the ReplicaSet', async () => {
    const events = poster();
    const web = deployment('web');
    events.record(web);
    await events.flush();
    const [first, ...none] = fake.list('events');
    assert.deepEqual(none, []);
    assert.ok(first !== undefined);
    assert.deepEqual(first['regarding'], { apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: fake.get('deployments', NS, 'web')?.metadata['uid'], namespace: NS });
    assert.equal(first['type'], 'Warning');
    assert.equal(first['reason'], 'UnknownTemplate');
    assert.match(String(first['note']), /"canary"/);
    assert.equal(first['series'], undefined, 'one occurrence: no series yet');

    for (let pod = 1; pod < 2_000; pod += 1) events.record(web);
    await events.flush();
    const [grown, ...still] = fake.list('events');
    assert.deepEqual(still, []);
    assert.equal((grown?.['series'] as { count: number } | undefined)?.count, 2_000);
    assert.equal(gets('replicasets'), 1, 'the owner lookup is cached');
    assert.match(await metric('envoy_injector_workload_event_writes_total'), /result="created"\} 1\n[\s\S]*result="patched"\} 1/);
  });

  it('StatefulSets and ReplicaSets without an owner are the workload; a Job goes up to its CronJob; one Event per reason', async () => {
    const events = poster();
    const cron = fake.apply('cronjobs', { metadata: { name: 'nightly', namespace: NS } });
    const job = fake.apply('jobs', { metadata: { name: 'nightly-29', namespace: NS, ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: cron.metadata['uid'], controller: true }] } });
    const lone = fake.apply('replicasets', { metadata: { name: 'lone', namespace: NS } });
    events.record(notice({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid' }));
    events.record(notice({ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'lone', uid: String(lone.metadata['uid']) }));
    events.record(notice({ apiVersion: 'batch/v1', kind: 'Job', name: 'nightly-29', uid: String(job.metadata['uid']) }));
    events.record(notice({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid' }, 'OverrideIgnored'));
    await events.flush();
    const regarding = fake.list('events').map((event) => `${(event['regarding'] as { kind: string; name: string }).kind}/${(event['regarding'] as { name: string }).name} ${String(event['reason'])}`);
    assert.deepEqual(regarding.sort(), ['CronJob/nightly UnknownTemplate', 'ReplicaSet/lone UnknownTemplate', 'StatefulSet/db OverrideIgnored', 'StatefulSet/db UnknownTemplate']);
    assert.equal(gets('statefulsets'), 0, 'a StatefulSet is not read');
  });

  it('two replicas of the injector make one Event and add up their counts', async () => {
    const [a, b] = [poster({ instance: 'injector-a' }), poster({ instance: 'injector-b' })];
    const web = deployment('web');
    for (let pod = 0; pod < 3; pod += 1) a.record(web);
    for (let pod = 0; pod < 4; pod += 1) b.record(web);
    await a.flush();
    await b.flush();
    a.record(web);
    b.record(web);
    await Promise.all([a.flush(), b.flush()]);
    // One of the two concurrent patches may have lost the race (409): it reads again at its next flush.
    await a.flush();
    await b.flush();
    const [only, ...none] = fake.list('events');
    assert.deepEqual(none, []);
    assert.equal((only?.['series'] as { count: number } | undefined)?.count, 9);
    assert.equal(fake.requests.filter((request) => request.method === 'GET' && request.path.includes('/events')).length, 0, 'Events are never read (RBAC grants create and patch only)');
  });

  it('the queue\'s cap: distinct notices beyond it are dropped and counted; repeats of queued ones are not', async () => {
    const events = poster({ queueSize: 2 });
    const owners = ['a', 'b', 'c', 'd'].map((name) => notice({ apiVersion: 'apps/v1', kind: 'StatefulSet', name, uid: `${name}-uid` }));
    for (const owner of owners) events.record(owner);
    events.record(owners[0] as WorkloadNotice);
    assert.match(await metric('envoy_injector_workload_events_dropped_total'), /envoy_injector_workload_events_dropped_total 2$/m);
    await events.flush();
    assert.deepEqual(fake.list('events').map((event) => (event['regarding'] as { name: string }).name).sort(), ['a', 'b']);
  });

  it('API server errors: counted, logged, retried at the next flush; given up after 5 failed flushes, dropped counted', async () => {
    const log = captureLog();
    const events = new WorkloadEvents({ kubeConfig, log: log.logger, recorder: metrics, queueSize: 10, reportingInstance: 'i', requestTimeoutMs: 2_000 });
    started.push(events);
    const db = notice({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid' });
    fake.failNext(1, 500, (path) => path.includes('/events'));
    events.record(db);
    events.record(db);
    await events.flush();
    assert.deepEqual(fake.list('events'), []);
    assert.ok(log.lines.some((line) => String(line['msg']).includes('1 API calls failed, retrying')), 'the failure is logged');
    await events.flush();
    assert.equal((fake.list('events')[0]?.['series'] as { count: number } | undefined)?.count, 2, 'nothing was lost');

    fake.failNext(5, 503, (path) => path.includes('/events'));
    events.record(db);
    for (let flush = 0; flush < 5; flush += 1) await events.flush();
    assert.match(await metric('envoy_injector_workload_events_dropped_total'), /dropped_total 1$/m);
    assert.match(await metric('envoy_injector_workload_event_writes_total'), /result="failed"\} 6$/m);
  });

  it('a hung API server: each call gives up at its timeout, the last flush at shutdown is bounded, record never waits', async () => {
    fake.stall((path) => path.includes('/events'));
    const events = poster({ requestTimeoutMs: 200 });
    const db = notice({ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid' });
    events.record(db);
    await events.flush();
    assert.match(await metric('envoy_injector_workload_event_writes_total'), /result="failed"\} 1$/m);
    for (let pod = 0; pod < 100_000; pod += 1) events.record(db);
    const stopping = performance.now();
    await events.stop(300);
    assert.ok(performance.now() - stopping < 5_000, 'stop returns at its bound, not when the API server answers');
  });

  it('the webhook: answers a Pod asking for an unknown template without waiting, and a dry run records nothing', async () => {
    fake.stall(() => true);
    const events = poster({ requestTimeoutMs: 60_000 });
    const server = await startTestServer({ workloadEvents: events });
    try {
      const review = (dryRun: boolean) => {
        const body = podReview({ namespace: NS, annotations: { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': 'canary' }, dryRun }) as { request: { object: { metadata: Record<string, unknown> } } };
        body.request.object.metadata['ownerReferences'] = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid', controller: true }];
        return server.app.inject({ method: 'POST', url: '/mutate', payload: body });
      };
      assert.equal((await review(true)).statusCode, 200);
      assert.equal(events.pending, 0, 'a dry run posts nothing');
      const flushing = events.flush();
      assert.equal((await review(false)).statusCode, 200, 'answered while the API server hangs');
      assert.equal(events.pending, 1);
      void flushing;
    } finally {
      await server.shutdown();
    }
  });

  it('the webhook: a 503 for unknown namespace labels records a NamespaceLabelsUnknown notice, an opted-out Pod none', async () => {
    const recorded: WorkloadNotice[] = [];
    const server = await startTestServer({ workloadEvents: { record: (notice) => void recorded.push(notice) }, namespaceLabels: () => Promise.reject(new NamespaceLabelsUnknownError('labels of namespace "shop" unknown')) });
    try {
      for (const annotations of [{}, { 'envoy-injector.io/inject': 'false' }]) {
        const body = podReview({ namespace: NS, annotations }) as { request: { object: { metadata: Record<string, unknown> } } };
        body.request.object.metadata['ownerReferences'] = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'db-uid', controller: true }];
        assert.equal((await server.app.inject({ method: 'POST', url: '/mutate', payload: body })).statusCode, 503);
      }
      assert.deepEqual(recorded.map((notice) => [notice.reason, notice.owner.name]), [['NamespaceLabelsUnknown', 'db']]);
      assert.match(recorded[0]?.note ?? '', /namespace "shop"/);
    } finally {
      await server.shutdown();
    }
  });
});
