/**
 * A real Kubernetes control plane on loopback for tests: etcd +
 * kube-apiserver (+ kube-controller-manager), the way controller-runtime's
 * envtest runs them. Binaries come from KUBE_ASSETS (see kube-binaries.ts).
 *
 * How a test file uses it:
 *
 *   import { controlPlane, forEachKubeVersion } from './control-plane.js';
 *   forEachKubeVersion('my scenario', (plane) => {
 *     it('...', async () => {
 *       const { kubeConfig, kubeconfigPath } = plane();   // admin client, and a file for helm --kubeconfig
 *       const token = await plane().serviceAccountToken('ns', 'sa');
 *     });
 *   });
 *
 * `npm run test:e2e` (test/e2e/run.ts) starts one control plane per version
 * for the whole run and hands it to every test file through
 * E2E_CONTROL_PLANES; a file run on its own (`node --import tsx --test
 * test/e2e/x.test.ts`) starts its own, stopped when the file ends. Files run
 * one at a time and share the cluster: use your own namespaces and release
 * names, and uninstall what you install (see cluster.ts) so the next file
 * does not meet your webhooks. To run the injector as the chart's
 * ServiceAccount, listening on the Service's ClusterIP, see
 * `startChartInjector` in injector-process.ts.
 */
import { generateKeyPairSync, randomBytes, randomInt } from 'node:crypto';
import { rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import type { PolicyApiVersion } from '../../src/policy/policy-api-version.js';
import { makeCa, makeServingCertificate, type KeyPair } from '../../src/tls/certificates.js';
import { startProcess, type ManagedProcess } from './child-processes.js';
import { KUBE_VERSIONS, kubeBinary, type KubeVersion } from './kube-binaries.js';

export { KUBE_VERSIONS, type KubeVersion } from './kube-binaries.js';

/** What a test needs to reach a running control plane; also what the runner passes to test files. */
export interface ControlPlaneAddress {
  readonly version: KubeVersion;
  /** https://127.0.0.1:PORT */
  readonly server: string;
  /** PEM of the CA that signed the API server's certificate (and the ServiceAccount tokens' issuer). */
  readonly ca: string;
  /** A static token in group system:masters. */
  readonly adminToken: string;
  /** The ClusterIP range: loopback only, so the API server never dials off this machine. */
  readonly serviceRange: string;
  readonly controllers: boolean;
}

export interface ControlPlane extends ControlPlaneAddress {
  /** An admin client (system:masters). */
  readonly kubeConfig: KubeConfig;
  /** An admin kubeconfig file, for helm --kubeconfig. */
  readonly kubeconfigPath: string;
  /** A token of ServiceAccount NAMESPACE/NAME from the TokenRequest API (what `kubectl create token` does). */
  serviceAccountToken(namespace: string, name: string, expirationSeconds?: number): Promise<string>;
  /** A kubeconfig file that authenticates as ServiceAccount NAMESPACE/NAME, its context's namespace set to NAMESPACE. */
  serviceAccountKubeconfig(namespace: string, name: string): Promise<string>;
}

interface StartOptions {
  /** kube-controller-manager too: default ServiceAccounts, Deployments and StatefulSets making Pods, namespace deletion. */
  readonly controllers?: boolean;
  /**
   * Serve MutatingAdmissionPolicy through admissionregistration.k8s.io/v1beta1:
   * on 1.34 with its feature gate (the default there: the beta is what 1.34
   * has), on 1.36 beside the GA v1 (not the default: 1.36 serves only v1, as a
   * cluster out of the box). 1.28 has none.
   */
  readonly betaPolicyApi?: boolean;
  /** More kube-controller-manager flags (the bench lifts its client's rate limit: --kube-api-qps, --kube-api-burst). */
  readonly controllerManagerArgs?: readonly string[];
  /**
   * Controllers beyond the usual ones: `disruption` (the PodDisruptionBudgets' status, which the eviction API
   * reads), OpenShift's service-ca-certificate-publisher-controller (the node tier).
   */
  readonly moreControllers?: readonly string[];
  /** The cluster CA (default: a new one), for a caller that signs certificates of its own with it (a kubelet's). */
  readonly ca?: KeyPair;
  /** More names and addresses the API server's serving certificate holds (the node tier reaches it from Pods). */
  readonly servingHosts?: readonly string[];
  /** More kube-apiserver flags, e.g. how it reaches kubelets. */
  readonly apiServerArgs?: readonly string[];
}

/**
 * The MutatingAdmissionPolicy version the shared control plane of VERSION
 * serves (started with the defaults of startControlPlane): v1 on 1.36, the
 * flag-enabled v1beta1 on 1.34, none on 1.28.
 */
export function servedPolicyApiVersion(version: KubeVersion): PolicyApiVersion | undefined {
  return version === '1.36' ? 'v1' : version === '1.34' ? 'v1beta1' : undefined;
}

/** The API server flags that serve MutatingAdmissionPolicy's v1beta1 on VERSION, as an administrator would set them. */
export function betaPolicyApiFlags(version: KubeVersion): string[] {
  if (version === '1.28') throw new Error('Kubernetes 1.28 has no MutatingAdmissionPolicy');
  const runtimeConfig = '--runtime-config=admissionregistration.k8s.io/v1beta1=true';
  // On 1.36 the feature is GA: its gate is locked on, and naming it only warns.
  return version === '1.34' ? ['--feature-gates=MutatingAdmissionPolicy=true', runtimeConfig] : [runtimeConfig];
}

/** A running control plane this process started, with its processes. */
export interface OwnedControlPlane extends ControlPlane {
  readonly processes: readonly ManagedProcess[];
  /** etcd's client URL (http, loopback): for tests that look at what the API server stored. */
  readonly etcdUrl: string;
  /**
   * Stops kube-apiserver and starts it again on the same etcd, port and
   * certificates, with OPTIONS' flags (what a control-plane upgrade or a
   * flag change does); resolves once it is ready again.
   */
  restartApiServer(options: Pick<StartOptions, 'betaPolicyApi'>): Promise<void>;
  stop(): Promise<void>;
}

const ENV = 'E2E_CONTROL_PLANES';
const READY_TIMEOUT_MS = 90_000;

/** Starts etcd and kube-apiserver (and the controller manager if asked) on free loopback ports; throws with the logs' tails if one fails. */
export async function startControlPlane(version: KubeVersion, options: StartOptions = {}): Promise<OwnedControlPlane> {
  const controllers = options.controllers ?? true;
  const betaPolicyApi = options.betaPolicyApi ?? version === '1.34';
  const [etcdBin, apiserverBin, controllerManagerBin] = await Promise.all([
    kubeBinary('etcd', version),
    kubeBinary('kube-apiserver', version),
    controllers ? kubeBinary('kube-controller-manager', version) : undefined,
  ]);
  const dir = await mkdtemp(join(tmpdir(), `ei-kube-${version}-`));
  const processes: ManagedProcess[] = [];
  const stop = async (): Promise<void> => {
    // The API server first, so it does not log etcd's absence for seconds.
    for (const managed of [...processes].reverse()) await managed.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const ca = options.ca ?? (await makeCa({ commonName: `kube-test-ca-${version}`, validDays: 7 }));
    const serving = await makeServingCertificate({ ca, hosts: ['127.0.0.1', 'localhost', 'kubernetes.default.svc', ...(options.servingHosts ?? [])], validDays: 7 });
    const serviceAccountKey = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const adminToken = randomBytes(24).toString('hex');
    const files = {
      ca: join(dir, 'ca.crt'),
      cert: join(dir, 'apiserver.crt'),
      key: join(dir, 'apiserver.key'),
      saPublic: join(dir, 'sa.pub'),
      saPrivate: join(dir, 'sa.key'),
      tokens: join(dir, 'tokens.csv'),
    };
    await Promise.all([
      writeFile(files.ca, ca.cert),
      writeFile(files.cert, serving.cert),
      writeFile(files.key, serving.key, { mode: 0o600 }),
      writeFile(files.saPublic, serviceAccountKey.publicKey.export({ type: 'spki', format: 'pem' })),
      writeFile(files.saPrivate, serviceAccountKey.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 }),
      writeFile(files.tokens, `${adminToken},admin,admin-uid,system:masters\n`, { mode: 0o600 }),
    ]);
    const [etcdClient, etcdPeer, apiPort, controllerManagerPort] = await freePorts(4);
    // A /24 of its own under 127.100.0.0/16: loopback, and runs of other checkouts on the machine
    // rarely get the same ClusterIPs (each test binds its Service's ClusterIP:port).
    const serviceRange = `127.${100 + randomInt(100)}.${randomInt(256)}.0/24`;

    const etcd = startProcess('etcd', etcdBin, [
      '--name=t',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClient}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClient}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeer}`,
      `--initial-cluster=t=http://127.0.0.1:${etcdPeer}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ], join(dir, 'etcd.log'));
    processes.push(etcd);
    await waitFor(etcd, 'etcd /health', async () => (await httpGet(`http://127.0.0.1:${etcdClient}/health`)).body.includes('"health":"true"'));

    const server = `https://127.0.0.1:${apiPort}`;
    const apiserverArgs = (beta: boolean): string[] => [
      `--etcd-servers=http://127.0.0.1:${etcdClient}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      `--secure-port=${apiPort}`,
      `--cert-dir=${dir}`,
      `--tls-cert-file=${files.cert}`,
      `--tls-private-key-file=${files.key}`,
      `--client-ca-file=${files.ca}`,
      `--token-auth-file=${files.tokens}`,
      '--authorization-mode=Node,RBAC',
      '--service-account-issuer=https://kubernetes.default.svc',
      `--service-account-key-file=${files.saPublic}`,
      `--service-account-signing-key-file=${files.saPrivate}`,
      `--service-cluster-ip-range=${serviceRange}`,
      '--allow-privileged=true',
      '--profiling=false',
      ...(beta ? betaPolicyApiFlags(version) : []),
      ...(options.apiServerArgs ?? []),
    ];
    let starts = 0;
    const startApiServer = async (beta: boolean): Promise<void> => {
      starts += 1;
      const apiserver = startProcess('kube-apiserver', apiserverBin, apiserverArgs(beta), join(dir, `kube-apiserver-${starts}.log`));
      // Before etcd in `processes` (stopped in reverse), after it in start order.
      processes.splice(1, 0, apiserver);
      await waitFor(apiserver, 'kube-apiserver /readyz', async () => {
        const response = await httpGet(`${server}/readyz`, { ca: ca.cert, token: adminToken });
        return response.status === 200 && response.body === 'ok';
      });
    };
    const restartApiServer = async (restart: Pick<StartOptions, 'betaPolicyApi'>): Promise<void> => {
      const running = processes[1];
      if (running === undefined || running.name !== 'kube-apiserver') throw new Error('no kube-apiserver to restart');
      processes.splice(1, 1);
      await running.stop();
      await startApiServer(restart.betaPolicyApi ?? false);
    };
    await startApiServer(betaPolicyApi);

    const address: ControlPlaneAddress = { version, server, ca: ca.cert, adminToken, serviceRange, controllers };
    const plane = await connect(address, dir);
    if (controllers && controllerManagerBin !== undefined) {
      const controllerManager = startProcess('kube-controller-manager', controllerManagerBin, [
        `--kubeconfig=${plane.kubeconfigPath}`,
        `--authentication-kubeconfig=${plane.kubeconfigPath}`,
        `--authorization-kubeconfig=${plane.kubeconfigPath}`,
        '--bind-address=127.0.0.1',
        `--secure-port=${controllerManagerPort}`,
        `--cert-dir=${dir}`,
        `--service-account-private-key-file=${files.saPrivate}`,
        `--root-ca-file=${files.ca}`,
        '--use-service-account-credentials=false',
        '--leader-elect=false',
        `--controllers=${['serviceaccount', 'serviceaccount-token', 'namespace', 'garbagecollector', 'root-ca-cert-publisher', 'deployment', 'replicaset', 'statefulset', ...(options.moreControllers ?? [])].join(',')}`,
        ...(options.controllerManagerArgs ?? []),
      ], join(dir, 'kube-controller-manager.log'));
      processes.push(controllerManager);
      // Its serviceaccount controller gives `default` its ServiceAccount: the sign that it runs.
      const { CoreV1Api } = await import('@kubernetes/client-node');
      const core = plane.kubeConfig.makeApiClient(CoreV1Api);
      await waitFor(controllerManager, 'kube-controller-manager to create ServiceAccount default/default', async () =>
        core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' }).then(() => true, () => false),
      );
    }
    return { ...plane, processes, etcdUrl: `http://127.0.0.1:${etcdClient}`, restartApiServer, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Clients of a control plane that is already running (started by this process or by the runner). */
export async function connect(address: ControlPlaneAddress, dir?: string): Promise<ControlPlane> {
  const { KubeConfig, CoreV1Api } = await import('@kubernetes/client-node');
  const work = dir ?? (await mkdtemp(join(tmpdir(), `ei-kubeconfig-${address.version}-`)));
  if (dir === undefined) process.once('exit', () => rmSync(work, { recursive: true, force: true }));
  const kubeconfig = (user: { name: string; token: string }, namespace = 'default'): string =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server: address.server, 'certificate-authority-data': Buffer.from(address.ca).toString('base64') } }],
      users: [{ name: user.name, user: { token: user.token } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: user.name, namespace } }],
      'current-context': 'test',
    });
  const kubeconfigPath = join(work, 'admin.kubeconfig');
  await writeFile(kubeconfigPath, kubeconfig({ name: 'admin', token: address.adminToken }), { mode: 0o600 });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const serviceAccountToken = async (namespace: string, name: string, expirationSeconds = 3600): Promise<string> => {
    const response = await core.createNamespacedServiceAccountToken({ name, namespace, body: { spec: { audiences: [], expirationSeconds } } });
    const token = response.status?.token;
    if (token === undefined || token === '') throw new Error(`TokenRequest for ServiceAccount ${namespace}/${name} returned no token`);
    return token;
  };
  let files = 0;
  return {
    ...address,
    kubeConfig,
    kubeconfigPath,
    serviceAccountToken,
    serviceAccountKubeconfig: async (namespace, name) => {
      files += 1;
      const path = join(work, `sa-${namespace}-${name}-${files}.kubeconfig`);
      await writeFile(path, kubeconfig({ name: `${namespace}-${name}`, token: await serviceAccountToken(namespace, name) }, namespace), { mode: 0o600 });
      return path;
    },
  };
}

