/**
 * How the injector's cost grows with the cluster (issue 27), on a real
 * kube-apiserver (no controller manager: the bench makes the ServiceAccounts
 * Pods need): the chart's injector ready and at rest with 20 namespaces,
 * then with SCALE namespaces (half labeled enabled), in one run; SCALE Pods
 * created through the webhook; `status` over all of them.
 */
import { execFile } from 'node:child_process';
import { Agent } from 'node:https';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { helmInstall, sidecar, type Release } from '../test/e2e/cluster.js';
import { startControlPlane, type OwnedControlPlane } from '../test/e2e/control-plane.js';
import { startChartInjector, type ChartInjector } from '../test/e2e/injector-process.js';
import { httpsCall } from '../test/helpers/https-client.js';
import { fmt, MIB } from './format.js';
import { log } from './harness.js';
import { readMemory, ROOT } from './processes.js';
import { apiCall, createPods, seedPodBody, type ApiAccess } from './pod-load.js';
import type { Target } from './targets.js';

export interface ScaleSettings {
  readonly kubeVersion: '1.34' | '1.36';
  readonly namespaces: number;
  readonly baselineNamespaces: number;
  readonly pods: number;
  /** Seconds from ready to the at-rest reading. */
  readonly restSeconds: number;
}

export interface InjectorAtScale {
  readonly namespaces: number;
  /** From spawning the injector to its first /readyz 200. */
  readonly readyMs: number;
  /** VmRSS restSeconds after ready (no forced GC, the same for both). */
  readonly rssBytes: number;
}

export interface ScaleFigures {
  readonly settings: ScaleSettings;
  readonly baseline: InjectorAtScale;
  readonly scaled: InjectorAtScale;
  readonly pods: { readonly created: number; readonly injected: number; readonly refused: number; readonly seconds: number };
  readonly status: { readonly seconds: number; readonly peakRssBytes: number; readonly exitCode: number };
}

const POD_NAMESPACES = 50;

