import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { parseTemplateData, type TemplateSet } from '../src/injection/index.js';
import { RolloutController, type RolloutRecorder } from '../src/kube/rollout-controller.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { addPod, injectedAnnotations, LIVE, OLD } from './helpers/fleet-fixture.js';
import { until } from './helpers/injector-harness.js';

const INJECTOR_NAMESPACE = 'envoy-injector-system';
const LEASE = 'envoy-injector-rollout';
const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

type Outcome = Parameters<RolloutRecorder['rolloutWorkload']>[0];

/** A recorder that keeps what the metrics would show. */
function recorder() {
  const seen = { leading: false, stopped: false, inFlight: 0, outcomes: [] as Outcome[] };
  const recorded: RolloutRecorder = {
    rolloutLeading: (leading) => void (seen.leading = leading),
    rolloutWorkload: (outcome) => void seen.outcomes.push(outcome),
    rolloutStopped: (stopped) => void (seen.stopped = stopped),
    rolloutInFlight: (count) => void (seen.inFlight = count),
  };
  return { seen, recorded };
}

describe('the rollout controller against a fake API server (the test plays the Deployment controller)', () => {
  let fake: FakeApiServer;
  let kubeConfig: KubeConfig;
  let templates: TemplateSet;
  const controllers: RolloutController[] = [];

  /** A settled Deployment of two Pods injected with OLD (outdated against LIVE), through its ReplicaSet. */
  const addDeployment = (namespace: string, name: string): void => {
    fake.apply('deployments', { metadata: { name, namespace, generation: 1, uid: `uid-${name}` }, spec: { replicas: 2, template: { metadata: { annotations: {} } } }, status: settledStatus(1) });
    fake.apply('replicasets', { metadata: { name: `${name}-1`, namespace, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name, uid: `uid-${name}`, controller: true }] } });
    for (const index of [0, 1]) addPod(fake, namespace, `${name}-${index}`, { owner: { kind: 'ReplicaSet', name: `${name}-1` }, annotations: injectedAnnotations(OLD) });
  };
  const restarted = (): string[] =>
    fake.list('deployments').filter((d) => ((d['spec'] as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations[RESTARTED_AT] ?? '') !== '').map((d) => `${d.metadata.namespace}/${d.metadata.name}`).sort();
  /** What the Deployment controller and the kubelet would do after a restart: a new generation, new Pods (current), all Ready, or NOT ready. */
  const roll = (namespace: string, name: string, ready = true): void => {
    const deployment = fake.get('deployments', namespace, name);
    assert.ok(deployment !== undefined);
    const generation = (deployment.metadata['generation'] as number) + 1;
    fake.apply('deployments', { ...deployment, metadata: { ...deployment.metadata, generation }, status: ready ? settledStatus(generation) : { ...settledStatus(generation), availableReplicas: 0, readyReplicas: 0 } });
    for (const index of [0, 1]) addPod(fake, namespace, `${name}-${index}`, { owner: { kind: 'ReplicaSet', name: `${name}-1` }, annotations: injectedAnnotations(LIVE) });
  };
  const start = (options: { maxConcurrent?: number; readyTimeoutMs?: number; identity?: string } = {}) => {
    const { seen, recorded } = recorder();
    const controller = new RolloutController({
      kubeConfig,
      namespace: INJECTOR_NAMESPACE,
      leaseName: LEASE,
      identity: options.identity ?? 'replica-1',
      settings: { maxConcurrent: options.maxConcurrent ?? 2, readyTimeoutMs: options.readyTimeoutMs ?? 60_000 },
      decision: { injectorNamespace: INJECTOR_NAMESPACE },
      templates: () => templates,
      namespaceMetadata: (namespace) => ({ labels: {}, annotations: namespace === 'paused' ? { 'envoy-injector.io/rollout': 'paused' } : undefined }),
      recorder: recorded,
      log: pino({ level: 'silent' }),
      backoff: { initialMs: 50, maxMs: 500 },
      leaseTimings: { leaseDurationMs: 1_500, renewDeadlineMs: 1_000, retryPeriodMs: 200 },
      debounceMs: 20,
      tickMs: 100,
    });
    controllers.push(controller);
    controller.start();
    return { controller, seen };
  };

  beforeEach(async () => {
    fake = await FakeApiServer.start();
    kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
    templates = LIVE;
    for (const namespace of ['a', 'b', 'c', 'paused', INJECTOR_NAMESPACE]) fake.apply('namespaces', { metadata: { name: namespace } });
  });
  afterEach(async () => {
    await Promise.all(controllers.splice(0).map((controller) => controller.stop()));
    await fake.close();
  });

  it('two replicas: only the leader restarts; one workload a namespace, at most maxConcurrent, each next one once the last is current and Ready', async () => {
    for (const [namespace, name] of [['a', 'one'], ['a', 'two'], ['b', 'one'], ['c', 'one'], ['paused', 'web']] as const) addDeployment(namespace, name);
    const first = start({ identity: 'replica-1' });
    const second = start({ identity: 'replica-2' });
    await until('two restarts', () => (restarted().length === 2 ? true : undefined));
    assert.deepEqual(restarted(), ['a/one', 'b/one']);
    assert.equal([first, second].filter((r) => r.controller.isLeader).length, 1);
    const leader = first.controller.isLeader ? first : second;
    const follower = leader === first ? second : first;
    assert.deepEqual(follower.seen.outcomes, [], 'the follower acts on nothing');
    // a/one rolls but its Pods are not Ready: a/two waits, and so does c/one (the budget).
    roll('a', 'one', false);
    await until('the plan sees a/one rolling', () => (leader.seen.inFlight === 2 ? true : undefined));
    await until('a few more plans', () => (fake.requests.filter((r) => r.path.includes('/leases/')).length > 30 ? true : undefined));
    assert.deepEqual(restarted(), ['a/one', 'b/one']);
    roll('a', 'one');
    await until('a/two restarted once a/one is Ready', () => (restarted().includes('a/two') ? true : undefined));
    assert.deepEqual(restarted(), ['a/one', 'a/two', 'b/one'], 'c/one still waits for a slot: b/one has not rolled');
    roll('b', 'one');
    await until('c/one restarted', () => (restarted().includes('c/one') ? true : undefined));
    assert.ok(!restarted().includes('paused/web'), 'the paused namespace is left alone');
    await until('four restarts counted', () => (leader.seen.outcomes.filter((o) => o === 'restarted').length === 4 ? true : undefined));
  });

  it('a refused restart (403) is tried again only after a backoff, never at every plan', async () => {
    addDeployment('a', 'one');
    const patches = () => fake.requests.filter((r) => r.method === 'PATCH' && r.path === '/apis/apps/v1/namespaces/a/deployments/one');
    fake.failNext(1, 403, (path) => path === '/apis/apps/v1/namespaces/a/deployments/one');
    const only = start();
    await until('the refusal', () => (only.seen.outcomes.includes('error') ? true : undefined));
    const from = fake.requests.length;
    await until('thirty more renewals (each plan tick is 100 ms)', () => (fake.requests.slice(from).filter((r) => r.method === 'PATCH' && r.path.includes('/leases/')).length >= 30 ? true : undefined));
    assert.deepEqual(patches().map((r) => r.status), [403], 'one attempt, refused; not one a plan');
    assert.deepEqual(restarted(), []);
  });

  it('at rest (everything current), the leader makes no request but its Lease renewals', async () => {
    addDeployment('a', 'one');
    const only = start();
    await until('a/one restarted', () => (restarted().includes('a/one') ? true : undefined));
    roll('a', 'one');
    await until('nothing in flight', () => (only.seen.outcomes.includes('settled') ? true : undefined));
    const from = fake.requests.length;
    await until('twenty renewals', () => (fake.requests.slice(from).filter((r) => r.method === 'PATCH' && r.path.includes('/leases/')).length >= 20 ? true : undefined));
    const other = fake.requests.slice(from).filter((r) => !r.path.includes('/leases/'));
    assert.deepEqual(other.map((r) => `${r.method} ${r.path}`), [], 'no list, get or patch of the fleet at rest: the watches serve the plans');
  });

  it('a rollout not Ready within the ready timeout: a RolloutFailed Warning, the stop kept in the Lease, nothing more started until the templates change', async () => {
    for (const [namespace, name] of [['a', 'one'], ['b', 'one']] as const) addDeployment(namespace, name);
    const only = start({ maxConcurrent: 1, readyTimeoutMs: 1_000 });
    await until('a/one restarted', () => (restarted().includes('a/one') ? true : undefined));
    roll('a', 'one', false);
    const event = await until('the Warning Event', () => fake.list('events')[0]);
    assert.equal(event['reason'], 'RolloutFailed');
    assert.equal(event['type'], 'Warning');
    assert.deepEqual(event['regarding'], { apiVersion: 'apps/v1', kind: 'Deployment', name: 'one', namespace: 'a', uid: fake.get('deployments', 'a', 'one')?.metadata['uid'] });
    assert.match(String(event['note']), /not settled 1 s after it started: 0 of 2 Pods available/);
    await until('the stop in the Lease', () => (fake.get('leases', INJECTOR_NAMESPACE, LEASE)?.metadata['annotations'] as Record<string, string> | undefined)?.['envoy-injector.io/rollout-stopped']);
    assert.equal(only.seen.stopped, true);
    assert.deepEqual(only.seen.outcomes, ['restarted', 'failed']);
    await until('a few more plans', () => (fake.requests.filter((r) => r.path.includes('/leases/')).length > 30 ? true : undefined));
    assert.deepEqual(restarted(), ['a/one'], 'b/one is not started while stopped');
    // A new template (the operator's fix): the stop is lifted and b/one goes next.
    templates = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v3.0.0"}]' });
    await until('b/one restarted after the templates changed', () => (restarted().includes('b/one') ? true : undefined));
    assert.equal(only.seen.stopped, false);
  });
});

function settledStatus(generation: number) {
  return { observedGeneration: generation, replicas: 2, updatedReplicas: 2, readyReplicas: 2, availableReplicas: 2 };
}