/** The versions this run covers: E2E_KUBE_VERSIONS (comma-separated) or all. */
export function selectedVersions(): readonly KubeVersion[] {
  const wanted = process.env['E2E_KUBE_VERSIONS'];
  if (wanted === undefined || wanted === '') return KUBE_VERSIONS;
  const list = wanted.split(',').map((version) => version.trim());
  for (const version of list) if (!(KUBE_VERSIONS as readonly string[]).includes(version)) throw new Error(`E2E_KUBE_VERSIONS: ${version} is not one of ${KUBE_VERSIONS.join(', ')}`);
  return KUBE_VERSIONS.filter((version) => list.includes(version));
}

/** The runner's control planes, as it passes them to test files. */
export function sharedAddresses(): Partial<Record<KubeVersion, ControlPlaneAddress>> {
  const raw = process.env[ENV];
  return raw === undefined || raw === '' ? {} : (JSON.parse(raw) as Partial<Record<KubeVersion, ControlPlaneAddress>>);
}

export function sharedAddressesEnv(planes: readonly ControlPlaneAddress[]): Record<string, string> {
  const addresses = Object.fromEntries(planes.map(({ version, server, ca, adminToken, serviceRange, controllers }) => [version, { version, server, ca, adminToken, serviceRange, controllers }]));
  return { [ENV]: JSON.stringify(addresses) };
}

