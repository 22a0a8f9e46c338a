import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterError } from '../errors.js';
import { ownerKey } from '../fleet/fleet-report.js';
import { asWorkloadObject } from '../fleet/restart-plan.js';
import { objectAt, stringAt, type JsonObject } from '../injection/index.js';
import { kubeJsonList } from './kube-json.js';
import { describeKubeError } from './kube-errors.js';

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
 * JSON, so no field of a newer API server is dropped on the way.
 */
export async function readWorkloadObjects(
  kubeConfig: KubeConfig,
  scope: { readonly namespace: string | undefined; readonly pageSize: number },
  candidates: readonly AppsWorkloadRef[],
): Promise<Map<string, JsonObject>> {
  const wanted = new Set(candidates.map((workload) => ownerKey(workload.namespace, workload)));
  const objects = new Map<string, JsonObject>();
  for (const kind of new Set(candidates.map((workload) => workload.kind))) {
    const resource = RESOURCES[kind];
    if (resource === undefined) continue;
    const base = `/apis/apps/v1/${scope.namespace === undefined ? '' : `namespaces/${encodeURIComponent(scope.namespace)}/`}${resource}`;
    let token: string | undefined;
    do {
      const query = new URLSearchParams({ limit: String(scope.pageSize), ...(token === undefined ? {} : { continue: token }) });
      let rest: JsonObject | undefined;
      try {
        // Each object is looked at as it arrives: only the wanted ones are kept, never the page.
        rest = asWorkloadObject(await kubeJsonList(kubeConfig, { path: `${base}?${query.toString()}` }, (item) => {
          const object = asWorkloadObject(item);
          const meta = objectAt(object, 'metadata');
          const key = ownerKey(stringAt(meta, 'namespace') ?? '', { apiVersion: 'apps/v1', kind, name: stringAt(meta, 'name') ?? '' });
          if (object !== undefined && wanted.has(key)) objects.set(key, object);
        }));
      } catch (error) {
        throw new ClusterError(`listing ${kind}s in ${scope.namespace === undefined ? 'all namespaces' : `namespace ${scope.namespace}`}: ${describeKubeError(error)}`, { cause: error });
      }
      token = stringAt(objectAt(rest, 'metadata'), 'continue') || undefined;
    } while (token !== undefined);
  }
  return objects;
}
