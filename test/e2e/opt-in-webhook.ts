/**
 * A second mutating webhook, as another tool in a cluster would run one: it
 * opts Pods in to injection by adding `envoy-injector.io/inject: "true"`
 * (the shape of Linkerd's reinvocation test, written for this project). A
 * tiny HTTPS server in the test process, registered with a `url` clientConfig
 * in a MutatingWebhookConfiguration whose name sorts after ours: the API
 * server calls webhooks in the order of their configurations' names, so it
 * runs after the injector, and the injector sees the annotation only if it
 * is reinvoked.
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { AdmissionregistrationV1Api } from '@kubernetes/client-node';
import { makeCa, makeServingCertificate } from '../../src/tls/certificates.js';
import type { ControlPlane } from './control-plane.js';

export const OPT_IN_ANNOTATION = 'envoy-injector.io/inject';

export interface OptInWebhook {
  /** The MutatingWebhookConfiguration's name (and its one webhook's: `<name>.test.envoy-injector.io`). */
  readonly name: string;
  readonly webhookName: string;
  /** Reviews answered so far. */
  readonly calls: () => number;
  stop(): Promise<void>;
}

export interface Review {
  request?: { uid?: string; object?: { metadata?: { annotations?: Record<string, string> }; spec?: { initContainers?: { name: string }[] } } };
}

/** What a second webhook does to a Pod: JSON Patch operations, or undefined for none. */
export type PatchOf = (review: Review) => readonly object[] | undefined;

/** Opts the Pod in: the annotation added (no patch when it is there already). */
export const optInPatch: PatchOf = (review) => {
  const annotations = review.request?.object?.metadata?.annotations;
  if (annotations?.[OPT_IN_ANNOTATION] === 'true') return undefined;
  return annotations === undefined
    ? [{ op: 'add', path: '/metadata/annotations', value: { [OPT_IN_ANNOTATION]: 'true' } }]
    : [{ op: 'add', path: `/metadata/annotations/${OPT_IN_ANNOTATION.replaceAll('~', '~0').replaceAll('/', '~1')}`, value: 'true' }];
};

function answer(review: Review, patchOf: PatchOf): unknown {
  const uid = review.request?.uid ?? '';
  const patch = patchOf(review);
  if (patch === undefined) return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true } };
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: { uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') },
  };
}

/**
 * Starts the webhook on 127.0.0.1 and registers it (as NAME, which must sort
 * after the injector's configuration) for Pod CREATEs in namespaces labeled
 * SELECTOR, `reinvocationPolicy: Never`, `failurePolicy: Fail`; what it does
 * to a Pod is PATCHOF's (by default, opting it in).
 */
export async function startOptInWebhook(plane: ControlPlane, name: string, selector: Record<string, string>, patchOf: PatchOf = optInPatch): Promise<OptInWebhook> {
  const ca = await makeCa({ commonName: `${name}-ca`, validDays: 1 });
  const serving = await makeServingCertificate({ ca, hosts: ['127.0.0.1'], validDays: 1 });
  let calls = 0;
  const server: Server = createServer({ cert: serving.cert, key: serving.key }, (req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      calls += 1;
      const text = JSON.stringify(answer(JSON.parse(body) as Review, patchOf));
      res.writeHead(200, { 'content-type': 'application/json' }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const admission = plane.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const webhookName = `${name}.test.envoy-injector.io`;
  await admission.createMutatingWebhookConfiguration({
    body: {
      metadata: { name },
      webhooks: [
        {
          name: webhookName,
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          failurePolicy: 'Fail',
          reinvocationPolicy: 'Never',
          timeoutSeconds: 5,
          clientConfig: { url: `https://127.0.0.1:${port}/opt-in`, caBundle: Buffer.from(ca.cert).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
          namespaceSelector: { matchLabels: selector },
        },
      ],
    },
  });
  return {
    name,
    webhookName,
    calls: () => calls,
    stop: async () => {
      await admission.deleteMutatingWebhookConfiguration({ name }).catch(() => undefined);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}
