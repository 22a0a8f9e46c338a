/**
 * The API server's own account of its webhook calls, from its /metrics:
 * `apiserver_admission_webhook_admission_duration_seconds` (a histogram the
 * mutating dispatcher observes once per call, `webhook/mutating/dispatcher.go`),
 * its `_count` and `_sum` summed per webhook name over the other labels
 * (operation, type, rejected); and `apiserver_admission_match_condition_exclusions_total`
 * (counted once each time a webhook's matchConditions came out false and kept it
 * from a call, `generic/webhook.go`; a true result is counted nowhere).
 */
import { request } from 'node:https';

export interface WebhookCalls {
  readonly count: number;
  /** Seconds, over every call. */
  readonly sum: number;
  /** Times its matchConditions were evaluated and came out false (no call). */
  readonly excluded: number;
}

export interface ApiServerAccess {
  /** https://127.0.0.1:PORT */
  readonly server: string;
  readonly ca: string;
  /** A token allowed to GET /metrics (system:masters). */
  readonly adminToken: string;
}

const CALLS = 'apiserver_admission_webhook_admission_duration_seconds';
const EXCLUSIONS = 'apiserver_admission_match_condition_exclusions_total';
const NONE: WebhookCalls = { count: 0, sum: 0, excluded: 0 };

/** Per webhook name, the calls the API server made so far, and the calls its matchConditions spared. */
export async function webhookCalls(plane: ApiServerAccess): Promise<Map<string, WebhookCalls>> {
  const text = await getMetrics(plane);
  const calls = new Map<string, { count: number; sum: number; excluded: number }>();
  const pattern = new RegExp(`^(?:${CALLS}_(count|sum)|${EXCLUSIONS})\\{([^}]*)\\} (\\S+)$`);
  for (const line of text.split('\n')) {
    const match = pattern.exec(line);
    if (match === null) continue;
    const labels = match[2] ?? '';
    const name = /(?:^|,)name="([^"]*)"/.exec(labels)?.[1];
    // The exclusions of MutatingAdmissionPolicies carry kind="policy" and their own names.
    if (name === undefined || (match[1] === undefined && !/(?:^|,)kind="webhook"/.test(labels))) continue;
    const entry = calls.get(name) ?? { ...NONE };
    entry[match[1] === 'count' ? 'count' : match[1] === 'sum' ? 'sum' : 'excluded'] += Number(match[3]);
    calls.set(name, entry);
  }
  return calls;
}

/** AFTER minus BEFORE, for the webhooks AFTER names whose figures moved (a webhook absent before counts from 0). */
export function callsBetween(before: ReadonlyMap<string, WebhookCalls>, after: ReadonlyMap<string, WebhookCalls>): Map<string, WebhookCalls> {
  const delta = new Map<string, WebhookCalls>();
  for (const [name, now] of after) {
    const then = before.get(name) ?? NONE;
    if (now.count !== then.count || now.excluded !== then.excluded) delta.set(name, { count: now.count - then.count, sum: now.sum - then.sum, excluded: now.excluded - then.excluded });
  }
  return delta;
}

/** The API server's /metrics text. */
export function getMetrics(plane: ApiServerAccess): Promise<string> {
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
