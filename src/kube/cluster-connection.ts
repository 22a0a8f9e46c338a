import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { UsageError } from '../errors.js';

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

export interface ClusterConnection {
  readonly kubeConfig: KubeConfig;
  /** Where the configuration came from, for logs. */
  readonly source: string;
  /** The namespace of the kubeconfig context or service account, if any. */
  readonly contextNamespace: string | undefined;
}

/**
 * The cluster to watch: an explicit kubeconfig (flag or KUBECONFIG), else the
 * in-cluster service account, else none (local mode). A kubeconfig that merely
 * sits in ~/.kube does not count: `npm start` on a laptop stays local unless
 * asked.
 */
export function connectToCluster(options: { kubeconfig: string | undefined; env: NodeJS.ProcessEnv }): ClusterConnection | undefined {
  const kubeConfig = new KubeConfig();
  const path = options.kubeconfig ?? options.env['KUBECONFIG'];
  if (path !== undefined && path !== '') {
    try {
      if (options.kubeconfig !== undefined) kubeConfig.loadFromFile(path);
      // KUBECONFIG may list several files; client-node merges them as kubectl does.
      else kubeConfig.loadFromDefault();
    } catch (error) {
      throw new UsageError(`cannot load kubeconfig ${path}: ${(error as Error).message}`);
    }
    if (kubeConfig.getCurrentCluster() === null) throw new UsageError(`kubeconfig ${path}: no current context with a cluster`);
    return { kubeConfig, source: `kubeconfig ${path}`, contextNamespace: contextNamespace(kubeConfig) };
  }
  if (options.env['KUBERNETES_SERVICE_HOST'] !== undefined && existsSync(SERVICE_ACCOUNT_TOKEN)) {
    kubeConfig.loadFromCluster();
    return { kubeConfig, source: 'in-cluster service account', contextNamespace: contextNamespace(kubeConfig) };
  }
  return undefined;
}

function contextNamespace(kubeConfig: KubeConfig): string | undefined {
  const context = kubeConfig.getContextObject(kubeConfig.getCurrentContext());
  return context?.namespace?.trim() || undefined;
}
