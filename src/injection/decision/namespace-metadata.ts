import { NAMESPACE_ANNOTATION_PREFIX } from '../basics/index.js';

/** What the decision reads of a namespace: its labels, and its `envoy-injector.io/` annotations (the proxy defaults). */
export interface NamespaceMetadata {
  readonly labels: Readonly<Record<string, string>>;
  /** Only the `envoy-injector.io/` ones; undefined when it has none. */
  readonly annotations: Readonly<Record<string, string>> | undefined;
}

/**
 * The `envoy-injector.io/` annotations of a namespace, undefined when none:
 * all the injector reads, so a cache of namespaces holds nothing else
 * (`kubectl.kubernetes.io/last-applied-configuration` can be large).
 */
export function injectorAnnotations(annotations: Readonly<Record<string, string>> | undefined): Readonly<Record<string, string>> | undefined {
  if (annotations === undefined) return undefined;
  let kept: Record<string, string> | undefined;
  for (const key of Object.keys(annotations)) {
    const value = annotations[key];
    if (!key.startsWith(NAMESPACE_ANNOTATION_PREFIX) || typeof value !== 'string') continue;
    kept ??= {};
    kept[key] = value;
  }
  return kept;
}
