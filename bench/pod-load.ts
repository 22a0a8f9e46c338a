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
  /** The sum of MARK over the stored Pods, when given (e.g. 1 per injected Pod). */
  readonly marked: number;
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

/** Creates COUNT Pods (POD, its name made unique by generateName) in NAMESPACE, CLIENTS at a time; MARK reads each stored Pod. */
export async function createPods(
  access: ApiAccess,
  namespace: string,
  pod: Record<string, unknown>,
  count: number,
  clients: number,
  mark?: (stored: unknown) => number,
): Promise<CreateRun> {
  const agent = new Agent({ keepAlive: true, maxSockets: clients });
  const latenciesMs: number[] = [];
  const refused: string[] = [];
  let next = 0;
  let marked = 0;
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (next < count) {
          next += 1;
          const sent = performance.now();
          const answer = await apiCall(access, agent, 'POST', `/api/v1/namespaces/${namespace}/pods`, pod).catch((error: unknown) => ({ status: 0, body: String(error) }));
          if (answer.status === 201) {
            latenciesMs.push(performance.now() - sent);
            if (mark !== undefined) marked += mark(JSON.parse(answer.body));
          } else refused.push(`${answer.status}: ${answer.body.slice(0, 300)}`);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  return { latenciesMs, refused, elapsedSeconds: (performance.now() - started) / 1000, marked };
}

/**
 * Watches NAMESPACE's Pods matching LABELSELECTOR from now on and resolves
 * once COUNT have been added (stored): the watch is open when `opened`
 * resolves. Call `close` when done with it.
 */
export async function watchPodsAdded(access: ApiAccess, namespace: string, labelSelector: string, count: number): Promise<{ readonly done: Promise<void>; close(): void }> {
  const agent = new Agent({ keepAlive: false });
  const base = `/api/v1/namespaces/${namespace}/pods?labelSelector=${encodeURIComponent(labelSelector)}`;
  const list = await apiCall(access, agent, 'GET', `${base}&limit=1`);
  if (list.status !== 200) throw new Error(`list Pods in ${namespace}: ${list.status}: ${list.body.slice(0, 300)}`);
  const resourceVersion = (JSON.parse(list.body) as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion ?? '';
  let close = (): void => undefined;
  const done = new Promise<void>((resolve, reject) => {
    const req = request(`${access.server}${base}&watch=true&resourceVersion=${resourceVersion}`, { agent, ca: access.ca, headers: { authorization: `Bearer ${access.adminToken}` } }, (response) => {
      let added = 0;
      let pending = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        pending += chunk;
        const lines = pending.split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) if (line.startsWith('{"type":"ADDED"')) added += 1;
        if (added >= count) resolve();
      });
      response.on('end', () => reject(new Error(`the watch of ${namespace}'s Pods ended after ${added} of ${count}`)));
    });
    req.once('error', (error) => reject(error));
    req.end();
    close = () => req.destroy();
  });
  done.catch(() => undefined);
  return { done, close: () => { close(); agent.destroy(); } };
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/** The seed's Pod as JSON, with generateName instead of its name. */
export function seedPodBody(): Record<string, unknown> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'myapp-', labels: { app: 'myapp' } },
    spec: { containers: [{ name: 'myapp-container', image: 'busybox', command: ['sh', '-c', 'echo Hello Kubernetes! && sleep 3600'] }] },
  };
}
