import { request, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

/** A failed call: the HTTP status (as `statusCode`, which kube-errors.ts reads) and the Status message. */
export class KubeRequestError extends Error {
  readonly statusCode: number;
  constructor(statusCode: number, message: string) {
    super(message);
    this.name = 'KubeRequestError';
    this.statusCode = statusCode;
  }
}

export interface KubeJsonRequest {
  readonly method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** `/apis/group/version/...`, with its query string. */
  readonly path: string;
  readonly body?: unknown;
  readonly contentType?: string;
  /** Milliseconds (default 10 s): a hung API server is an error, not a stuck controller. */
  readonly timeoutMs?: number;
}

/**
 * One JSON call to the API server with the kubeconfig's credentials, for APIs
 * newer than client-node's generated classes (MutatingAdmissionPolicy v1 is
 * served from Kubernetes 1.36; client-node 1.4 knows only v1beta1). Resolves
 * with the parsed body of a 2xx answer; rejects with KubeRequestError otherwise.
 */
export async function kubeJson(kubeConfig: KubeConfig, call: KubeJsonRequest): Promise<unknown> {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('kubeconfig: no current cluster');
  const url = new URL(call.path, cluster.server);
  const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
  const options: RequestOptions = {
    method: call.method,
    headers: {
      accept: 'application/json',
      ...(payload === undefined ? {} : { 'content-type': call.contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) }),
    },
  };
  await kubeConfig.applyToHTTPSOptions(options);
  const timeoutMs = call.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const sent = request(url, options, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        const status = response.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = text === '' ? undefined : JSON.parse(text);
        } catch {
          body = undefined;
        }
        if (status >= 200 && status < 300) return resolve(body);
        const message = (body as { message?: unknown } | undefined)?.message;
        reject(new KubeRequestError(status, typeof message === 'string' && message !== '' ? message : `${call.method} ${url.pathname}: ${text.slice(0, 200) || 'no body'}`));
      });
    });
    sent.setTimeout(timeoutMs, () => sent.destroy(new Error(`${call.method} ${url.pathname}: no answer within ${timeoutMs} ms`)));
    sent.on('error', reject);
    sent.end(payload);
  });
}
