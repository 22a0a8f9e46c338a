/**
 * Pod CREATEs against a real API server, as `kubectl apply` or a controller
 * sends them: POST /api/v1/namespaces/NS/pods over keep-alive HTTPS, CLIENTS
 * at once, each sending its next Pod when the answer arrives. Latency is per
 * request, from writing it to the last byte of the answer.
 */
import { Agent, request } from 'node:https';
import { performance } from 'node:perf_hooks';

export interface ApiAccess {
  readonly server: string;
  readonly ca: string;
  readonly adminToken: string;
}

export interface CreateRun {
  /** Milliseconds per created Pod (201), in completion order. */
  readonly latenciesMs: readonly number[];
  /** The API server's messages for Pods it did not store. */
  readonly refused: readonly string[];
  readonly elapsedSeconds: number;
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

/** One JSON call with the admin token over AGENT. */
export function apiCall(access: ApiAccess, agent: Agent, method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = request(
      `${access.server}${path}`,
      {
        method,
        agent,
        ca: access.ca,
        timeout: 30_000,
        headers: {
          authorization: `Bearer ${access.adminToken}`,
          accept: 'application/json',
          ...(payload === undefined ? {} : { 'content-type': contentType, 'content-length': payload.length }),
        },
      },
      (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
        response.on('error', reject);
      },
    );
    req.once('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 30 s`)));
    req.once('error', reject);
    req.end(payload);
  });
}

/** Creates COUNT Pods (POD, its name made unique by generateName) in NAMESPACE, CLIENTS at a time. */
export async function createPods(access: ApiAccess, namespace: string, pod: Record<string, unknown>, count: number, clients: number): Promise<CreateRun> {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const latenciesMs: number[] = [];
  const refused: string[] = [];
  let next = 0;
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next < count) {
          next += 1;
          const sent = performance.now();
          const answer = await apiCall(access, agent, 'POST', `/api/v1/namespaces/${namespace}/pods`, pod).catch((error: unknown) => ({ status: 0, body: String(error) }));
          if (answer.status === 201) latenciesMs.push(performance.now() - sent);
          else refused.push(`${answer.status}: ${answer.body.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return { latenciesMs, refused, elapsedSeconds: (performance.now() - started) / 1000 };
}

/** How many Pods NAMESPACE holds with LABELSELECTOR, read cheaply (one item and the remaining count). */
export async function countPods(access: ApiAccess, agent: Agent, namespace: string, labelSelector: string): Promise<number> {
  const answer = await apiCall(access, agent, 'GET', `/api/v1/namespaces/${namespace}/pods?limit=1&labelSelector=${encodeURIComponent(labelSelector)}`);
  if (answer.status !== 200) throw new Error(`list Pods in ${namespace}: ${answer.status}: ${answer.body.slice(0, 300)}`);
  const list = JSON.parse(answer.body) as { items: unknown[]; metadata?: { remainingItemCount?: number } };
  return list.items.length + (list.metadata?.remainingItemCount ?? 0);
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}
