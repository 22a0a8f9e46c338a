import type { KubeConfig } from '@kubernetes/client-node';
import { ownerKey } from '../fleet/fleet-report.js';
import { asWorkloadObject } from '../fleet/restart-plan.js';
import { objectAt, stringAt, type JsonObject } from '../injection/index.js';
import { listAllPages } from './api/index.js';

export interface AppsWorkloadRef {
  readonly namespace: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

const RESOURCES: Readonly<Record<string, string>> = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' };

/**
 * The outdated apps/v1 workloads as they are now (strategy, rollout, Pod
 * template), keyed by `ownerKey`; absent when deleted meanwhile. Each kind
 * with a candidate is listed once for the scope, in pages, as the owners are:
 * a thousand outdated Deployments cost a few requests, not a thousand. Plain
 * JSON, so no field of a newer API server is dropped on the way; a list that
 * outlives the API server's history goes on from the token its 410 offers
 * (listAllPages), and ONINCONSISTENT is told.
 */
export async function readWorkloadObjects(
  kubeConfig: KubeConfig,
  scope: { readonly namespace: string | undefined; readonly pageSize: number },
  candidates: readonly AppsWorkloadRef[],
  onInconsistent: (what: string) => void,
): Promise<Map<string, JsonObject>> {
  const wanted = new Set(candidates.map((workload) => ownerKey(workload.namespace, workload)));
  const objects = new Map<string, JsonObject>();
  for (const kind of new Set(candidates.map((workload) => workload.kind))) {
    const resource = RESOURCES[kind];
    if (resource === undefined) continue;
    const what = `listing ${kind}s in ${scope.namespace === undefined ? 'all namespaces' : `namespace ${scope.namespace}`}`;
    // Each object is looked at as it arrives: only the wanted ones are kept, never the page.
    await listAllPages(kubeConfig, what, { prefix: '/apis/apps/v1', resource, namespace: scope.namespace, pageSize: scope.pageSize }, (item) => {
      const object = asWorkloadObject(item);
      const meta = objectAt(object, 'metadata');
      const key = ownerKey(stringAt(meta, 'namespace') ?? '', { apiVersion: 'apps/v1', kind, name: stringAt(meta, 'name') ?? '' });
      if (object !== undefined && wanted.has(key)) objects.set(key, object);
    }, () => onInconsistent(what));
  }
  return objects;
}
