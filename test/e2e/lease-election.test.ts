import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CoordinationV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import pino from 'pino';
import { LeaseElection, type LeaseTimings } from '../../src/kube/api/index.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, uniqueName } from './cluster.js';

/**
 * LeaseElection (kube/api/lease-election.ts) against a real API server: its
 * create, its merge patches with a resourceVersion precondition (the real
 * 409 when two candidates race), MicroTime fields the API server accepts,
 * the release on stop, and a holder written by someone else.
 */

const TIMINGS: LeaseTimings = { leaseDurationMs: 4_000, renewDeadlineMs: 3_000, retryPeriodMs: 500 };

forEachKubeVersion('leader election through a Lease on the real API server', (plane) => {
  const namespace = uniqueName('lease');
  const elections: { election: LeaseElection; calls: string[]; identity: string }[] = [];
  const leases = () => plane().kubeConfig.makeApiClient(CoordinationV1Api);
  const candidate = (identity: string, name = 'rollout') => {
    const calls: string[] = [];
    const election = new LeaseElection({
      kubeConfig: plane().kubeConfig,
      namespace,
      name,
      identity,
      timings: TIMINGS,
      log: pino({ level: 'silent' }),
      onStartedLeading: () => calls.push('started'),
      onStoppedLeading: () => void calls.push('stopped'),
    });
    const made = { election, calls, identity };
    elections.push(made);
    election.start();
    return made;
  };

  before(async () => {
    await createNamespace(plane(), namespace);
  });
  after(async () => {
    await Promise.all(elections.map((e) => e.election.stop()));
    await deleteNamespaces(plane(), [namespace]);
  });

  it('four candidates race for an absent Lease: one leads, the API server\'s Lease names it; on stop it is given up and another leads at once', async () => {
    const all = ['a', 'b', 'c', 'd'].map((identity) => candidate(identity));
    const leader = await eventually('a leader', async () => all.find((c) => c.election.isLeader), 20_000, 50);
    const lease = await leases().readNamespacedLease({ name: 'rollout', namespace });
    assert.equal(lease.spec?.holderIdentity, leader.identity);
    assert.equal(lease.spec?.leaseDurationSeconds, 4);
    assert.equal(all.filter((c) => c.election.isLeader).length, 1);
    await leader.election.stop();
    assert.deepEqual(leader.calls, ['started', 'stopped']);
    const given = await leases().readNamespacedLease({ name: 'rollout', namespace });
    assert.equal(given.spec?.holderIdentity, undefined, 'the holder is emptied on stop');
    const next = await eventually('another leader', async () => all.find((c) => c !== leader && c.election.isLeader), 20_000, 50);
    const taken = await leases().readNamespacedLease({ name: 'rollout', namespace });
    assert.equal(taken.spec?.holderIdentity, next.identity);
    assert.equal(taken.spec?.leaseTransitions, 1);
  });

  it('a holder written by someone else: the leader sees it at its next renewal and stops leading; nobody takes it before it expires', async () => {
    const only = candidate('only', 'other');
    await eventually('it leads', async () => (only.election.isLeader ? true : undefined), 20_000, 50);
    const now = new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
    await leases().patchNamespacedLease({ name: 'other', namespace, body: { spec: { holderIdentity: 'intruder', renewTime: now, acquireTime: now, leaseDurationSeconds: 3600 } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    await eventually('it stops leading', async () => (only.calls.includes('stopped') ? true : undefined), 20_000, 50);
    assert.equal(only.election.isLeader, false);
    assert.equal(only.election.holder, 'intruder');
    assert.equal((await leases().readNamespacedLease({ name: 'other', namespace })).spec?.holderIdentity, 'intruder', 'the intruder\'s hour-long Lease is respected');
  });
});
