/**
 * `status --resize` over N injected Pods (issue 52), on a real
 * kube-apiserver (no kubelet: the API server stores the resize and the
 * status, which is all `status --resize` waits for), against a floor
 * measured in the same run: the same two PATCHes per Pod (`pods/resize`,
 * then the status annotation), their bodies computed beforehand, sent from
 * this process with the same concurrency: the least any tool must send.
 * Ours is the whole command as a user runs it (`bin/envoy-injector.js
 * status --resize --yes -n NS -o json`: process start, the template, the
 * paged list, the plans, the PATCHes).
 *
 * Two namespaces of N Pods each, injected offline with the template's
 * first resources and stored as they are (the webhook's cost is not this
 * bench's). Each round changes the template's CPU request, then runs ours on
 * one namespace and the floor on the other, alternating which goes first and
 * where (ABBA), so that both always start from the same state. Prints a
 * Markdown table and a JSON line.
 *
 *   node --import tsx bench/resize-status.ts [--pods 1000] [--rounds 4] [--kube-version 1.36]
 */
import { execFile } from 'node:child_process';
import { Agent } from 'node:https';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { planPodResize } from '../src/fleet/resize-plan.js';
import { RESIZE_CONCURRENCY } from '../src/kube/pod-resize.js';
import { admitPod, applyPodPatch, Annotations, jsonPointer, parseTemplateData, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { startControlPlane, type KubeVersion, type OwnedControlPlane } from '../test/e2e/control-plane.js';
import { apiCall, type ApiAccess } from './pod-load.js';
import { ROOT } from './processes.js';

const SYSTEM = 'resize-system';
const NAMESPACES = ['resize-a', 'resize-b'] as const;
const CONFIG_MAP = 'envoy-initializer';

/** The template of round R: the proxy's CPU request moves by 10m a round, nothing else. */
function templateData(round: number): Record<string, string> {
  return { config: `containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.39.0\n    resources: {requests: {cpu: ${50 + 10 * round}m, memory: 64Mi}, limits: {cpu: 500m, memory: 256Mi}}\n` };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

/** Runs EACH over ITEMS, CONCURRENCY at a time. */
async function pool<T>(items: readonly T[], concurrency: number, each: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < items.length) await each(items[next++] as T);
  }));
}

async function call(access: ApiAccess, agent: Agent, method: string, path: string, body?: unknown, contentType?: string): Promise<JsonObject> {
  const answer = await apiCall(access, agent, method, path, body, contentType);
  if (answer.status < 200 || answer.status > 299) throw new Error(`${method} ${path}: ${answer.status}: ${answer.body.slice(0, 300)}`);
  return JSON.parse(answer.body) as JsonObject;
}

/** N Pods in NAMESPACE, injected with TEMPLATES by the injector's own code and stored as they are. */
async function seedPods(access: ApiAccess, agent: Agent, namespace: string, count: number, templates: TemplateSet): Promise<void> {
  const names = Array.from({ length: count }, (_, index) => `app-${index}`);
  await pool(names, 16, async (name) => {
    const received: JsonObject = { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace }, spec: { automountServiceAccountToken: false, containers: [{ name: 'app', image: 'registry.example/app:1', resources: { requests: { cpu: '100m', memory: '128Mi' } } }] } };
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace, namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, pod: received, templates, options: { nativeSidecar: true } });
    if (admission.injection === undefined) throw new Error(`${name}: not injected: ${admission.decision.reason}`);
    await call(access, agent, 'POST', `/api/v1/namespaces/${namespace}/pods`, applyPodPatch(received, admission.injection.patch));
  });
}

/** Ours: the command as a user runs it; wall seconds from spawn to exit, and how many Pods it says it resized. */
function runOurs(plane: OwnedControlPlane, namespace: string): Promise<{ seconds: number; resized: number }> {
  const started = performance.now();
  const args = ['bin/envoy-injector.js', 'status', '--resize', '--yes', '--kubeconfig', plane.kubeconfigPath, '--injector-namespace', SYSTEM, '-n', namespace, '-o', 'json'];
  return new Promise((resolve, reject) => {
    execFile(process.execPath, args, { cwd: ROOT, maxBuffer: 256 * 1024 * 1024, timeout: 600_000 }, (error, stdout, stderr) => {
      const seconds = (performance.now() - started) / 1000;
      if (error !== null && (error as { code?: unknown }).code !== 3 && (error as { code?: unknown }).code !== 0) return reject(new Error(`status --resize: ${error.message}: ${stderr.slice(-500)}`));
      const report = JSON.parse(stdout) as { resize?: { resized?: unknown[] } };
      resolve({ seconds, resized: report.resize?.resized?.length ?? 0 });
    });
  });
}

