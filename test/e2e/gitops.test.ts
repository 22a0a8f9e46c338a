import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, it } from 'node:test';
import { AdmissionregistrationV1Api, CoreV1Api, KubernetesObjectApi, PatchStrategy, Watch, type V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { formatYaml } from '../../src/injection/index.js';
import { only, renderChart, type Manifest } from '../helpers/helm.js';
import { forEachKubeVersion } from './control-plane.js';
import { eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';

/** The field manager Flux's kustomize-controller applies with. */
const FLUX_MANAGER = 'kustomize-controller';
const VALUES = { certificates: { mode: 'auto' } };

interface KubectlResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** The machine's kubectl (1.32 here; any with diff --server-side) with STDIN; never throws on a non-zero exit. */
function kubectl(args: readonly string[], stdin: string): Promise<KubectlResult> {
  return new Promise((resolve, reject) => {
    const child = execFile('kubectl', [...args], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : (error as { code?: unknown }).code;
      if (code === 'ENOENT') reject(new Error('kubectl not found on PATH: this test diffs the chart with kubectl diff --server-side'));
      else if (typeof code !== 'number') reject(error ?? new Error('kubectl: no exit code'));
      else resolve({ code, stdout, stderr });
    });
    child.stdin?.end(stdin);
  });
}

/** The field paths a managedFields entry owns, flattened (f:webhooks.k:{"name":"x"}.f:clientConfig.f:caBundle). */
function ownedPaths(fields: unknown, prefix = ''): string[] {
  if (fields === null || typeof fields !== 'object') return [];
  return Object.entries(fields as Record<string, unknown>).flatMap(([key, value]) => {
    const path = prefix === '' ? key : `${prefix}.${key}`;
    const below = ownedPaths(value, path);
    return below.length === 0 ? [path] : below;
  });
}

/**
 * Argo CD and Flux against a running auto-mode install, on a real API
 * server: the chart renders no caBundle and the injector owns it under its
 * own field manager, so applying, diffing or upgrading the chart leaves it
 * alone (argo-cd issues 1487, 4326, 9323 are injectors that did not).
 */
forEachKubeVersion('GitOps without drift: the rendered webhook configuration and the injector\'s caBundle', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  let rendered: Manifest[] = [];
  let ca = '';
  const admission = () => plane().kubeConfig.makeApiClient(AdmissionregistrationV1Api);
  const webhookConfig = (): Manifest => only(rendered, 'MutatingWebhookConfiguration');
  const live = () => admission().readMutatingWebhookConfiguration({ name: webhookConfig().metadata.name });
  const bundles = (config: V1MutatingWebhookConfiguration): string[] =>
    (config.webhooks ?? []).map((webhook) => Buffer.from(webhook.clientConfig.caBundle ?? '', 'base64').toString('utf8'));
  const trusted = (config: V1MutatingWebhookConfiguration): boolean => (config.webhooks ?? []).length === (webhookConfig()['webhooks'] as unknown[]).length && bundles(config).every((bundle) => bundle.includes(ca));

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('gitops'), namespace: uniqueName('gitops-system') }, VALUES);
    rendered = await renderChart(VALUES, { release: release.name, namespace: release.namespace });
    injector = await startChartInjector(plane(), release);
    const installed = release;
    const secretName = injector.env['CERT_SECRET'] ?? '';
    ca = await eventually('the injector\'s CA in the Secret', async () => {
      const secret = await plane().kubeConfig.makeApiClient(CoreV1Api).readNamespacedSecret({ name: secretName, namespace: installed.namespace });
      const text = Buffer.from(secret.data?.['ca.crt'] ?? '', 'base64').toString('utf8').trim();
      return text === '' ? undefined : text;
    }, 30_000);
    await eventually('every webhook\'s caBundle trusting the CA', async () => (trusted(await live()) ? true : undefined), 30_000);
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release);
  });

  it('the chart renders no caBundle in auto mode, and the injector owns it under its own field manager', async () => {
    const webhooks = webhookConfig()['webhooks'] as { clientConfig: Record<string, unknown> }[];
    assert.ok(webhooks.every((webhook) => !('caBundle' in webhook.clientConfig)));
    const owners = ((await live()).metadata?.managedFields ?? []).filter((entry) => ownedPaths(entry.fieldsV1).some((path) => path.endsWith('f:caBundle')));
    assert.deepEqual(owners.map((entry) => `${entry.manager}/${entry.operation}`), ['envoy-injector/Apply'], 'the caBundle\'s only owner');
  });

  it('helm upgrade, server-side (Helm 4) and client-side (Helm 3\'s way): every version of the configuration keeps the caBundle', async () => {
    assert.ok(release !== undefined);
    const name = webhookConfig().metadata.name;
    const seen: V1MutatingWebhookConfiguration[] = [];
    const watching = await new Watch(plane().kubeConfig).watch(
      '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      { fieldSelector: `metadata.name=${name}`, resourceVersion: (await live()).metadata?.resourceVersion },
      (_type: string, object: V1MutatingWebhookConfiguration) => void seen.push(object),
      () => undefined,
    );
    try {
      await helmInstall(plane(), release, { webhook: { timeoutSeconds: 7 } }, { upgrade: true });
      await helmInstall(plane(), release, { webhook: { timeoutSeconds: 9 } }, { upgrade: true, extraArgs: ['--server-side=false'] });
      await eventually('the watch seeing the second upgrade', async () => (seen.some((config) => config.webhooks?.[0]?.timeoutSeconds === 9) ? true : undefined));
    } finally {
      watching.abort();
    }
    assert.ok(seen.length >= 2, `${seen.length} versions seen`);
    const empty = seen.filter((config) => !trusted(config)).map((config) => `resourceVersion ${config.metadata?.resourceVersion}: ${bundles(config).map((bundle) => bundle.length).join(', ')} bytes`);
    assert.deepEqual(empty, [], 'versions of the configuration without the CA');
    const final = await live();
    assert.deepEqual(final.webhooks?.map((webhook) => webhook.timeoutSeconds), (webhookConfig()['webhooks'] as unknown[]).map(() => 9), 'the upgrades applied, to every webhook');
    assert.ok(trusted(final));
    // What a GitOps tool holds from now on: the chart with the release's values.
    rendered = await renderChart({ ...VALUES, webhook: { timeoutSeconds: 9 } }, { release: release.name, namespace: release.namespace });
  });

  it('kubectl diff --server-side of the re-rendered chart: no difference', async () => {
    assert.ok(release !== undefined);
    const manifest = rendered.map((object) => `---\n${formatYaml(object)}`).join('');
    const result = await kubectl(['--kubeconfig', plane().kubeconfigPath, 'diff', '--server-side', '-n', release.namespace, '-f', '-'], manifest);
    // kubectl warns when an object's resourceVersion moves under it (a controller writing status): not a difference.
    const said = result.stderr.split('\n').filter((line) => line.trim() !== '' && !/keeps changing, diffing without lock/.test(line));
    assert.deepEqual(said, [], 'kubectl said something');
    assert.equal(result.stdout, '', 'the diff');
    assert.equal(result.code, 0, 'kubectl diff exits 0 when nothing differs');
  });

  it('a server-side apply of the rendered configuration as Flux does it: no conflict, the caBundle kept, not owned by Flux', async () => {
    const client = KubernetesObjectApi.makeApiClient(plane().kubeConfig);
    const before = await live();
    // Without force first: a conflict here would mean the chart sets a field the injector owns.
    await client.patch(webhookConfig(), undefined, undefined, FLUX_MANAGER, false, PatchStrategy.ServerSideApply);
    await client.patch({ ...webhookConfig(), webhooks: (webhookConfig()['webhooks'] as object[]).map((webhook) => ({ ...webhook })) }, undefined, undefined, FLUX_MANAGER, true, PatchStrategy.ServerSideApply);
    const after = await live();
    assert.deepEqual(bundles(after), bundles(before), 'the caBundle unchanged');
    assert.ok(trusted(after));
    const flux = after.metadata?.managedFields?.find((entry) => entry.manager === FLUX_MANAGER);
    assert.ok(flux !== undefined, 'Flux owns what it applied');
    assert.deepEqual(ownedPaths(flux.fieldsV1).filter((path) => path.includes('caBundle')), []);
  });
});
