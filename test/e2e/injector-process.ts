import { setTimeout as sleep } from 'node:timers/promises';
import { AppsV1Api, CoreV1Api, type V1EnvVar } from '@kubernetes/client-node';
import { httpsCall } from '../helpers/https-client.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { trackChild } from './child-processes.js';
import type { ControlPlane } from './control-plane.js';
import { eventually, type Release } from './cluster.js';

/**
 * The injector as the chart runs it, but as a local process: the compiled
 * `bin/envoy-injector.js serve` (run `npm run build` first; `npm run
 * test:e2e` does), authenticated as the chart's ServiceAccount (a
 * TokenRequest token, never admin, so the real RBAC authorizer judges every
 * call), with the environment of the installed Deployment's container, and
 * listening where the API server calls the webhook: the chart Service's
 * ClusterIP and port (the ClusterIP range is loopback; see control-plane.ts).
 */
export interface ChartInjector extends ServerProcess {
  /** Where it listens: the Service's ClusterIP and port, unless `listen` moved it. */
  readonly host: string;
  /** The environment it got from the Deployment (plus overrides), for a second replica. */
  readonly env: Record<string, string>;
  /** SIGTERM, wait up to TIMEOUTMS for the exit (then SIGKILL); resolves with the exit code. */
  stop(timeoutMs?: number): Promise<number | null>;
}

export interface ServiceAddress {
  readonly clusterIP: string;
  readonly port: number;
}

/** The ClusterIP and port of the chart's Service (the one the webhook configuration names). */
export async function serviceAddress(plane: ControlPlane, release: Release): Promise<ServiceAddress> {
  const webhookConfig = release.manifests.find((manifest) => manifest.kind === 'MutatingWebhookConfiguration');
  const webhooks = (webhookConfig?.['webhooks'] ?? []) as { clientConfig?: { service?: { name?: string; port?: number } } }[];
  const name = webhooks[0]?.clientConfig?.service?.name;
  if (name === undefined) throw new Error(`release ${release.name}: no MutatingWebhookConfiguration calling a Service`);
  const service = await plane.kubeConfig.makeApiClient(CoreV1Api).readNamespacedService({ name, namespace: release.namespace });
  const clusterIP = service.spec?.clusterIP;
  const port = service.spec?.ports?.[0]?.port;
  if (clusterIP === undefined || port === undefined) throw new Error(`Service ${release.namespace}/${name} has no clusterIP or port`);
  return { clusterIP, port };
}

/** The environment the Deployment's injector container would get (literal values and metadata.namespace only). */
export async function deploymentEnv(plane: ControlPlane, release: Release): Promise<{ env: Record<string, string>; serviceAccount: string }> {
  const deployment = release.manifests.find((manifest) => manifest.kind === 'Deployment');
  if (deployment === undefined) throw new Error(`release ${release.name} has no Deployment`);
  const stored = await plane.kubeConfig.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: deployment.metadata.name, namespace: release.namespace });
  const podSpec = stored.spec?.template.spec;
  const container = podSpec?.containers.find((candidate) => candidate.name === 'envoy-injector');
  if (podSpec === undefined || container === undefined) throw new Error(`Deployment ${release.namespace}/${deployment.metadata.name} has no envoy-injector container`);
  const env: Record<string, string> = {};
  for (const variable of container.env ?? ([] as V1EnvVar[])) {
    if (variable.valueFrom === undefined) env[variable.name] = variable.value ?? ''; // the API server drops empty values
    else if (variable.valueFrom.fieldRef?.fieldPath === 'metadata.namespace') env[variable.name] = release.namespace;
    else throw new Error(`Deployment env ${variable.name}: only literal values and metadata.namespace are supported by this test helper`);
  }
  return { env, serviceAccount: podSpec.serviceAccountName ?? 'default' };
}

/**
 * Starts the injector of RELEASE (see ChartInjector). ENV overrides the
 * Deployment's variables; LISTEN replaces the Service's address (e.g.
 * 127.0.0.1:0 for replicas behind a balancer on the ClusterIP); NODE_FLAGS
 * go before the script, as the image's ENTRYPOINT puts them.
 */
export async function startChartInjector(
  plane: ControlPlane,
  release: Release,
  { env: overrides = {}, listen, nodeFlags = [] }: { env?: Record<string, string>; listen?: { host: string; port: number }; nodeFlags?: readonly string[] } = {},
): Promise<ChartInjector> {
  const [{ env: deployed, serviceAccount }, service] = await Promise.all([deploymentEnv(plane, release), serviceAddress(plane, release)]);
  const kubeconfig = await plane.serviceAccountKubeconfig(release.namespace, serviceAccount);
  const host = listen?.host ?? service.clusterIP;
  const port = listen?.port ?? service.port;
  const env = { ...deployed, ...overrides };
  // Flags win over the environment: only where it listens differs from the Deployment.
  const server = await spawnServer(['--kubeconfig', kubeconfig, '--host', host, '--port', String(port)], { ...env, KUBECONFIG: kubeconfig }, nodeFlags);
  trackChild(server.child);
  return {
    ...server,
    host,
    env,
    stop: async (timeoutMs = 20_000) => {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM');
      const result = await Promise.race([server.exited, sleep(timeoutMs, 'timeout' as const)]);
      if (result !== 'timeout') return result;
      server.child.kill('SIGKILL');
      throw new Error(`the injector did not exit within ${timeoutMs / 1000} s of SIGTERM (killed)`);
    },
  };
}

/** GET /readyz as a kubelet probe makes it: HTTPS without verifying the certificate (it may not be trusted yet). */
export function readyz(injector: ChartInjector): ReturnType<typeof httpsCall> {
  return httpsCall(`https://127.0.0.1:${injector.port}/readyz`, { ca: '', extra: { rejectUnauthorized: false } });
}

/**
 * Resolves once INJECTOR's /readyz answers 200, as a Service's endpoints wait
 * for readiness: before that it may still serve its throwaway certificate.
 */
export async function waitReady(injector: ChartInjector, what = `the injector on port ${injector.port} ready`): Promise<void> {
  await eventually(what, async () => ((await readyz(injector)).status === 200 ? true : undefined), 30_000);
}

/** Log lines of PROCESS that report an HTTP 403 from the API server. */
export function forbiddenLines(process: ServerProcess): Record<string, unknown>[] {
  return process.logs.filter((line) => /\b403\b|forbidden/i.test(JSON.stringify(line)));
}
