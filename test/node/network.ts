/**
 * The node tier's fixed addresses. One kubelet runs per machine at a time (its
 * device-plugin socket path is fixed), so one node tier does: these names and
 * addresses are the tier's own, which is what lets a run find and remove what
 * a crashed run left behind.
 */

/** Pods' addresses: a documentation range (RFC 5737), never routed. Not 192.0.2.0/24: this machine's own range. */
export const POD_SUBNET = '198.51.100.0/24';
/** The node's address, held by the bridge: the kubelet's --node-ip, and where Pods reach the host. */
export const NODE_IP = '198.51.100.1';
export const BRIDGE = 'ei-node0';
export const CNI_NETWORK = 'envoy-injector-node';
export const NODE_NAME = 'ei-node';
/** Where the recorder listens (on the bridge): the stand-in's and the app's records, baked into their images. */
export const RECORDER_PORT = 15999;
export const RECORDER_ADDRESS = `${NODE_IP}:${RECORDER_PORT}`;
/** The tier's working directory: containerd's and the kubelet's roots, certificates, logs, and the record of host changes. */
export const NODE_DIR = '/tmp/envoy-injector-node';
/** The kubelet's cgroup root (cgroupfs), in every v1 hierarchy. */
export const CGROUP_ROOT = 'envoy-injector-node';
