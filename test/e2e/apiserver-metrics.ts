/**
 * The API server's own account of its webhook calls, from its /metrics:
 * `apiserver_admission_webhook_admission_duration_seconds` (a histogram the
 * mutating dispatcher observes once per call, `webhook/mutating/dispatcher.go`),
 * its `_count` and `_sum` summed per webhook name over the other labels
 * (operation, type, rejected).
 */
import { request } from 'node:https';

export interface WebhookCalls {
  readonly count: number;
  /** Seconds, over every call. */
  readonly sum: number;
}

export interface ApiServerAccess {
  /** https://127.0.0.1:PORT */
  readonly server: string;
  readonly ca: string;
  /** A token allowed to GET /metrics (system:masters). */
  readonly adminToken: string;
}

const METRIC = 'apiserver_admission_webhook_admission_duration_seconds';

/** Per webhook name, the calls the API server made so far. */
export async function webhookCalls(plane: ApiServerAccess): Promise<Map<string, WebhookCalls>> {
  const text = await getMetrics(plane);
  const calls = new Map<string, { count: number; sum: number }>();
  for (const line of text.split('\n')) {
    const match = new RegExp(`^${METRIC}_(count|sum)\\{([^}]*)\\} (\\S+)$`).exec(line);
    if (match === null) continue;
    const name = /(?:^|,)name="([^"]*)"/.exec(match[2] ?? '')?.[1];
    if (name === undefined) continue;
    const entry = calls.get(name) ?? { count: 0, sum: 0 };
    entry[match[1] === 'count' ? 'count' : 'sum'] += Number(match[3]);
    calls.set(name, entry);
  }
  return calls;
}

/** AFTER minus BEFORE, for the webhooks AFTER names (a webhook absent before counts from 0). */
export function callsBetween(before: ReadonlyMap<string, WebhookCalls>, after: ReadonlyMap<string, WebhookCalls>): Map<string, WebhookCalls> {
  const delta = new Map<string, WebhookCalls>();
  for (const [name, now] of after) {
    const then = before.get(name) ?? { count: 0, sum: 0 };
    if (now.count !== then.count) delta.set(name, { count: now.count - then.count, sum: now.sum - then.sum });
  }
  return delta;
}

function getMetrics(plane: ApiServerAccess): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(`${plane.server}/metrics`, { ca: plane.ca, headers: { authorization: `Bearer ${plane.adminToken}` }, timeout: 10_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => (response.statusCode === 200 ? resolve(body) : reject(new Error(`GET /metrics: ${response.statusCode}: ${body.slice(0, 200)}`))));
    });
    req.once('timeout', () => req.destroy(new Error('GET /metrics: no answer in 10 s')));
    req.once('error', reject);
    req.end();
  });
}
