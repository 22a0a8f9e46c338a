import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { ApiException, CoreV1Api, PolicyV1Api, setHeaderOptions, type V1Pod } from '@kubernetes/client-node';
import { eventually, helmInstall, uniqueName, type Release } from './cluster.js';
import { selectedVersions, startControlPlane, type OwnedControlPlane } from './control-plane.js';

/**
 * What the eviction API (what `kubectl drain` calls) decides under the
 * chart's PodDisruptionBudget (issue 42), on a real API server with
 * kube-controller-manager's `disruption` controller computing the budget.
 * There is no kubelet: the chart's Deployment makes its Pods, the test binds
 * them to a node and marks them Ready through the status subresource, as a
 * kubelet would; an evicted Pod then stays terminating, and its replacement
 * Pending until the test binds it (what a drain of the only node leaves it:
 * the node is cordoned) and marks it Ready (what another node would do).
 * A control plane of its own (the `disruption` controller); test/e2e/run.ts
 * runs this file beside the files that share a cluster.
 */
type Outcome = 'evicted' | 'refused';

const BUDGETS: readonly (readonly [string, Record<string, unknown>])[] = [
  ['minAvailable: 1, the budget before', { podDisruptionBudget: { minAvailable: 1 } }],
  ['maxUnavailable: 1, the default', {}],
];