/** The floor: each Pod's two PATCHes, their bodies planned before the clock starts. */
async function runFloor(plane: OwnedControlPlane, agent: Agent, namespace: string, templates: TemplateSet): Promise<{ seconds: number; resized: number }> {
  const list = await call(plane, agent, 'GET', `/api/v1/namespaces/${namespace}/pods`);
  const pods = (list['items'] as JsonObject[]).flatMap((pod) => {
    const plan = planPodResize(pod, { templates });
    const name = String((pod['metadata'] as JsonObject)['name']);
    return plan.kind === 'resize' && plan.body !== undefined ? [{ name, plan }] : [];
  });
  const path = jsonPointer('metadata', 'annotations', Annotations.status);
  const started = performance.now();
  await pool(pods, RESIZE_CONCURRENCY, async ({ name, plan }) => {
    await call(plane, agent, 'PATCH', `/api/v1/namespaces/${namespace}/pods/${name}/resize`, plan.body, 'application/strategic-merge-patch+json');
    await call(plane, agent, 'PATCH', `/api/v1/namespaces/${namespace}/pods/${name}`, [{ op: 'test', path, value: plan.previousStatus }, { op: 'replace', path, value: plan.status }], 'application/json-patch+json');
  });
  return { seconds: (performance.now() - started) / 1000, resized: pods.length };
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { pods: { type: 'string', default: '1000' }, rounds: { type: 'string', default: '4' }, 'kube-version': { type: 'string', default: '1.36' } } });
  const count = Number(values.pods);
  const rounds = Number(values.rounds);
  const plane = await startControlPlane(values['kube-version'] as KubeVersion, { controllers: false });
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  try {
    for (const namespace of [SYSTEM, ...NAMESPACES]) {
      await call(plane, agent, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: { 'envoy-injector.io/inject': 'enabled' } } });
      // No controller manager: the ServiceAccount admission plugin wants the namespace's default one to exist.
      await call(plane, agent, 'POST', `/api/v1/namespaces/${namespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
    }
    await call(plane, agent, 'POST', `/api/v1/namespaces/${SYSTEM}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CONFIG_MAP }, data: templateData(0) });
    const first = parseTemplateData(templateData(0));
    for (const namespace of NAMESPACES) await seedPods(plane, agent, namespace, count, first);
    process.stderr.write(`bench: ${NAMESPACES.length} x ${count} Pods stored\n`);
    const ours: number[] = [];
    const floor: number[] = [];
    for (let round = 1; round <= rounds; round++) {
      await call(plane, agent, 'PUT', `/api/v1/namespaces/${SYSTEM}/configmaps/${CONFIG_MAP}`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CONFIG_MAP }, data: templateData(round) });
      const templates = parseTemplateData(templateData(round));
      // ABBA: ours first in rounds 1 and 4, the floor first in 2 and 3; the namespaces swap every round.
      const oursFirst = round % 4 === 1 || round % 4 === 0;
      const [oursIn, floorIn] = round % 2 === 1 ? NAMESPACES : [NAMESPACES[1], NAMESPACES[0]];
      const runs = oursFirst
        ? [await runOurs(plane, oursIn), await runFloor(plane, agent, floorIn, templates)]
        : [await runFloor(plane, agent, floorIn, templates), await runOurs(plane, oursIn)].reverse();
      const [mine, base] = runs as [{ seconds: number; resized: number }, { seconds: number; resized: number }];
      if (mine.resized !== count || base.resized !== count) throw new Error(`round ${round}: ours resized ${mine.resized}, the floor ${base.resized}, of ${count}`);
      ours.push(mine.seconds);
      floor.push(base.seconds);
      process.stderr.write(`bench: round ${round}: ours ${mine.seconds.toFixed(2)} s, floor ${base.seconds.toFixed(2)} s\n`);
    }
    const ratio = median(ours) / median(floor);
    process.stdout.write([
      `| status --resize over ${count} Pods (Kubernetes ${values['kube-version']}, ${rounds} rounds, ${RESIZE_CONCURRENCY} at a time) | median |`,
      '|---|---|',
      `| ours: the command, spawn to exit | ${median(ours).toFixed(2)} s |`,
      `| floor: the same PATCHes, planned beforehand | ${median(floor).toFixed(2)} s |`,
      `| ours / floor | ${ratio.toFixed(2)}× |`,
      '',
      JSON.stringify({ pods: count, rounds, kubeVersion: values['kube-version'], concurrency: RESIZE_CONCURRENCY, oursSeconds: ours, floorSeconds: floor, ratio }),
      '',
    ].join('\n'));
  } finally {
    agent.destroy();
    await plane.stop();
  }
}

await main();
