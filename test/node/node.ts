/**
 * One Kubernetes node on this machine for the node tier: a control plane of
 * VERSION (test/e2e/control-plane.ts, with the controllers real Pods need),
 * containerd, and a kubelet registered as NODE_NAME, running Pods that name it
 * in spec.nodeName (there is no scheduler). Everything it changes on the host
 * is recorded first and undone by `stop` (host.ts), also after a crashed run.
 *
 * One kubelet per machine: versions run one after the other (run.ts).
 */
import { cp, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { makeCa } from '../../src/tls/certificates.js';
import { freePorts, startControlPlane, type OwnedControlPlane } from '../e2e/control-plane.js';
import type { ManagedProcess } from '../e2e/child-processes.js';
import { kubeBinary, type KubeVersion } from '../e2e/kube-binaries.js';
import { eventually } from '../e2e/cluster.js';
import { ROOT } from '../helpers/fixtures.js';
import { startContainerd, type Containerd } from './containerd.js';
import { prepareHost, restoreHost, trackProcess } from './host.js';
import { buildImage, type BuiltImage } from './images.js';
import { appRecipe, initRecipe, pauseRecipe, PAUSE_IMAGE, standInRecipe } from './image-recipes.js';
import { apiServerKubeletArgs, makeNodeCertificates, startKubelet } from './kubelet.js';
import { NODE_DIR, NODE_IP, NODE_NAME } from './network.js';

/** The versions with a kubelet in KUBE_ASSETS, newest first. */
export const NODE_VERSIONS = ['1.36', '1.34'] as const satisfies readonly KubeVersion[];

export interface KubeNode {
  readonly plane: OwnedControlPlane;
  readonly containerd: Containerd;
  readonly images: readonly BuiltImage[];
  /** Seconds each step took, for the report. */
  readonly timings: Record<string, number>;
  stop(): Promise<void>;
}

const LOGS = join(ROOT, 'node_modules', '.cache', 'envoy-injector-node', 'logs');

let images: Promise<BuiltImage[]> | undefined;

/** Builds (or takes from the cache) the tier's images, once per process. */
export function tierImages(): Promise<BuiltImage[]> {
  images ??= (async () => {
    const recipes = [pauseRecipe(), await initRecipe(), await standInRecipe(), await appRecipe()];
    const built: BuiltImage[] = [];
    for (const recipe of recipes) built.push(await buildImage(recipe));
    return built;
  })();
  return images;
}

export async function startNode(version: KubeVersion): Promise<KubeNode> {
  const timings: Record<string, number> = {};
  const step = async <T>(name: string, work: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    const result = await work();
    timings[name] = Number(((performance.now() - started) / 1000).toFixed(1));
    return result;
  };
  const [kubeletBin, crictlBin] = await Promise.all([kubeBinary('kubelet', version), kubeBinary('crictl', version)]);
  const built = await step('images', tierImages);
  const record = await step('host', prepareHost);
  let plane: OwnedControlPlane | undefined;
  let containerd: Containerd | undefined;
  let kubelet: ManagedProcess | undefined;
  const stop = async (): Promise<void> => {
    const logs = join(LOGS, version);
    await mkdir(logs, { recursive: true });
    for (const name of ['kubelet.log', 'containerd.log']) await cp(join(NODE_DIR, name), join(logs, name)).catch(() => undefined);
    await kubelet?.stop();
    // Then the Pods (their containers, shims and network namespaces), while containerd still runs.
    if (containerd !== undefined) await containerd.crictl('rmp', '--force', '--all').catch(() => undefined);
    await containerd?.process.stop();
    await plane?.stop();
    await restoreHost();
  };
  try {
    const ca = await makeCa({ commonName: `node-tier-ca-${version}`, validDays: 7 });
    const certificates = await makeNodeCertificates(ca);
    plane = await step('control plane', () => startControlPlane(version, {
      ca,
      apiServerArgs: apiServerKubeletArgs(certificates),
      // disruption: the PodDisruptionBudget's status, which the Eviction API reads (injector-pod.test.ts drains the node);
      // daemonset: the CNI agent's Pods (capture-cni.test.ts).
      moreControllers: ['job', 'disruption', 'daemonset', 'service-ca-certificate-publisher-controller'],
      // Pods reach the API server at the node's address (relay.ts), as a cluster's Pods reach the kubernetes Service.
      servingHosts: [NODE_IP],
    }));
    containerd = await step('containerd', () => startContainerd(PAUSE_IMAGE, crictlBin));
    await trackProcess(record, 'containerd', containerd.process.child.pid ?? 0);
    const started = containerd;
    await step('image import', async () => {
      for (const image of built) await started.importImage(image.archive);
    });
    const [kubeletPort, healthzPort] = await freePorts(2);
    kubelet = await startKubelet(kubeletBin, plane.server, certificates, { kubelet: kubeletPort ?? 10250, healthz: healthzPort ?? 10248 });
    await trackProcess(record, 'kubelet', kubelet.child.pid ?? 0);
    const running = kubelet;
    const core = plane.kubeConfig.makeApiClient(CoreV1Api);
    await step('node ready', () => eventually(`Node ${NODE_NAME} Ready (kubelet ${version}; its log: ${join(NODE_DIR, 'kubelet.log')})`, async () => {
      if (running.child.exitCode !== null) throw new Error(`the kubelet exited (${running.child.exitCode}): ${await running.tail()}`);
      const node = await core.readNode({ name: NODE_NAME });
      return node.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') === true ? true : undefined;
    }, 120_000, 250));
    return { plane, containerd, images: built, timings, stop };
  } catch (error) {
    await stop().catch((stopError: unknown) => process.stderr.write(`node tier: cleaning up after a failed start: ${(stopError as Error).message}\n`));
    throw error;
  }
}