for (const version of selectedVersions()) {
  describe(`the chart's PodDisruptionBudget and the eviction API (Kubernetes ${version})`, () => {
    let plane: OwnedControlPlane | undefined;
    const cluster = (): OwnedControlPlane => {
      if (plane === undefined) throw new Error(`the Kubernetes ${version} control plane did not start (see the before hook's error)`);
      return plane;
    };
    const core = (): CoreV1Api => cluster().kubeConfig.makeApiClient(CoreV1Api);

    before(async () => {
      plane = await startControlPlane(version, { moreControllers: ['disruption'] });
    });
    after(async () => {
      await plane?.stop();
    });

    /** The chart installed with REPLICAS injector Pods, each on NODE and Ready, and its budget computed. */
    const install = async (values: Record<string, unknown>, replicas: number): Promise<{ namespace: string; selector: string; pods: string[] }> => {
      const release = await helmInstall(cluster(), { name: uniqueName('budget'), namespace: uniqueName('budget-system') }, { ...values, replicaCount: replicas });
      const deployment = release.manifests.find((manifest) => manifest.kind === 'Deployment');
      const matchLabels = (deployment?.['spec'] as { selector: { matchLabels: Record<string, string> } } | undefined)?.selector.matchLabels ?? {};
      const selector = Object.entries(matchLabels).map(([key, value]) => `${key}=${value}`).join(',');
      const pods = await eventually(`${replicas} injector Pods made by the Deployment`, async () => {
        const list = await core().listNamespacedPod({ namespace: release.namespace, labelSelector: selector });
        return list.items.length === replicas ? list.items.map(nameOf) : undefined;
      }, 60_000, 200);
      for (const pod of pods) await runOn(release.namespace, pod, 'node-1');
      await settled(release.namespace, { healthy: replicas });
      return { namespace: release.namespace, selector, pods };
    };

    /** Binds POD to NODE and reports it Running and Ready, as its kubelet would. */
    const runOn = async (namespace: string, pod: string, node: string): Promise<void> => {
      await core().createNamespacedPodBinding({ name: pod, namespace, body: { metadata: { name: pod }, target: { kind: 'Node', name: node } } });
      const now = new Date();
      const conditions = ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: now }));
      await core().patchNamespacedPodStatus({ name: pod, namespace, body: { status: { phase: 'Running', conditions } } }, setHeaderOptions('Content-Type', 'application/merge-patch+json'));
    };

    /** Waits for the disruption controller to count HEALTHY Ready Pods; returns the evictions it allows. */
    const settled = async (namespace: string, { healthy }: { healthy: number }): Promise<number> => {
      const policy = cluster().kubeConfig.makeApiClient(PolicyV1Api);
      return eventually(`the budget computed with ${healthy} healthy Pods`, async () => {
        const [budget] = (await policy.listNamespacedPodDisruptionBudget({ namespace })).items;
        const status = budget?.status;
        return status !== undefined && status.observedGeneration === budget?.metadata?.generation && status.currentHealthy === healthy ? status.disruptionsAllowed : undefined;
      }, 60_000, 200);
    };

    const evict = async (namespace: string, pod: string): Promise<Outcome> => {
      try {
        await core().createNamespacedPodEviction({ name: pod, namespace, body: { metadata: { name: pod, namespace } } });
        return 'evicted';
      } catch (error) {
        // 429 TooManyRequests: "Cannot evict pod as it would violate the pod's disruption budget"; kubectl drain retries it every 5 s.
        if (error instanceof ApiException && error.code === 429) return 'refused';
        throw error;
      }
    };

    /** The Pods of SELECTOR that are not being deleted. */
    const live = async (namespace: string, selector: string): Promise<V1Pod[]> =>
      (await core().listNamespacedPod({ namespace, labelSelector: selector })).items.filter((pod) => pod.metadata?.deletionTimestamp === undefined);

    for (const [label, values] of BUDGETS) {
      it(`${label}: of two evictions at once one passes; the other is refused while the replacement cannot run (a drain of the only node), and passes once it is Ready elsewhere`, async (t: TestContext) => {
        const { namespace, selector, pods } = await install(values, 2);
        const [first, second] = pods as [string, string];
        const atOnce = await Promise.all([evict(namespace, first), evict(namespace, second)]);
        assert.deepEqual([...atOnce].sort(), ['evicted', 'refused'], 'two evictions at once take one replica, never both');
        const left = atOnce[0] === 'evicted' ? second : first;

        // One node, cordoned: the evicted Pod's replacement stays Pending; one replica Ready.
        const replacement = await eventually('the replacement Pod', async () => (await live(namespace, selector)).map(nameOf).find((name) => !pods.includes(name)), 30_000, 200);
        assert.equal(await settled(namespace, { healthy: 1 }), 0);
        assert.equal(await evict(namespace, left), 'refused', 'the drain of the only node waits for ever');

        // Another node: the replacement runs there and is Ready; the last old replica may go.
        await runOn(namespace, replacement, 'node-2');
        const allowed = await settled(namespace, { healthy: 2 });
        assert.equal(await evict(namespace, left), 'evicted');
        t.diagnostic(`${label}: at once ${atOnce.join(', ')}; the second refused with 1 Ready and its replacement Pending; ${allowed} allowed once the replacement is Ready`);
      });
    }

    it('four replicas (replicaCount, or an HPA that scaled up), four evictions at once: minAvailable: 1 lets three go, maxUnavailable: 1 one', async (t: TestContext) => {
      const outcomes: string[] = [];
      for (const [label, values] of BUDGETS) {
        const { namespace, pods } = await install(values, 4);
        const results = await Promise.all(pods.map((pod) => evict(namespace, pod)));
        const evicted = results.filter((result) => result === 'evicted').length;
        outcomes.push(`${label}: ${evicted} of 4 evicted`);
        assert.equal(evicted, label.startsWith('minAvailable') ? 3 : 1, label);
      }
      t.diagnostic(outcomes.join('; '));
    });

    // Last: the Nodes it makes would take the budget from the installs above.
    it('one Node: helm install makes no budget (a drain of that node could never finish); a second Node, and the upgrade makes it; skipOnSingleNode: false keeps it', async (t: TestContext) => {
      const budgets = async (namespace: string): Promise<number> => (await cluster().kubeConfig.makeApiClient(PolicyV1Api).listNamespacedPodDisruptionBudget({ namespace })).items.length;
      const kinds = (release: Release): string[] => release.manifests.map((manifest) => manifest.kind);
      const nodes = ['budget-node-1', 'budget-node-2'] as const;
      try {
        await core().createNode({ body: { metadata: { name: nodes[0] } } });
        const release = await helmInstall(cluster(), { name: uniqueName('budget'), namespace: uniqueName('budget-system') });
        assert.ok(!kinds(release).includes('PodDisruptionBudget'), 'no budget rendered on a one-Node cluster');
        assert.equal(await budgets(release.namespace), 0);
        const kept = await helmInstall(cluster(), { name: uniqueName('budget'), namespace: uniqueName('budget-system') }, { podDisruptionBudget: { skipOnSingleNode: false } });
        assert.equal(await budgets(kept.namespace), 1, 'skipOnSingleNode: false keeps the budget');

        await core().createNode({ body: { metadata: { name: nodes[1] } } });
        const upgraded = await helmInstall(cluster(), release, {}, { upgrade: true });
        assert.ok(kinds(upgraded).includes('PodDisruptionBudget'), 'the upgrade on two Nodes renders the budget');
        assert.equal(await budgets(release.namespace), 1);
        t.diagnostic('1 Node: no budget; skipOnSingleNode: false: a budget; 2 Nodes after an upgrade: a budget');
      } finally {
        for (const name of nodes) await core().deleteNode({ name }).catch(() => undefined);
      }
    });
  });
}

function nameOf(pod: V1Pod): string {
  const name = pod.metadata?.name;
  if (name === undefined) throw new Error('a Pod without a name');
  return name;
}
