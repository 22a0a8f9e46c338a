import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it, type TestContext } from 'node:test';
import { AdmissionregistrationV1beta1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { ROOT } from '../helpers/fixtures.js';
import { trackChild } from './child-processes.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, uniqueName, type Release } from './cluster.js';
import { deploymentEnv } from './injector-process.js';

/** The bound for a template change to reach the next Pod. */
const LIVE_CHANGE_MS = 2_000;
const TEMPLATES_ANNOTATION = 'envoy-injector.io/templates';

interface Controller {
  readonly child: ChildProcess;
  readonly port: number;
  readonly logs: string[];
  stop(): Promise<void>;
}

function envoyImage(pod: V1Pod): string | undefined {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((container) => container.name === 'envoy')?.image;
}

forEachKubeVersion('policy mode installed by the chart', (plane, version) => {
  if (version === '1.28') {
    it('helm install --set mode=policy is refused, naming the API and the feature gate', async () => {
      const release = { name: uniqueName('policy'), namespace: uniqueName('policy-system') };
      await assert.rejects(helmInstall(plane(), release, { mode: 'policy' }), /mode: policy needs the MutatingAdmissionPolicy API \(admissionregistration\.k8s\.io\/v1beta1\).*--feature-gates=MutatingAdmissionPolicy=true/s);
      await deleteNamespaces(plane(), [release.namespace]);
    });
    return;
  }

  let release: Release | undefined;
  let controller: Controller | undefined;
  const enabled = uniqueName('policy-enabled');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const policies = () => plane().kubeConfig.makeApiClient(AdmissionregistrationV1beta1Api);
  let probes = 0;
  const dryRunPod = () => core().createNamespacedPod({ namespace: enabled, body: plainPod(`probe-${++probes}`), dryRun: 'All' });

  /** The injector as the Deployment runs it (its environment, the chart's ServiceAccount), on 127.0.0.1. */
  async function startController(): Promise<Controller> {
    assert.ok(release !== undefined);
    const { env, serviceAccount } = await deploymentEnv(plane(), release);
    const kubeconfig = await plane().serviceAccountKubeconfig(release.namespace, serviceAccount);
    const child = spawn(process.execPath, ['bin/envoy-injector.js', 'serve', '--kubeconfig', kubeconfig, '--host', '127.0.0.1', '--port', '0'], {
      cwd: ROOT,
      env: { ...process.env, ...env, KUBECONFIG: kubeconfig },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    trackChild(child);
    const logs: string[] = [];
    createInterface({ input: child.stderr! }).on('line', (line) => logs.push(line));
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the policy controller did not start within 20 s:\n${logs.join('\n')}`)), 20_000);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        logs.push(line);
        const entry = JSON.parse(line) as { msg?: string; port?: number };
        if (typeof entry.port === 'number' && entry.msg?.startsWith('envoy-injector policy mode')) {
          clearTimeout(timer);
          resolve(entry.port);
        }
      });
      void exited.then(() => reject(new Error(`the policy controller exited:\n${logs.join('\n')}`)));
    });
    return {
      child,
      port,
      logs,
      stop: async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        if ((await Promise.race([exited.then(() => true), sleep(15_000, false)])) === false) child.kill('SIGKILL');
      },
    };
  }

  async function readyz(port: number): Promise<number> {
    const response = await fetch(`http://127.0.0.1:${port}/readyz`);
    return response.status;
  }

  async function policyTemplates(): Promise<string | undefined> {
    assert.ok(release !== undefined);
    const policy = await policies().readMutatingAdmissionPolicy({ name: `${release.name}-envoy-injector-${release.namespace}` });
    return policy.metadata?.annotations?.[TEMPLATES_ANNOTATION];
  }

  async function setTemplate(config: string): Promise<void> {
    assert.ok(release !== undefined);
    await core().patchNamespacedConfigMap(
      { name: 'envoy-initializer', namespace: release.namespace, body: [{ op: 'replace', path: '/data/config', value: config }] },
    );
  }

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('policy'), namespace: uniqueName('policy-system') }, { mode: 'policy' });
    await createNamespace(plane(), enabled, { 'envoy-injector.io/inject': 'enabled' });
    controller = await startController();
  });
  after(async () => {
    await controller?.stop();
    if (release !== undefined) {
      await helmUninstall(plane(), release).catch(() => undefined);
      await policies().deleteMutatingAdmissionPolicy({ name: `${release.name}-envoy-injector-${release.namespace}` }).catch(() => undefined);
    }
    await deleteNamespaces(plane(), [enabled]);
  });

  it('installs the binding and no webhook; the injector applies the policy as its ServiceAccount and becomes ready', async () => {
    assert.ok(release !== undefined && controller !== undefined);
    const kinds = release.manifests.map((manifest) => manifest.kind);
    assert.ok(kinds.includes('MutatingAdmissionPolicyBinding'));
    for (const kind of ['MutatingWebhookConfiguration', 'Service']) assert.ok(!kinds.includes(kind), `no ${kind} in policy mode`);
    const port = controller.port;
    await eventually('/readyz 200 (the policy matches the templates)', async () => ((await readyz(port)) === 200 ? true : undefined), 20_000);
    assert.match((await policyTemplates()) ?? '', /^config=sha256:[0-9a-f]{16}$/);
    const forbidden = controller.logs.filter((line) => /\b403\b|forbidden/i.test(line));
    assert.deepEqual(forbidden, [], 'every call the injector made was allowed by the chart\'s RBAC');
  });

  it('injects with the injector stopped: the API server applies the policy itself', async () => {
    assert.ok(controller !== undefined);
    await controller.stop();
    try {
      assert.notEqual(controller.child.exitCode ?? controller.child.signalCode, null, 'the injector process has exited');
      // The API server loads a new policy through its own informer: wait for it to act.
      await eventually('the API server to apply the policy (a dry-run Pod)', async () => (envoyImage(await dryRunPod()) === undefined ? undefined : true), 20_000, 100);
      const pod = await core().createNamespacedPod({ namespace: enabled, body: plainPod('while-stopped') });
      assert.match(envoyImage(pod) ?? '', /^envoyproxy\/envoy:v\d/);
      assert.equal(pod.spec?.initContainers?.[0]?.restartPolicy, 'Always', 'native sidecar (nativeSidecar: auto on 1.34)');
      assert.ok(pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined);
    } finally {
      controller = await startController();
    }
  });

  it(`a ConfigMap change updates the policy and reaches the next Pod within ${LIVE_CHANGE_MS / 1000} s`, async (t: TestContext) => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const changed = performance.now();
    await setTemplate('containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.99.1\n');
    await eventually('the new image in a dry-run Pod', async () => (envoyImage(await dryRunPod()) === 'envoyproxy/envoy:v1.99.1' ? true : undefined), 10_000, 50);
    const elapsed = performance.now() - changed;
    t.diagnostic(`ConfigMap change to the next injected Pod: ${Math.round(elapsed)} ms`);
    assert.ok(elapsed <= LIVE_CHANGE_MS, `took ${Math.round(elapsed)} ms`);
    assert.notEqual(await policyTemplates(), before);
    const port = controller.port;
    await eventually('/readyz 200 again', async () => ((await readyz(port)) === 200 ? true : undefined), 10_000);
  });

  it('an invalid change keeps the last good policy, and the injector stays ready', async () => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const logged = controller.logs.length;
    await setTemplate('containers:\n  - name: NOT_A_NAME\n');
    const logs = controller.logs;
    await eventually('the injector to reject the template', async () => (logs.slice(logged).some((line) => line.includes('invalid sidecar template')) ? true : undefined), 10_000);
    assert.equal(await policyTemplates(), before, 'the policy is unchanged');
    assert.equal(envoyImage(await dryRunPod()), 'envoyproxy/envoy:v1.99.1', 'Pods still get the last good template');
    assert.equal(await readyz(controller.port), 200);
  });
});
