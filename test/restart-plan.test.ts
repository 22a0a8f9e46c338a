import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judgeWorkload, NotRestartedWhy } from '../src/fleet/restart-plan.js';
import type { JsonObject } from '../src/injection/index.js';

/** A workload object as the API server returns it: generation observed unless said otherwise. */
function object(spec: JsonObject, status: JsonObject, generation = 4): JsonObject {
  return { metadata: { name: 'w', generation }, spec: { template: { metadata: {}, spec: {} }, ...spec }, status: { observedGeneration: generation, ...status } };
}

describe('restart plan: what --restart does with an outdated apps/v1 workload', () => {
  const cases: [string, string, JsonObject | undefined, string][] = [
    ['a settled Deployment: restart', 'Deployment', object({ replicas: 3 }, { replicas: 3, updatedReplicas: 3 }), 'restart'],
    ['a Deployment with replicas defaulted to 1, settled', 'Deployment', object({}, { replicas: 1, updatedReplicas: 1 }), 'restart'],
    ['a Deployment scaled to 0: restart (nothing rolls, nothing to reset)', 'Deployment', object({ replicas: 0 }, {}), 'restart'],
    ['a Deployment replacing its Pods', 'Deployment', object({ replicas: 3 }, { replicas: 4, updatedReplicas: 1 }), 'rollout in progress: 1 of 3 Pods updated'],
    ['a Deployment whose old Pods are still there', 'Deployment', object({ replicas: 2 }, { replicas: 3, updatedReplicas: 2 }), 'rollout in progress: 1 old Pod still running'],
    ['a Deployment just changed, not yet seen by its controller', 'Deployment', object({ replicas: 2 }, { replicas: 2, updatedReplicas: 2, observedGeneration: 3 }), 'rollout in progress: the controller has not yet acted on generation 4'],
    ['a StatefulSet rolling', 'StatefulSet', object({ replicas: 3 }, { updatedReplicas: 2 }), 'rollout in progress: 2 of 3 Pods updated'],
    ['a StatefulSet with a partition, done up to it', 'StatefulSet', object({ replicas: 3, updateStrategy: { type: 'RollingUpdate', rollingUpdate: { partition: 2 } } }, { updatedReplicas: 1 }), 'restart'],
    ['a StatefulSet OnDelete', 'StatefulSet', object({ replicas: 1, updateStrategy: { type: 'OnDelete' } }, { updatedReplicas: 1 }), `by hand: ${NotRestartedWhy.onDelete}`],
    ['a DaemonSet OnDelete', 'DaemonSet', object({ updateStrategy: { type: 'OnDelete' } }, { desiredNumberScheduled: 2, updatedNumberScheduled: 2 }), `by hand: ${NotRestartedWhy.onDelete}`],
    ['a DaemonSet rolling', 'DaemonSet', object({}, { desiredNumberScheduled: 5, updatedNumberScheduled: 3 }), 'rollout in progress: 3 of 5 Pods updated'],
    ['a DaemonSet settled', 'DaemonSet', object({}, { desiredNumberScheduled: 5, updatedNumberScheduled: 5 }), 'restart'],
    ['a Deployment OnDelete is not a thing: its strategy is not looked at', 'Deployment', object({ replicas: 1, updateStrategy: { type: 'OnDelete' } }, { replicas: 1, updatedReplicas: 1 }), 'restart'],
    ['gone since the Pods were listed', 'Deployment', undefined, `by hand: ${NotRestartedWhy.notFound}`],
    [
      'a Deployment whose Pod template carries a copied status (every Pod inherits it and stays uninjected)',
      'Deployment',
      object({ replicas: 1, template: { metadata: { annotations: { 'envoy-injector.io/status': '{"template":"config"}' } }, spec: {} } }, { replicas: 1, updatedReplicas: 1 }),
      `by hand: ${NotRestartedWhy.copiedStatus}`,
    ],
    [
      'a Deployment whose Pod template carries a copied injected label (the API server never sends its Pods to the injector)',
      'Deployment',
      object({ replicas: 1, template: { metadata: { labels: { app: 'web', 'envoy-injector.io/injected': 'true' } }, spec: {} } }, { replicas: 1, updatedReplicas: 1 }),
      `by hand: ${NotRestartedWhy.copiedInjectedLabel}`,
    ],
    ['no generation nor status (never reported on): restart', 'Deployment', { metadata: { name: 'w' }, spec: {} }, 'restart'],
  ];
  for (const [title, kind, workload, expected] of cases) {
    it(title, () => {
      const verdict = judgeWorkload(kind, workload);
      const seen = verdict.restart ? 'restart' : verdict.why === NotRestartedWhy.rolloutInProgress ? `rollout in progress: ${verdict.detail ?? ''}` : `by hand: ${verdict.why}`;
      assert.equal(seen, expected);
    });
  }
});
