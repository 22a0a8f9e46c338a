/** Lists read in pages of `limit`, joined by `continue` tokens, each item handed on as it arrives. */
import type { KubeConfig } from '@kubernetes/client-node';
import { ClusterError } from '../../errors.js';
import { isJsonObject, objectAt, stringAt, type JsonObject } from '../../injection/index.js';
import { describeKubeError, kubeErrorStatus, kubeErrorStatusBody } from './kube-errors.js';
import { kubeJsonList } from './kube-json.js';

/** A collection of objects: `/api/v1` and `pods`, `/apis/apps/v1` and `replicasets`. */
export interface Collection {
  readonly prefix: string;
  readonly resource: string;
}

export interface ListScope extends Collection {
  /** One namespace, or undefined for all. */
  readonly namespace: string | undefined;
  readonly pageSize: number;
  readonly labelSelector?: string | undefined;
  /** The Accept header: a metadata-only list, or the objects whole. */
  readonly accept?: string | undefined;
}

/** The path of one page: `limit`, the `continue` token, the label selector. */
function pagePath(scope: ListScope, token: string | undefined): string {
  const where = scope.namespace === undefined ? '' : `/namespaces/${encodeURIComponent(scope.namespace)}`;
  const query = new URLSearchParams({ limit: String(scope.pageSize) });
  if (token !== undefined) query.set('continue', token);
  if (scope.labelSelector !== undefined) query.set('labelSelector', scope.labelSelector);
  return `${scope.prefix}${where}/${scope.resource}?${query.toString()}`;
}

/**
 * Follows `continue` tokens until the list is whole, handing each item to
 * `each` as it arrives (kubeJsonList: neither pages nor whole objects are
 * kept). A list slower than the API server's history
 * (etcd compacts every 5 minutes) gets 410 Gone for its next page; the Status
 * then carries a token that goes on from where it stopped, without the
 * snapshot: objects changed meanwhile may be missed or seen in their new
 * state, but none twice. Better than starting 50,000 Pods over, which could
 * expire again; `onInconsistent` lets the caller say so.
 */
export async function listAllPages(
  kubeConfig: KubeConfig,
  what: string,
  scope: ListScope,
  each: (item: JsonObject) => void,
  onInconsistent: () => void,
): Promise<void> {
  let token: string | undefined;
  do {
    let rest: JsonObject | undefined;
    try {
      const list = await kubeJsonList(kubeConfig, { path: pagePath(scope, token), ...(scope.accept === undefined ? {} : { accept: scope.accept }) }, (item) => {
        if (isJsonObject(item)) each(item);
      });
      rest = isJsonObject(list) ? list : undefined;
    } catch (error) {
      const resume = kubeErrorStatusBody(error)?.metadata?.continue;
      if (token !== undefined && kubeErrorStatus(error) === 410 && typeof resume === 'string' && resume !== '') {
        if (resume === token) throw new ClusterError(`${what}: the API server expired the list and offered the same token again`, { cause: error });
        token = resume;
        onInconsistent();
        continue;
      }
      throw new ClusterError(`${what}: ${describeKubeError(error)}`, { cause: error });
    }
    token = stringAt(objectAt(rest, 'metadata'), 'continue') || undefined;
  } while (token !== undefined);
}
