/**
 * containerd for the node tier: its own root, state, socket, configuration and
 * CNI configuration under NODE_DIR, the settings these machines need
 * (test/node/README in docs/design.md "The node tier"), and the tier's images
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

export function containerdConfig(pauseImage: string): string {
  return `version = 3
root = '${CONTAINERD_DIR}/root'
state = '${CONTAINERD_DIR}/state'

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
      bin_dirs = ['/usr/lib/cni']
      conf_dir = '${CONTAINERD_DIR}/net.d'

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
  await mkdir(join(CONTAINERD_DIR, 'net.d'), { recursive: true });
  const configPath = join(CONTAINERD_DIR, 'config.toml');
  await writeFile(configPath, containerdConfig(pauseImage));
  await writeFile(join(CONTAINERD_DIR, 'net.d', `10-${CNI_NETWORK}.conflist`), cniConfig());
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
