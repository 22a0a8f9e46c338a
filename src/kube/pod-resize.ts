import { Agent } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { pendingResize, type PodResizePlan } from '../fleet/resize-plan.js';
import { Annotations, isJsonObject, jsonPointer } from '../injection/index.js';
import { kubeJson, KubeRequestError } from './api/index.js';

/**
 * A Pod's sidecars resized in place (docs/fleet.md, "Resize in place"): the
 * plan's patch through the `resize` subresource, then the status annotation
 * rewritten so that the Pod counts as current. The step `status --resize`
 * and the rollout controller take for each Pod whose plan is `resize`.
 */

export interface PodRef {
  readonly namespace: string;
  readonly name: string;
}

export type PodResizeOutcome =
  /** Resized and recorded; PENDING when the answer already says the kubelet has not applied it. */
  | { readonly outcome: 'resized'; readonly pending: Extract<PodResizePlan, { kind: 'pending' }> | undefined }
  /** The API server refused the resize (422: a QoS change, a field it cannot change in place; 404 on 1.28: no subresource): leave it to a restart. */
  | { readonly outcome: 'refused'; readonly why: string }
  /** The Pod is gone, or its status annotation changed since it was read: nothing written, run again. */
  | { readonly outcome: 'skipped'; readonly why: string };

/** Pods resized at once by `status --resize` (each two requests in a row): bounded, so a fleet does not flood the API server. */
export const RESIZE_CONCURRENCY = 8;

const STRATEGIC_MERGE = 'application/strategic-merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';

function podPath(pod: PodRef, subresource = ''): string {
  return `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}${subresource}`;
}

/** A keep-alive agent for a run of resizes (AGENT of resizePod): one TLS connection per Pod resized at once, not two per Pod. Destroy it after. */
export function resizeAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: RESIZE_CONCURRENCY });
}

/** Whether the API server serves `pods/resize` (1.33+; 1.28 does not: there, only a restart brings a Pod current). */
export async function resizeServed(kubeConfig: KubeConfig): Promise<boolean> {
  const list = await kubeJson(kubeConfig, { method: 'GET', path: '/api/v1' });
  const resources = isJsonObject(list) && Array.isArray(list['resources']) ? list['resources'] : [];
  return resources.some((resource) => isJsonObject(resource) && resource['name'] === 'pods/resize');
}

/**
 * Sends PLAN's resize, then its status annotation, guarded by a JSON patch
 * `test` of the status it was planned from. Rejects (KubeRequestError) on
 * an answer it cannot classify (a permission, the API server away).
 */
export async function resizePod(kubeConfig: KubeConfig, pod: PodRef, plan: Extract<PodResizePlan, { kind: 'resize' }>, agent?: Agent): Promise<PodResizeOutcome> {
  let answer: unknown;
  if (plan.body !== undefined) {
    try {
      answer = await kubeJson(kubeConfig, { method: 'PATCH', path: podPath(pod, '/resize'), contentType: STRATEGIC_MERGE, body: plan.body, agent });
    } catch (error) {
      if (!(error instanceof KubeRequestError)) throw error;
      const message = statusMessage(error);
      if (error.statusCode === 422) return { outcome: 'refused', why: `the API server refused the resize: ${message}` };
      // 1.36 admits a resize only within the node's allocatable ("node didn't have enough allocatable resources"); a 403 of RBAC stays an error.
      if (error.statusCode === 403 && /enough allocatable/.test(message)) return { outcome: 'refused', why: `the API server refused the resize: ${message}` };
      if (error.statusCode === 404 && /could not find the requested resource/.test(message)) return { outcome: 'refused', why: 'the API server has no resize subresource (before 1.33)' };
      if (error.statusCode === 404) return { outcome: 'skipped', why: 'the Pod is gone' };
      throw error;
    }
  }
  const path = jsonPointer('metadata', 'annotations', Annotations.status);
  try {
    const recorded = await kubeJson(kubeConfig, {
      method: 'PATCH',
      path: podPath(pod),
      contentType: JSON_PATCH,
      body: [{ op: 'test', path, value: plan.previousStatus }, { op: 'replace', path, value: plan.status }],
      agent,
    });
    answer = recorded;
  } catch (error) {
    if (!(error instanceof KubeRequestError)) throw error;
    // A failed `test` is 422; a Pod gone 404: either way the next run reads it again.
    if (error.statusCode === 422 || error.statusCode === 409) return { outcome: 'skipped', why: `its status annotation changed since it was read: ${statusMessage(error)}` };
    if (error.statusCode === 404) return { outcome: 'skipped', why: 'the Pod is gone' };
    throw error;
  }
  return { outcome: 'resized', pending: isJsonObject(answer) ? pendingResize(answer) : undefined };
}

function statusMessage(error: KubeRequestError): string {
  const message = isJsonObject(error.body) ? error.body['message'] : undefined;
  return typeof message === 'string' ? message : error.message.split('\n')[0] ?? '';
}