const planes = new Map<KubeVersion, Promise<ControlPlane>>();
const owned: OwnedControlPlane[] = [];
let stopHooked = false;

/** This process's control plane of VERSION: the runner's, or one started now and stopped when the process's tests end. */
export function controlPlane(version: KubeVersion): Promise<ControlPlane> {
  let plane = planes.get(version);
  if (plane === undefined) {
    const shared = sharedAddresses()[version];
    plane =
      shared !== undefined
        ? connect(shared)
        : startControlPlane(version).then((started) => {
            owned.push(started);
            return started;
          });
    planes.set(version, plane);
  }
  return plane;
}

/** `describe(TITLE on VERSION)` for every selected version, BODY given the version's control plane (ready in its tests and hooks). */
export function forEachKubeVersion(title: string, body: (plane: () => ControlPlane, version: KubeVersion) => void): void {
  if (!stopHooked) {
    stopHooked = true;
    // At the top level: runs once every test of the file is done, failed or not.
    after(async () => {
      for (const plane of owned.splice(0)) await plane.stop();
    });
  }
  for (const version of selectedVersions()) {
    describe(`${title} (Kubernetes ${version})`, () => {
      let current: ControlPlane | undefined;
      before(async () => {
        current = await controlPlane(version);
      });
      body(() => {
        if (current === undefined) throw new Error(`the Kubernetes ${version} control plane did not start (see the before hook's error)`);
        return current;
      }, version);
    });
  }
}

