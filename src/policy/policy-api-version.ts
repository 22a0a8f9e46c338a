/**
 * The versions of the MutatingAdmissionPolicy API, newest first. The objects
 * are the same in both (Kubernetes 1.36's v1 and v1beta1 types, defaults and
 * validation do not differ); what differs is which one a cluster serves:
 * 1.34-1.35 serve v1beta1 behind flags, 1.36+ serve v1 by default and
 * v1beta1 only when turned on.
 */
export const POLICY_API_VERSIONS = ['v1', 'v1beta1'] as const;
export type PolicyApiVersion = (typeof POLICY_API_VERSIONS)[number];
/** `auto`: the newest the cluster serves. */
export type PolicyApiPreference = PolicyApiVersion | 'auto';

export const POLICY_API_GROUP = 'admissionregistration.k8s.io';

export function policyApiVersionString(version: PolicyApiVersion): string {
  return `${POLICY_API_GROUP}/${version}`;
}

export function isPolicyApiVersion(value: string): value is PolicyApiVersion {
  return (POLICY_API_VERSIONS as readonly string[]).includes(value);
}

export function isPolicyApiPreference(value: string): value is PolicyApiPreference {
  return value === 'auto' || isPolicyApiVersion(value);
}

/**
 * The version to use among those SERVED: the preferred one when it is
 * served, else the newest served (a preference never leaves a cluster
 * without its policy); undefined when none is.
 */
export function choosePolicyApiVersion(served: readonly PolicyApiVersion[], preference: PolicyApiPreference): PolicyApiVersion | undefined {
  if (preference !== 'auto' && served.includes(preference)) return preference;
  return POLICY_API_VERSIONS.find((version) => served.includes(version));
}
