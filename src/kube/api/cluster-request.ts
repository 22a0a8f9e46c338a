import { existsSync } from 'node:fs';

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * Whether a cluster is to be followed, decided without loading
 * @kubernetes/client-node (even tree-shaken in the bundle, its chunk is the largest),
 * so that local mode never pays for it.
 */
export function clusterRequested(options: {
  kubeconfig: string | undefined;
  env: NodeJS.ProcessEnv;
}): { kind: 'kubeconfig'; path: string } | { kind: 'in-cluster' } | undefined {
  const path = options.kubeconfig ?? options.env['KUBECONFIG'];
  if (path !== undefined && path !== '') return { kind: 'kubeconfig', path };
  if (options.env['KUBERNETES_SERVICE_HOST'] !== undefined && existsSync(SERVICE_ACCOUNT_TOKEN)) return { kind: 'in-cluster' };
  return undefined;
}
