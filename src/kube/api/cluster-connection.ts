import { KubeConfig } from '@kubernetes/client-node';
import { UsageError } from '../../errors.js';
import { clusterRequested } from './cluster-request.js';

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
  const request = clusterRequested(options);
  if (request === undefined) return undefined;
  const kubeConfig = new KubeConfig();
  if (request.kind === 'kubeconfig') {
    const { path } = request;
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
  kubeConfig.loadFromCluster();
  return { kubeConfig, source: 'in-cluster service account', contextNamespace: contextNamespace(kubeConfig) };
}

function contextNamespace(kubeConfig: KubeConfig): string | undefined {
  const context = kubeConfig.getContextObject(kubeConfig.getCurrentContext());
  return context?.namespace?.trim() || undefined;
}