/** Polls CHECK until true; throws naming WHAT, with the process's log tail, if it exits or READY_TIMEOUT_MS passes. */
async function waitFor(managed: ManagedProcess, what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  let exitCode: number | string | undefined;
  void managed.exited.then((code) => (exitCode = code));
  for (;;) {
    if (exitCode !== undefined) throw new Error(`${managed.name} exited (${exitCode}) before ${what}; its log ends:\n${await managed.tail()}`);
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${READY_TIMEOUT_MS / 1000} s waiting for ${what}; ${managed.name}'s log ends:\n${await managed.tail()}`);
    await sleep(100);
  }
}

export async function freePorts(count: number): Promise<number[]> {
  // All held open at once so that they differ; a race with another process remains possible and shows as a start failure.
  const servers = await Promise.all(
    Array.from({ length: count }, () => new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve(server));
    })),
  );
  const ports = servers.map((server) => {
    const address = server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  });
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  return ports;
}

async function httpGet(url: string, options: { ca?: string; token?: string } = {}): Promise<{ status: number; body: string }> {
  const secure = url.startsWith('https:');
  const { request: plain } = await import('node:http');
  return new Promise((resolve, reject) => {
    const send = secure ? request : plain;
    const req = send(url, { ca: options.ca, headers: options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }, timeout: 5_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body }));
    });
    req.once('timeout', () => req.destroy(new Error(`GET ${url}: no answer in 5 s`)));
    req.once('error', reject);
    req.end();
  });
}
