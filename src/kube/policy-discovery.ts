import type { KubeConfig } from '@kubernetes/client-node';
import { POLICY_API_GROUP, POLICY_API_VERSIONS, type PolicyApiVersion } from '../policy/policy-api-version.js';
import { kubeErrorStatus, kubeJson } from './api/index.js';

const RESOURCES = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

/**
 * The MutatingAdmissionPolicy versions the API server serves, newest first,
 * from discovery (`GET /apis/admissionregistration.k8s.io/VERSION`): a
 * version counts when it lists both the policy and its binding. A group
 * version the server does not serve at all answers 404.
 */
export async function servedPolicyApiVersions(kubeConfig: KubeConfig): Promise<PolicyApiVersion[]> {
  const served: PolicyApiVersion[] = [];
  for (const version of POLICY_API_VERSIONS) {
    try {
      const list = (await kubeJson(kubeConfig, { method: 'GET', path: `/apis/${POLICY_API_GROUP}/${version}` })) as { resources?: { name?: unknown }[] } | undefined;
      const names = new Set((list?.resources ?? []).map((resource) => resource.name));
      if (RESOURCES.every((resource) => names.has(resource))) served.push(version);
    } catch (error) {
      if (kubeErrorStatus(error) !== 404) throw error;
    }
  }
  return served;
}
