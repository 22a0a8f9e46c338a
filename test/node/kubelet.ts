/**
 * The node tier's kubelet: its own configuration, root, Pod logs and
 * certificates under NODE_DIR; its client certificate is system:node:NAME in
 * system:nodes, so the Node authorizer and NodeRestriction judge it as in a
 * cluster; its serving certificate is one the API server verifies (pods/log,
 * exec).
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { KeyPair } from '../../src/tls/certificates.js';
import { startProcess, type ManagedProcess } from '../e2e/child-processes.js';
import { CONTAINERD_SOCKET } from './containerd.js';
import { CGROUP_ROOT, NODE_DIR, NODE_IP, NODE_NAME } from './network.js';

const run = promisify(execFile);
export const KUBELET_DIR = join(NODE_DIR, 'kubelet');
export const POD_LOGS_DIR = join(NODE_DIR, 'pod-logs');
/** The kubelet's own log (`--v=1`: each failed probe, each probe result that changes a container). */
export const KUBELET_LOG = join(NODE_DIR, 'kubelet.log');
/** The kubelet's static Pods (staticPodPath): a Pod it starts without the API server, as a control plane node's. */
export const STATIC_POD_DIR = join(NODE_DIR, 'static-pods');
const PKI = join(NODE_DIR, 'pki');

export interface NodeCertificates {
  readonly caFile: string;
  /** The API server's client certificate towards kubelets (system:masters). */
  readonly apiServerClient: { cert: string; key: string };
  readonly kubeletClient: { cert: string; key: string };
  readonly kubeletServing: { cert: string; key: string };
}

/** Signs the node's certificates with the cluster CA (openssl: a client certificate with an O needs more than selfsigned gives). */
export async function makeNodeCertificates(ca: KeyPair): Promise<NodeCertificates> {
  await mkdir(PKI, { recursive: true });
  const caFile = join(PKI, 'ca.crt');
  const caKey = join(PKI, 'ca.key');
  await writeFile(caFile, ca.cert);
  await writeFile(caKey, ca.key, { mode: 0o600 });
  const sign = async (name: string, subject: string, extensions: string): Promise<{ cert: string; key: string }> => {
    const key = join(PKI, `${name}.key`);
    const csr = join(PKI, `${name}.csr`);
    const cert = join(PKI, `${name}.crt`);
    const ext = join(PKI, `${name}.ext`);
    await writeFile(ext, extensions);
    await run('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-subj', subject, '-out', csr]);
    await run('openssl', ['x509', '-req', '-in', csr, '-CA', caFile, '-CAkey', caKey, '-CAcreateserial', '-days', '7', '-sha256', '-extfile', ext, '-out', cert]);
    return { cert, key };
  };
  return {
    caFile,
    apiServerClient: await sign('apiserver-kubelet-client', '/O=system:masters/CN=kube-apiserver-kubelet-client', 'extendedKeyUsage=clientAuth\n'),
    kubeletClient: await sign('kubelet-client', `/O=system:nodes/CN=system:node:${NODE_NAME}`, 'extendedKeyUsage=clientAuth\n'),
    kubeletServing: await sign('kubelet-serving', `/CN=${NODE_NAME}`, `extendedKeyUsage=serverAuth\nsubjectAltName=IP:${NODE_IP},DNS:${NODE_NAME}\n`),
  };
}

/** The kube-apiserver flags that let it reach this kubelet (logs, exec) with a verified certificate. */
export function apiServerKubeletArgs(certificates: NodeCertificates): string[] {
  return [
    `--kubelet-certificate-authority=${certificates.caFile}`,
    `--kubelet-client-certificate=${certificates.apiServerClient.cert}`,
    `--kubelet-client-key=${certificates.apiServerClient.key}`,
    '--kubelet-preferred-address-types=InternalIP',
  ];
}

export function kubeletConfig(certificates: NodeCertificates, ports: { kubelet: number; healthz: number }): Record<string, unknown> {
  return {
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    address: NODE_IP,
    port: ports.kubelet,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: ports.healthz,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: certificates.caFile } },
    authorization: { mode: 'Webhook' },
    tlsCertFile: certificates.kubeletServing.cert,
    tlsPrivateKeyFile: certificates.kubeletServing.key,
    containerRuntimeEndpoint: `unix://${CONTAINERD_SOCKET}`,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: `/${CGROUP_ROOT}`,
    cgroupsPerQOS: true,
    // These machines mount cgroup v1; 1.36 refuses it unless told.
    failCgroupV1: false,
    failSwapOn: false,
    // Otherwise it adds rules to the host's own INPUT and OUTPUT chains.
    makeIPTablesUtilChains: false,
    podLogsDir: POD_LOGS_DIR,
    volumePluginDir: join(KUBELET_DIR, 'volume-plugins'),
    // Our own file: an empty value makes containerd copy the host's, which names a nameserver off this machine.
    resolvConf: join(NODE_DIR, 'resolv.conf'),
    clusterDomain: 'cluster.local',
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'nodefs.inodesFree': '1%', 'imagefs.available': '1%' },
    // The images are built locally and cannot be pulled again: never collected.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    nodeStatusUpdateFrequency: '2s',
    syncFrequency: '10s',
    fileCheckFrequency: '20s',
    staticPodPath: STATIC_POD_DIR,
    maxPods: 60,
  };
}

export async function startKubelet(bin: string, server: string, certificates: NodeCertificates, ports: { kubelet: number; healthz: number }): Promise<ManagedProcess> {
  await mkdir(KUBELET_DIR, { recursive: true });
  await mkdir(POD_LOGS_DIR, { recursive: true });
  await mkdir(STATIC_POD_DIR, { recursive: true });
  await writeFile(join(NODE_DIR, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  const kubeconfig = join(NODE_DIR, 'kubelet.kubeconfig');
  await writeFile(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'node', cluster: { server, 'certificate-authority': certificates.caFile } }],
    users: [{ name: 'node', user: { 'client-certificate': certificates.kubeletClient.cert, 'client-key': certificates.kubeletClient.key } }],
    contexts: [{ name: 'node', context: { cluster: 'node', user: 'node' } }],
    'current-context': 'node',
  }));
  const config = join(NODE_DIR, 'kubelet-config.json');
  await writeFile(config, JSON.stringify(kubeletConfig(certificates, ports), null, 2));
  return startProcess('kubelet', bin, [
    `--config=${config}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${KUBELET_DIR}`,
    `--cert-dir=${PKI}`,
    `--node-ip=${NODE_IP}`,
    `--hostname-override=${NODE_NAME}`,
    '--v=1',
  ], KUBELET_LOG);
}