/** Namespaces FROM..TO-1 (`scale-N`), every other one enabled, CONCURRENCY at a time. */
async function createNamespaces(access: ApiAccess, from: number, to: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  let next = from;
  try {
    await Promise.all(Array.from({ length: 16 }, async () => {
      while (next < to) {
        const index = next++;
        const labels = index % 2 === 0 ? { 'envoy-injector.io/inject': 'enabled' } : {};
        const answer = await apiCall(access, agent, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: `scale-${index}`, labels } });
        if (answer.status !== 201) throw new Error(`create namespace scale-${index}: ${answer.status}: ${answer.body.slice(0, 200)}`);
        if (index < 2 * POD_NAMESPACES && index % 2 === 0) {
          // Pods go to the first enabled namespaces; without a controller manager, their ServiceAccount is ours to make.
          const account = await apiCall(access, agent, 'POST', `/api/v1/namespaces/scale-${index}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
          if (account.status !== 201) throw new Error(`create ServiceAccount in scale-${index}: ${account.status}`);
        }
      }
    }));
  } finally {
    agent.destroy();
  }
}

async function injectorAt(plane: OwnedControlPlane, release: Release, namespaces: number, restSeconds: number): Promise<InjectorAtScale> {
  const started = performance.now();
  const injector = await startChartInjector(plane, release);
  try {
    await waitReady(injector);
    const readyMs = performance.now() - started;
    await sleep(restSeconds * 1000);
    return { namespaces, readyMs, rssBytes: readMemory(injector.child.pid ?? 0).rss };
  } finally {
    await injector.stop();
  }
}

/** `status` over the whole cluster, under /usr/bin/time: wall seconds and peak RSS. */
function runStatus(plane: OwnedControlPlane, release: Release, configMap: string): Promise<ScaleFigures['status']> {
  const args = ['-f', 'bench-time %e %M', process.execPath, 'bin/envoy-injector.js', 'status', '--kubeconfig', plane.kubeconfigPath, '--injector-namespace', release.namespace, '--configmap', configMap, '-o', 'json'];
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/time', args, { cwd: ROOT, maxBuffer: 256 * MIB, timeout: 300_000 }, (error, _stdout, stderr) => {
      const match = /bench-time (\S+) (\d+)/.exec(stderr);
      if (match === null) return reject(new Error(`status: no timing (${error?.message ?? ''}): ${stderr.slice(-500)}`));
      resolve({ seconds: Number(match[1]), peakRssBytes: Number(match[2]) * 1024, exitCode: error === null ? 0 : Number((error as { code?: number }).code ?? 1) });
    });
  });
}

async function podsThroughWebhook(plane: OwnedControlPlane, release: Release, pods: number): Promise<ScaleFigures['pods']> {
  const injector = await startChartInjector(plane, release);
  try {
    await waitReady(injector);
    const started = performance.now();
    let created = 0;
    let injected = 0;
    let refused = 0;
    const perNamespace = Math.ceil(pods / POD_NAMESPACES);
    for (let index = 0; index < POD_NAMESPACES && created + refused < pods; index++) {
      const run = await createPods(plane, `scale-${2 * index}`, seedPodBody(), Math.min(perNamespace, pods - created - refused), 8, (pod) => (sidecar(pod as never) === 'none' ? 0 : 1));
      created += run.latenciesMs.length;
      refused += run.refused.length;
      injected += run.marked;
    }
    return { created, injected, refused, seconds: (performance.now() - started) / 1000 };
  } finally {
    await injector.stop();
  }
}

/** Resolves once the injector's /readyz, where it listens (the Service's ClusterIP), answers 200, polled every 5 ms. */
async function waitReady(injector: ChartInjector): Promise<void> {
  const deadline = performance.now() + 120_000;
  while (performance.now() < deadline) {
    const answer = await httpsCall(`https://${injector.host}:${injector.port}/readyz`, { ca: '', extra: { rejectUnauthorized: false } }).catch(() => undefined);
    if (answer?.status === 200) return;
    await sleep(5);
  }
  throw new Error(`the injector on ${injector.host}:${injector.port}: /readyz not 200 after 120 s`);
}

export async function scaleFigures(settings: ScaleSettings): Promise<ScaleFigures> {
  const plane = await startControlPlane(settings.kubeVersion, { controllers: false });
  try {
    const release = await helmInstall(plane, { name: 'scale', namespace: 'scale-system' });
    await createNamespaces(plane, 0, settings.baselineNamespaces);
    log(`bench: the injector with ${settings.baselineNamespaces} namespaces`);
    const baseline = await injectorAt(plane, release, settings.baselineNamespaces, settings.restSeconds);
    log(`bench: creating ${settings.namespaces - settings.baselineNamespaces} more namespaces`);
    await createNamespaces(plane, settings.baselineNamespaces, settings.namespaces);
    const scaled = await injectorAt(plane, release, settings.namespaces, settings.restSeconds);
    log(`bench: ${settings.pods} Pods through the webhook`);
    const pods = await podsThroughWebhook(plane, release, settings.pods);
    log('bench: status over all of them');
    const configMap = release.manifests.find((manifest) => manifest.kind === 'ConfigMap')?.metadata.name ?? 'envoy-initializer';
    const status = await runStatus(plane, release, configMap);
    return { settings, baseline, scaled, pods, status };
  } finally {
    await plane.stop();
  }
}

export function scaleText(figures: ScaleFigures): string[] {
  const { baseline, scaled, pods, status } = figures;
  const atRest = (at: InjectorAtScale): string => `${at.namespaces} namespaces: ready in ${at.readyMs.toFixed(0)} ms, RSS ${fmt.mib(at.rssBytes)} MiB ${figures.settings.restSeconds} s after`;
  return [
    `Scale (a real kube-apiserver ${figures.settings.kubeVersion}, half the namespaces enabled): ${atRest(baseline)}; ${atRest(scaled)} (${fmt.ratio(scaled.readyMs / baseline.readyMs)} the time to ready, ${scaled.rssBytes >= baseline.rssBytes ? '+' : ''}${fmt.mib(scaled.rssBytes - baseline.rssBytes)} MiB)`,
    `${pods.created + pods.refused} Pods through the webhook in ${pods.seconds.toFixed(1)} s: ${pods.injected} injected, ${pods.refused} refused; status over them: ${status.seconds.toFixed(2)} s, peak RSS ${fmt.mib(status.peakRssBytes)} MiB (exit ${status.exitCode})`,
  ];
}

export function scaleTargets(figures: ScaleFigures): Target[] {
  const { baseline, scaled, pods, status, settings } = figures;
  const extra = scaled.rssBytes - baseline.rssBytes;
  const ready = scaled.readyMs / baseline.readyMs;
  const n = settings.namespaces;
  return [
    { name: `RSS at rest, ${n} namespaces − ${baseline.namespaces}`, value: `${extra >= 0 ? '+' : ''}${fmt.mib(extra)} MiB`, limit: '≤ +15 MiB', pass: extra <= 15 * MIB },
    { name: `time to ready, ${n} namespaces / ${baseline.namespaces}`, value: fmt.ratio(ready), limit: '≤ 2.00×', pass: ready <= 2 },
    { name: `${settings.pods} Pods through the webhook: all injected, none refused`, value: `${pods.injected} / ${pods.refused}`, limit: `${settings.pods} / 0`, pass: pods.injected === settings.pods && pods.refused === 0 },
    { name: 'status over them: wall time', value: `${status.seconds.toFixed(2)} s`, limit: '< 5 s', pass: status.seconds < 5 && status.exitCode === 0 },
    { name: 'status over them: peak RSS', value: `${fmt.mib(status.peakRssBytes)} MiB`, limit: '< 150 MiB', pass: status.peakRssBytes < 150 * MIB },
  ];
}
