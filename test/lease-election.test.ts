import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { checkLeaseTimings, LeaseElection, type LeaseTimings } from '../src/kube/api/index.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { until } from './helpers/injector-harness.js';

const NAMESPACE = 'envoy-injector';
const LEASE = 'envoy-injector-rollout';
/** Short, in the ratios client-go asks for; waits below poll for what happens, never for how long. */
const TIMINGS: LeaseTimings = { leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 200 };
const LEASE_PATH = `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases`;

interface Candidate {
  readonly election: LeaseElection;
  /** Each start and stop of leading, in order. */
  readonly calls: ('started' | 'stopped')[];
}

describe('leader election through a coordination.k8s.io/v1 Lease (fake API server)', () => {
  let fake: FakeApiServer;
  let kubeConfig: KubeConfig;
  const candidates: Candidate[] = [];
  const candidate = (identity: string, timings = TIMINGS): Candidate => {
    const calls: Candidate['calls'] = [];
    const election = new LeaseElection({
      kubeConfig,
      namespace: NAMESPACE,
      name: LEASE,
      identity,
      timings,
      log: pino({ level: 'silent' }),
      onStartedLeading: () => calls.push('started'),
      onStoppedLeading: () => void calls.push('stopped'),
    });
    const made = { election, calls };
    candidates.push(made);
    return made;
  };
  const leaders = () => candidates.filter((c) => c.election.isLeader);
  const holder = () => ((fake.get('leases', NAMESPACE, LEASE)?.['spec'] as { holderIdentity?: string } | undefined)?.holderIdentity ?? '');

  beforeEach(async () => {
    fake = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
  });
  afterEach(async () => {
    await Promise.all(candidates.splice(0).map((c) => c.election.stop()));
    await fake.close();
  });

  it('refuses timings that cannot hold, as client-go does', () => {
    assert.throws(() => checkLeaseTimings({ leaseDurationMs: 1_000, renewDeadlineMs: 1_000, retryPeriodMs: 100 }), /lease duration must be greater/);
    assert.throws(() => checkLeaseTimings({ leaseDurationMs: 2_000, renewDeadlineMs: 1_000, retryPeriodMs: 900 }), /retry period times 1.2/);
  });

  it('five candidates racing for an absent Lease: one leads, the Lease names it, the others follow', async () => {
    const all = ['a', 'b', 'c', 'd', 'e'].map((name) => candidate(name));
    for (const c of all) c.election.start();
    const leader = await until('a leader', () => leaders()[0]);
    // A few more renewals: still one, and it is the Lease's holder.
    await until('three renewals', () => (fake.requests.filter((r) => r.method === 'PATCH' && r.path.startsWith(LEASE_PATH) && r.status === 200).length >= 3 ? true : undefined));
    assert.equal(leaders().length, 1);
    assert.equal(holder(), identityOf(all, leader));
    assert.deepEqual(leader.calls, ['started']);
    for (const other of all.filter((c) => c !== leader)) assert.deepEqual(other.calls, []);
  });

  it('on stop the leader stops leading, then gives the Lease up; a follower takes it at its next look, well within the lease duration', async () => {
    const first = candidate('first', { leaseDurationMs: 60_000, renewDeadlineMs: 1_000, retryPeriodMs: 200 });
    first.election.start();
    await until('first leads', () => (first.election.isLeader ? true : undefined));
    const second = candidate('second', { leaseDurationMs: 60_000, renewDeadlineMs: 1_000, retryPeriodMs: 200 });
    second.election.start();
    await until('second has looked at the Lease', () => (second.election.holder === 'first' ? true : undefined));
    await first.election.stop();
    assert.deepEqual(first.calls, ['started', 'stopped']);
    assert.equal(holder(), '', 'the holder is emptied');
    // With a 60 s duration, only the release lets the second lead this soon.
    await until('second leads after the release', () => (second.election.isLeader ? true : undefined), 10_000);
    assert.equal(holder(), 'second');
    const transitions = (fake.get('leases', NAMESPACE, LEASE)?.['spec'] as { leaseTransitions?: number }).leaseTransitions;
    assert.equal(transitions, 1);
  });

  it('a leader whose renewals fail past the renew deadline stops leading; once the API server answers, one leads again', async () => {
    const first = candidate('first');
    first.election.start();
    await until('first leads', () => (first.election.isLeader ? true : undefined));
    const second = candidate('second');
    second.election.start();
    await until('second follows', () => (second.election.holder === 'first' ? true : undefined));
    // Every request on the Lease fails from now on (500s).
    let failing = true;
    fake.failNext(1_000_000, 500, (path) => failing && path.startsWith(LEASE_PATH));
    await until('first stops leading', () => (first.calls.includes('stopped') ? true : undefined));
    assert.equal(first.election.isLeader, false);
    failing = false;
    await until('one of them leads again', () => leaders()[0]);
    assert.equal(leaders().length, 1);
  });

  it('an API server that hangs: requests time out, the leader steps down within its deadline and nobody leads until it answers', async () => {
    const timings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 1_000 };
    const only = candidate('only', timings);
    only.election.start();
    await until('it leads', () => (only.election.isLeader ? true : undefined));
    fake.stall((path) => path.startsWith(LEASE_PATH));
    await until('it steps down', () => (only.calls.includes('stopped') ? true : undefined));
    assert.equal(only.election.isLeader, false);
    fake.stall(undefined);
    await until('it leads again once the API server answers', () => (only.election.isLeader ? true : undefined));
    assert.deepEqual(only.calls, ['started', 'stopped', 'started']);
  });

  it('an annotation the leader sets rides on its renewal and is read by the next leader', async () => {
    const first = candidate('first');
    first.election.start();
    await until('first leads', () => (first.election.isLeader ? true : undefined));
    first.election.setAnnotation('envoy-injector.io/rollout-stopped', '{"why":"test"}');
    await until('the annotation written', () => (fake.get('leases', NAMESPACE, LEASE)?.metadata['annotations'] as Record<string, string> | undefined)?.['envoy-injector.io/rollout-stopped']);
    await first.election.stop();
    const second = candidate('second');
    second.election.start();
    await until('second leads', () => (second.election.isLeader ? true : undefined));
    assert.equal(second.election.annotation('envoy-injector.io/rollout-stopped'), '{"why":"test"}');
    second.election.setAnnotation('envoy-injector.io/rollout-stopped', undefined);
    await until('the annotation removed', () => ((fake.get('leases', NAMESPACE, LEASE)?.metadata['annotations'] as Record<string, string> | undefined)?.['envoy-injector.io/rollout-stopped'] === undefined ? true : undefined));
  });

  it('a follower at rest costs one GET a retry period, the leader one GET and one PATCH: nothing else', async () => {
    const leader = candidate('leader');
    leader.election.start();
    await until('it leads', () => (leader.election.isLeader ? true : undefined));
    const follower = candidate('follower');
    follower.election.start();
    const from = fake.requests.length;
    await until('ten renewals', () => (fake.requests.slice(from).filter((r) => r.method === 'PATCH').length >= 10 ? true : undefined));
    const seen = fake.requests.slice(from);
    assert.deepEqual([...new Set(seen.map((r) => `${r.method} ${r.path}`))].sort(), [`GET ${LEASE_PATH}/${LEASE}`, `PATCH ${LEASE_PATH}/${LEASE}`]);
    const gets = seen.filter((r) => r.method === 'GET').length;
    const patches = seen.filter((r) => r.method === 'PATCH').length;
    // The leader GETs before each PATCH; the follower's GETs, jittered up to 20 % slower, are at most as many as the leader's.
    assert.ok(gets <= patches * 2 + 2, `${gets} GETs for ${patches} renewals`);
  });
});

function identityOf(all: readonly Candidate[], leader: Candidate): string {
  return ['a', 'b', 'c', 'd', 'e'][all.indexOf(leader)] ?? '';
}
