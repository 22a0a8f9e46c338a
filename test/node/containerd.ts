/**
 * containerd for the node tier: its own root, state, socket, configuration and
 * CNI configuration under NODE_DIR, the settings these machines need
 * (CONTRIBUTING.md, "The node tier"), and the tier's images
 * imported into its k8s.io namespace.
 */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { startProcess, type ManagedProcess } from '../e2e/child-processes.js';
import { BRIDGE, CNI_NETWORK, NODE_DIR, POD_SUBNET } from './network.js';

const run = promisify(execFile);
export const CONTAINERD_DIR = join(NODE_DIR, 'containerd');
export const CONTAINERD_SOCKET = join(CONTAINERD_DIR, 'containerd.sock');
/** The CNI configuration folder containerd reads (the primary configuration: the bridge), and the CNI agent edits. */
export const CNI_CONF_DIR = join(CONTAINERD_DIR, 'net.d');
/** A CNI binary folder of the tier's own, after the host's /usr/lib/cni: the CNI agent copies its plugin there. */
export const CNI_BIN_DIR = join(CONTAINERD_DIR, 'cni-bin');
/**
 * containerd's state folder, where it mounts the Pods' network namespaces
 * (netns_mounts_under_state_dir): a shared mount, as every mount of a
 * systemd host is, so that a container mounting it with HostToContainer
 * propagation (the CNI agent) sees the namespaces made after it started.
 */
export const CONTAINERD_STATE_DIR = join(CONTAINERD_DIR, 'state');
/** The primary configuration's file (the bridge). */
export const CNI_CONFLIST = join(CNI_CONF_DIR, `10-${CNI_NETWORK}.conflist`);

export function containerdConfig(pauseImage: string): string {
  return `version = 3
root = '${CONTAINERD_DIR}/root'
state = '${CONTAINERD_STATE_DIR}'

[grpc]
  address = '${CONTAINERD_SOCKET}'

[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '${pauseImage}'

  [plugins.'io.containerd.cri.v1.runtime']
    # Root here has no CAP_SYS_RESOURCE: without this every sandbox fails (runc cannot lower oom_score_adj).
    restrict_oom_score_adj = true
    # The Pods' network namespaces under our state directory, not /run/netns.
    netns_mounts_under_state_dir = true
    enable_cdi = false
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni', '${CNI_BIN_DIR}']
      conf_dir = '${CNI_CONF_DIR}'

  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'

  [plugins.'io.containerd.nri.v1.nri']
    disable = true
`;
}

/** The bridge network: host-local addresses on the documentation range, no gateway (which would turn on the host's ip_forward), no masquerade. */
export function cniConfig(): string {
  return JSON.stringify({
    cniVersion: '1.0.0',
    name: CNI_NETWORK,
    plugins: [{
      type: 'bridge',
      bridge: BRIDGE,
      isGateway: false,
      ipMasq: false,
      hairpinMode: true,
      ipam: { type: 'host-local', ranges: [[{ subnet: POD_SUBNET, rangeStart: POD_SUBNET.replace(/\.0\/\d+$/, '.10') }]], dataDir: join(CONTAINERD_DIR, 'ipam') },
    }],
  }, null, 2);
}

export interface Containerd {
  readonly process: ManagedProcess;
  importImage(archive: string): Promise<void>;
  /** `crictl` against this containerd. */
  crictl(...args: string[]): Promise<string>;
}

/** Imports an OCI layout archive into the node's containerd (the tier's fixed socket), for a test file that builds an image of its own. */
export async function importArchive(archive: string): Promise<void> {
  await run('ctr', ['--address', CONTAINERD_SOCKET, '-n', 'k8s.io', 'images', 'import', archive], { maxBuffer: 16 * 1024 * 1024 }).catch((error: { stderr?: string; message: string }) => {
    throw new Error(`ctr images import ${archive}: ${error.stderr?.trim() ?? error.message}`);
  });
}

export async function startContainerd(pauseImage: string, crictlBin: string): Promise<Containerd> {
  for (const dir of [CNI_CONF_DIR, CNI_BIN_DIR, CONTAINERD_STATE_DIR]) await mkdir(dir, { recursive: true });
  // Unmounted by host.ts with everything under NODE_DIR.
  await run('mount', ['--bind', CONTAINERD_STATE_DIR, CONTAINERD_STATE_DIR]);
  await run('mount', ['--make-rshared', CONTAINERD_STATE_DIR]);
  const configPath = join(CONTAINERD_DIR, 'config.toml');
  await writeFile(configPath, containerdConfig(pauseImage));
  await writeFile(CNI_CONFLIST, cniConfig());
  const managed = startProcess('containerd', 'containerd', ['--config', configPath, '--log-level', 'warn'], join(NODE_DIR, 'containerd.log'));
  const ctr = (...args: string[]): Promise<{ stdout: string }> => run('ctr', ['--address', CONTAINERD_SOCKET, ...args], { maxBuffer: 16 * 1024 * 1024 });
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (managed.child.exitCode !== null) throw new Error(`containerd exited (${managed.child.exitCode}); its log ends:\n${await managed.tail()}`);
    if (await ctr('version').then(() => true, () => false)) break;
    if (Date.now() > deadline) throw new Error(`containerd did not answer on ${CONTAINERD_SOCKET} within 60 s; its log ends:\n${await managed.tail()}`);
    await sleep(100);
  }
  return {
    process: managed,
    importImage: importArchive,
    crictl: async (...args) => (await run(crictlBin, ['--runtime-endpoint', `unix://${CONTAINERD_SOCKET}`, '--image-endpoint', `unix://${CONTAINERD_SOCKET}`, ...args], { maxBuffer: 16 * 1024 * 1024 })).stdout,
  };
}
