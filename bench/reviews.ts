/** The AdmissionReviews the bench sends, all derived from the seed review the API server sends. */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { JsonObject } from '../src/injection/index.js';
import { largePod } from '../test/helpers/large-pod.js';

type Review = { request: JsonObject & { object: JsonObject & { metadata: JsonObject } } };

function seed(): Review {
  return JSON.parse(readFileSync(new URL('../examples/admission-review.json', import.meta.url), 'utf8')) as Review;
}

function annotations(review: Review): Record<string, string> {
  const metadata = review.request.object.metadata;
  metadata['annotations'] ??= {};
  return metadata['annotations'] as Record<string, string>;
}

/** The seed Pod, annotated inject "true": injected. */
export function seedReview(): Review {
  return seed();
}

/** The same review with `envoy-injector.io/inject: "false"`: skipped. */
export function skippedReview(): Review {
  const review = seed();
  annotations(review)['envoy-injector.io/inject'] = 'false';
  return review;
}

/** A ~1 MiB Pod (40 containers, 2,000 env vars, 200 volumes), annotated inject "true": injected. */
export function largeReview(): Review {
  const review = seed();
  const pod = largePod() as Review['request']['object'];
  review.request.object = pod;
  annotations(review)['envoy-injector.io/inject'] = 'true';
  delete review.request['name'];
  review.request['namespace'] = 'load';
  return review;
}

/**
 * `count` reviews as a ReplicaSet controller sends them when a Deployment is
 * scaled from 0: one Pod template, generateName only (no name), a distinct
 * uid per review.
 */
export function burstReviews(count: number): Review[] {
  const template = seed();
  delete template.request['name'];
  template.request['userInfo'] = { username: 'system:serviceaccount:kube-system:replicaset-controller', groups: ['system:serviceaccounts', 'system:authenticated'] };
  template.request['options'] = { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' };
  const metadata = template.request.object.metadata;
  delete metadata['name'];
  delete metadata['managedFields'];
  metadata['generateName'] = 'myapp-5d8f7c9b6-';
  metadata['labels'] = { app: 'myapp', 'pod-template-hash': '5d8f7c9b6' };
  metadata['ownerReferences'] = [
    { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'myapp-5d8f7c9b6', uid: randomUUID(), controller: true, blockOwnerDeletion: true },
  ];
  const text = JSON.stringify(template);
  return Array.from({ length: count }, () => {
    const review = JSON.parse(text) as Review;
    review.request['uid'] = randomUUID();
    return review;
  });
}
