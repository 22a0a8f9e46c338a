import type { KubeConfig } from '@kubernetes/client-node';
import { kubeJson, KubeRequestError } from './kube-json.js';

/**
 * One Pod deleted by its uid, never by its name alone (the CNI agent's
 * repair, docs/design.md §11, CNI mode): between the read that judged a Pod
 * and the DELETE, a StatefulSet may have made a new Pod of the same name, and
 * that one must live. The API server checks the uid (DeleteOptions'
 * `preconditions.uid`) and answers 409 Conflict when the Pod of that name is
 * another one.
 */

export interface PodIdentity {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** `deleted`: this Pod is being deleted; `gone`: no Pod of that name is left; `replaced`: the Pod of that name is another one (kept). */
export type PodDeleteOutcome = 'deleted' | 'gone' | 'replaced';

/** The DELETE's body: the uid as precondition. */
export function uidPreconditionBody(uid: string): { kind: 'DeleteOptions'; apiVersion: 'v1'; preconditions: { uid: string } } {
  return { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid } };
}

/** Deletes POD if the Pod of its name still has its uid; rejects (KubeRequestError) on any other failure, a refusal included. */
export async function deletePodByUid(kubeConfig: KubeConfig, pod: PodIdentity): Promise<PodDeleteOutcome> {
  if (pod.uid === '') throw new Error(`Pod ${pod.namespace}/${pod.name} has no uid: not deleted by name alone`);
  try {
    await kubeJson(kubeConfig, {
      method: 'DELETE',
      path: `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}`,
      body: uidPreconditionBody(pod.uid),
    });
    return 'deleted';
  } catch (error) {
    if (error instanceof KubeRequestError && error.statusCode === 404) return 'gone';
    // The only precondition sent is the uid: a Conflict says the name now holds another Pod ("Precondition failed: UID in precondition: ...").
    if (error instanceof KubeRequestError && error.statusCode === 409) return 'replaced';
    throw error;
  }
}
