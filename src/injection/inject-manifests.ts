import { ManifestError } from '../errors.js';
import { admitPod, type Admission, type AdmitOptions } from './admit-pod.js';
import { applyPodPatch } from './merge/index.js';
import { arrayAt, formatYaml, isJsonObject, parseYamlDocuments, YamlSyntaxError, type JsonObject } from './basics/index.js';
import type { TemplateSet } from './template/index.js';
import { findPodTemplate, replacePodTemplate } from './workloads.js';

/** What happened to one Pod or Pod template of a manifest. */
export interface ManifestReport extends Admission {
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  /** The Pod (template) with the patch applied; undefined when not injected. */
  readonly injected: JsonObject | undefined;
}

export interface ManifestSettings {
  readonly templates: TemplateSet;
  readonly decision: AdmitOptions;
  /** Namespace for objects that name none (as kubectl's current namespace). */
  readonly defaultNamespace?: string;
  /** Labels per namespace, for `explain`; undefined means unknown. */
  readonly namespaceLabels?: (namespace: string) => Readonly<Record<string, string>> | undefined;
  /** The namespace's `envoy-injector.io/` annotations (proxy defaults), for `explain`. */
  readonly namespaceAnnotations?: (namespace: string) => Readonly<Record<string, string>> | undefined;
}

/**
 * Runs the admission decision and merge over every Pod and Pod template of a
 * multi-document YAML stream, as if each were created. Other kinds pass
 * through unchanged; `List` items are walked.
 */
export function processManifests(text: string, settings: ManifestSettings): { objects: unknown[]; reports: ManifestReport[] } {
  let documents: unknown[];
  try {
    documents = parseYamlDocuments(text);
  } catch (error) {
    throw new ManifestError(error instanceof YamlSyntaxError ? error.message : String(error));
  }
  const reports: ManifestReport[] = [];
  const objects = documents.map((document, index) => {
    if (!isJsonObject(document)) {
      throw new ManifestError(`document ${index + 1}: must be a Kubernetes object (a mapping with apiVersion and kind)`);
    }
    return processObject(document, settings, reports);
  });
  return { objects, reports };
}

/** The `inject` command's output: the processed objects as multi-document YAML. */
export function formatManifests(objects: readonly unknown[]): string {
  return objects.map(formatYaml).join('---\n');
}

function processObject(object: JsonObject, settings: ManifestSettings, reports: ManifestReport[]): JsonObject {
  if (object['kind'] === 'List') {
    const items = arrayAt(object, 'items') ?? [];
    return { ...object, items: items.map((item) => (isJsonObject(item) ? processObject(item, settings, reports) : item)) };
  }
  const location = findPodTemplate(object);
  if (location === undefined) return object;
  const namespace = location.namespace ?? settings.defaultNamespace ?? 'default';
  const admission = admitPod({
    operation: 'CREATE',
    kind: { group: '', kind: 'Pod' },
    namespace,
    namespaceLabels: settings.namespaceLabels?.(namespace),
    namespaceAnnotations: settings.namespaceAnnotations?.(namespace),
    pod: location.pod,
    templates: settings.templates,
    options: settings.decision,
  });
  const injected = admission.injection === undefined ? undefined : applyPodPatch(location.pod, admission.injection.patch);
  reports.push({ ...admission, kind: location.kind, name: location.name, namespace, injected });
  return injected === undefined ? object : replacePodTemplate(object, injected);
}
