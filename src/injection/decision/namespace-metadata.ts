import { NAMESPACE_ANNOTATION_PREFIX, OPENSHIFT_ID_ANNOTATIONS } from '../basics/index.js';

/** What the decision reads of a namespace: its labels, its `envoy-injector.io/` annotations (the proxy defaults) and OpenShift's id ranges (the proxy's uid). */
export interface NamespaceMetadata {
  readonly labels: Readonly<Record<string, string>>;
  /** Only the `envoy-injector.io/` ones and OpenShift's two id ranges; undefined when it has none. */
  readonly annotations: Readonly<Record<string, string>> | undefined;
}

/**
 * The `envoy-injector.io/` annotations of a namespace and OpenShift's two id
 * ranges (`OPENSHIFT_ID_ANNOTATIONS`), undefined when none: all the injector
 * reads, so a cache of namespaces holds nothing else
 * (`kubectl.kubernetes.io/last-applied-configuration` can be large).
 */
export function injectorAnnotations(annotations: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> | undefined {
  if (annotations === undefined) return undefined;
  let kept: Record<string, string> | undefined;
  for (const key of Object.keys(annotations)) {
    const value = annotations[key];
    if ((!key.startsWith(NAMESPACE_ANNOTATION_PREFIX) && !OPENSHIFT_ID_ANNOTATIONS.includes(key)) || typeof value !== 'string') continue;
    kept ??= {};
    kept[key] = value;
  }
  return kept;
}
