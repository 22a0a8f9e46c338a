import type { IncomingMessage } from 'node:http';
import { request, type Agent, type RequestOptions } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { ListItemStream } from './list-items.js';

/** A failed call: the HTTP status (as `statusCode`, which kube-errors.ts reads) and the Status message. */
export class KubeRequestError extends Error {
  readonly statusCode: number;
  /** The answer's body, parsed (a Status), when it was JSON. */
  readonly body: unknown;
  constructor(statusCode: number, message: string, body?: unknown) {
    super(message);
    this.name = 'KubeRequestError';
    this.statusCode = statusCode;
    this.body = body;
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
  /** Aborts the call whatever its state (the timeout above counts idle time only, from the connection's start). */
  readonly signal?: AbortSignal;
  /**
   * A keep-alive agent for a run of calls (`status --resize`'s): client-node
   * gives every call an agent of its own, so a new TLS connection each.
   */
  readonly agent?: Agent | undefined;
}

/**
 * One JSON call to the API server with the kubeconfig's credentials, for APIs
 * newer than client-node's generated classes (MutatingAdmissionPolicy v1 is
 * served from Kubernetes 1.36; client-node 1.4 knows only v1beta1). Resolves
 * with the parsed body of a 2xx answer; rejects with KubeRequestError otherwise.
 */
export async function kubeJson(kubeConfig: KubeConfig, call: KubeJsonRequest): Promise<unknown> {
  const payload = call.body === undefined ? undefined : JSON.stringify(call.body);
  const headers = payload === undefined ? {} : { 'content-type': call.contentType ?? 'application/json', 'content-length': Buffer.byteLength(payload) };
  const { url, options } = await requestOptions(kubeConfig, call.method, call.path, headers);
  if (call.agent !== undefined) options.agent = call.agent;
  const timeoutMs = call.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const sent = request(url, call.signal === undefined ? options : { ...options, signal: call.signal }, (response) => {
      readText(response, reject, (text) => {
        const status = response.statusCode ?? 0;
        const body = parseOrUndefined(text);
        if (status >= 200 && status < 300) return resolve(body);
        reject(requestError(call.method, url, status, text, body));
      });
    });
    sent.setTimeout(timeoutMs, () => sent.destroy(new Error(`${call.method} ${url.pathname}: no answer within ${timeoutMs} ms`)));
    sent.on('error', reject);
    sent.end(payload);
  });
}

export interface KubeListRequest {
  /** `/api/v1/pods?limit=500`: one page. */
  readonly path: string;
  /** The Accept header (a metadata-only list, say); plain JSON by default. */
  readonly accept?: string;
  /** Milliseconds without a byte from the API server (default 10 s). */
  readonly timeoutMs?: number;
}

/**
 * One page of a list, each of its items handed to EACH as soon as it has
 * arrived, parsed alone (ListItemStream): neither the page's text nor all of
 * its objects are ever held at once. Resolves with the rest of the list
 * (`metadata`, with `continue`; `items` empty). Rejects with KubeRequestError,
 * its body the Status, on any other answer than a 2xx, and with the error
 * EACH throws (the request is then abandoned).
 */
export async function kubeJsonList(kubeConfig: KubeConfig, call: KubeListRequest, each: (item: unknown) => void): Promise<unknown> {
  const { url, options } = await requestOptions(kubeConfig, 'GET', call.path, call.accept === undefined ? {} : { accept: call.accept });
  const timeoutMs = call.timeoutMs ?? 10_000;
  return new Promise((resolve, reject) => {
    const sent = request(url, options, (response) => {
      const status = response.statusCode ?? 0;
      if (status < 200 || status >= 300) return readText(response, reject, (text) => reject(requestError('GET', url, status, text, parseOrUndefined(text))));
      const items = new ListItemStream(each);
      let failed = false;
      const fail = (error: unknown): void => {
        failed = true;
        sent.destroy();
        reject(error);
      };
      response.setEncoding('utf8');
      response.on('data', (piece: string) => {
        if (failed) return;
        try {
          items.write(piece);
        } catch (error) {
          fail(error);
        }
      });
      response.on('error', reject);
      response.on('end', () => {
        if (failed) return;
        try {
          resolve(items.end());
        } catch (error) {
          reject(error);
        }
      });
    });
    sent.setTimeout(timeoutMs, () => sent.destroy(new Error(`GET ${url.pathname}: no answer within ${timeoutMs} ms`)));
    sent.on('error', reject);
    sent.end();
  });
}

/** The URL and the options of one request with the kubeconfig's credentials (its agent, its proxy). */
async function requestOptions(kubeConfig: KubeConfig, method: string, path: string, headers: Record<string, string | number>): Promise<{ url: URL; options: RequestOptions }> {
  const cluster = kubeConfig.getCurrentCluster();
  if (cluster === null) throw new Error('kubeconfig: no current cluster');
  const options: RequestOptions = { method, headers: { accept: 'application/json', ...headers } };
  await kubeConfig.applyToHTTPSOptions(options);
  return { url: new URL(path, cluster.server), options };
}

function readText(response: IncomingMessage, reject: (error: unknown) => void, done: (text: string) => void): void {
  const chunks: Buffer[] = [];
  response.on('data', (chunk: Buffer) => chunks.push(chunk));
  response.on('error', reject);
  response.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
}

function parseOrUndefined(text: string): unknown {
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A non-2xx answer: its status, the Status message (else the start of the body) and the body. */
function requestError(method: string, url: URL, status: number, text: string, body: unknown): KubeRequestError {
  const message = (body as { message?: unknown } | undefined)?.message;
  return new KubeRequestError(status, typeof message === 'string' && message !== '' ? message : `${method} ${url.pathname}: ${text.slice(0, 200) || 'no body'}`, body);
}
