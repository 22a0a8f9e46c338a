import {
  ALL_OVERRIDES,
  Annotations,
  arrayAt,
  CAPTURE_CHECK_NAME,
  CAPTURE_INIT_NAME,
  CAPTURE_LOCK_VOLUME,
  entryName,
  objectAt,
  own,
  OVERRIDE_ANNOTATION_PREFIX,
  type Admission,
  type JsonObject,
  type JsonValue,
  type OverrideName,
  type SidecarTemplate,
  type TemplateSet,
} from '../injection/index.js';

/**
 * What an injected review's answer holds beyond its decision: the same for
 * every Pod of one shape (see podShape), so computed once per shape.
 */
export interface MemoizedInjection {
  readonly injection: NonNullable<Admission['injection']>;
  readonly overrides: Admission['overrides'];
  /** The overrides' and the merge's warnings (the decision's come first, per request). */
  readonly warnings: readonly string[];
  /**
   * base64 of the encoded JSON Patch, as the response carries it, in pieces
   * between which the Pod's ServiceAccount token volume name goes
   * (`fillPatch`); one piece when the patch names none. The `injection`'s
   * patch holds TOKEN_MOUNT_PLACEHOLDER there.
   */
  readonly patch: readonly string[];
}

export interface PatchMemoLimits {
  readonly maxEntries: number;
  /** Bound on the accounted size of keys and answers (see entryBytes). */
  readonly maxBytes: number;
}

export const DEFAULT_PATCH_MEMO_LIMITS: PatchMemoLimits = { maxEntries: 512, maxBytes: 8 * 1024 * 1024 };

/**
 * The replicas of one Deployment send byte-identical Pod templates, and the
 * patch depends only on the template, the Pod's shape and the options: this
 * bounded LRU map from shape to answer skips the merge and the encoding for
 * all but the first Pod of a rollout. It serves one template set at a time
 * and forgets everything when the set changes. Not shared between processes,
 * no clock: a plain data structure the server passes into each review.
 */
export class PatchMemo {
  readonly limits: PatchMemoLimits;
  #templates: TemplateSet | undefined;
  readonly #entries = new Map<string, { readonly value: MemoizedInjection; readonly bytes: number }>();
  #bytes = 0;
  /** The entry last set or moved to the end of #entries (the most recently used), if still there: compared by identity, not by its key's characters. */
  #last: { readonly value: MemoizedInjection; readonly bytes: number } | undefined;

  constructor(limits: PatchMemoLimits = DEFAULT_PATCH_MEMO_LIMITS) {
    this.limits = limits;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Accounted bytes of what is held. */
  get bytes(): number {
    return this.#bytes;
  }

  /** The answer for KEY under TEMPLATES, computed (and kept, if it fits) when absent. */
  answer(templates: TemplateSet, key: string, compute: () => MemoizedInjection): MemoizedInjection {
    if (templates !== this.#templates) {
      this.#entries.clear();
      this.#last = undefined;
      this.#bytes = 0;
      this.#templates = templates;
    }
    const held = this.#entries.get(key);
    if (held !== undefined) {
      // Most recently used last: eviction takes the first. A rollout asks for one key
      // many times in a row: it is already last then, and the Map is left alone.
      if (held !== this.#last) {
        this.#entries.delete(key);
        this.#entries.set(key, held);
        this.#last = held;
      }
      return held.value;
    }
    const value = compute();
    const bytes = entryBytes(key, value);
    if (bytes > this.limits.maxBytes || this.limits.maxEntries < 1) return value;
    const entry = { value, bytes };
    this.#entries.set(key, entry);
    this.#last = entry;
    this.#bytes += bytes;
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= this.limits.maxEntries && this.#bytes <= this.limits.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= entry.bytes;
    }
    return value;
  }
}

/**
 * An upper estimate of what one entry keeps alive: its strings at two bytes
 * a character, and the patch's objects at twice their JSON (the base64 is
 * 4/3 of it); the template's entries they share are the template set's.
 */
function entryBytes(key: string, value: MemoizedInjection): number {
  const patchLength = value.patch.reduce((sum, piece) => sum + piece.length, 0);
  const strings = key.length + patchLength + value.warnings.reduce((sum, warning) => sum + warning.length, 0);
  return 2 * strings + 2 * patchLength + 256;
}

/**
 * Everything of the Pod that the merge and the overrides read, as a string:
 * two Pods with one shape get byte-identical patches from one template.
 * Which lists are arrays, which of the template's names each already has,
 * whether metadata, annotations and labels are objects, the override annotations'
 * values, the sidecar mode, the allowed overrides and the capture's outcome
 * (`captureKey`: "" when off, else its mode and exclusions), whether the added
 * containers get the ServiceAccount token mount (its volume's name, random
 * per Pod, is not part of the shape: the answer leaves a gap for it), and what
 * the proxy's lifecycle reads (hold-application, the autoscaler annotation,
 * the grace period, kubectl's default container and the first container's name).
 */
export function podShape(
  pod: JsonObject,
  template: SidecarTemplate,
  nativeSidecar: boolean,
  allowedOverrides: readonly OverrideName[],
  captureKey = '',
  tokenMount = false,
): string {
  const spec = objectAt(pod, 'spec');
  const metadata = objectAt(pod, 'metadata');
  const annotations = objectAt(metadata, 'annotations');
  const labels = objectAt(metadata, 'labels');
  const names = templateNames(template);
  // The JSON of one array, written piece by piece (per request: no array of parts, no JSON.stringify of the constant ones).
  let shape = `${shapePrefix(template, nativeSidecar, allowedOverrides)},${spec !== undefined},${metadata !== undefined},${annotations !== undefined},${labels !== undefined}`;
  shape += `,"${listShape(spec, 'containers', names.containers)}","${listShape(spec, 'initContainers', names.containers)}","${listShape(spec, 'ephemeralContainers', names.containers)}"`;
  shape += `,"${listShape(spec, 'volumes', names.volumes)}","${listShape(spec, 'imagePullSecrets', names.imagePullSecrets)}",[`;
  if (annotations === undefined || !hasOverrideAnnotation(annotations)) shape += NO_OVERRIDES_SHAPE;
  else {
    for (let index = 0; index < OVERRIDE_ANNOTATIONS.length; index++) {
      const value = own(annotations, OVERRIDE_ANNOTATIONS[index] ?? '');
      shape += `${index === 0 ? '' : ','}${value === undefined ? '0' : `[${JSON.stringify(value)}]`}`;
    }
  }
  // What the proxy's lifecycle and the autoscaler annotation read (proxy-lifecycle.ts).
  // kubectl's default container, when the proxy goes first: the Pod's own, or its first container's name.
  const first = entryName(arrayAt(spec, 'containers')?.[0]);
  shape += `],${JSON.stringify(captureKey)},${tokenMount},[${annotationShape(annotations, Annotations.holdApplication)},${annotationShape(annotations, Annotations.safeToEvictLocalVolumes)}`;
  shape += `,${annotationShape(annotations, Annotations.defaultContainer)},${JSON.stringify(first ?? null)}]`;
  return `${shape},${JSON.stringify(spec === undefined ? null : (own(spec, 'terminationGracePeriodSeconds') ?? null))}]`;
}

const OVERRIDE_ANNOTATIONS: readonly string[] = ALL_OVERRIDES.map((name) => OVERRIDE_ANNOTATION_PREFIX + name);
const OVERRIDE_ANNOTATION_SET: ReadonlySet<string> = new Set(OVERRIDE_ANNOTATIONS);
/** The overrides' part of the shape when the Pod sets none: one "0" per override. */
const NO_OVERRIDES_SHAPE = OVERRIDE_ANNOTATIONS.map(() => '0').join(',');

/**
 * Whether ANNOTATIONS sets any override: a Pod has a few annotations and
 * there are ~28 overrides, so its keys are looked up, not theirs.
 */
function hasOverrideAnnotation(annotations: JsonObject): boolean {
  for (const key in annotations) if (OVERRIDE_ANNOTATION_SET.has(key) && Object.hasOwn(annotations, key)) return true;
  return false;
}

/** An annotation the lifecycle reads: "0" without annotations, else its value (null when absent) in brackets. */
function annotationShape(annotations: JsonObject | undefined, key: string): string {
  return annotations === undefined ? '0' : `[${JSON.stringify(own(annotations, key) ?? null)}]`;
}

/** Which of CANDIDATES the list at spec[LIST] holds, by index ("0,,2"); "-" when it is no list. */
function listShape(spec: JsonObject | undefined, list: string, candidates: readonly (string | undefined)[]): string {
  const entries = arrayAt(spec, list);
  if (entries === undefined) return '-';
  let shape = '';
  for (let index = 0; index < candidates.length; index++) {
    const candidate = candidates[index];
    shape += `${index === 0 ? '' : ','}${candidate !== undefined && hasEntryNamed(entries, candidate) ? index : ''}`;
  }
  return shape;
}

/** Whether ENTRIES holds one named NAME: a loop, no closure per candidate. */
function hasEntryNamed(entries: readonly JsonValue[], name: string): boolean {
  for (const entry of entries) if (entryName(entry) === name) return true;
  return false;
}

/**
 * The shape's constant start for a template and its settings: `[` and a
 * number of its own, kept per template for its last settings. A number, not
 * the template's name, hash and settings: the key is hashed on every review,
 * and a template object with these settings is one number for the life of the
 * process (another set's templates are other objects, and the memo forgets
 * everything when the set changes).
 */
function shapePrefix(template: SidecarTemplate, nativeSidecar: boolean, allowedOverrides: readonly OverrideName[]): string {
  const held = prefixOfTemplates.get(template);
  if (held !== undefined && held.nativeSidecar === nativeSidecar && held.allowedOverrides === allowedOverrides) return held.prefix;
  prefixesMade += 1;
  const prefix = `[${prefixesMade}`;
  prefixOfTemplates.set(template, { nativeSidecar, allowedOverrides, prefix });
  return prefix;
}

let prefixesMade = 0;

const prefixOfTemplates = new WeakMap<SidecarTemplate, { readonly nativeSidecar: boolean; readonly allowedOverrides: readonly OverrideName[]; readonly prefix: string }>();

interface TemplateNames {
  /** The template's containers and init containers: a Pod's container of either name clashes in every list. */
  readonly containers: readonly (string | undefined)[];
  readonly volumes: readonly (string | undefined)[];
  readonly imagePullSecrets: readonly (string | undefined)[];
}

const namesOfTemplates = new WeakMap<SidecarTemplate, TemplateNames>();

/** The entry names podShape compares against: the same for every Pod of a template, so read once. */
function templateNames(template: SidecarTemplate): TemplateNames {
  let names = namesOfTemplates.get(template);
  if (names === undefined) {
    names = {
      // A template that can capture may add envoy-init and its volume, or CNI mode's check: a Pod's own of those names changes the patch.
      containers: [...template.containers, ...template.initContainers].map(entryName).concat(template.capture === undefined ? [] : [CAPTURE_INIT_NAME, CAPTURE_CHECK_NAME]),
      volumes: template.volumes.map(entryName).concat(template.capture === undefined ? [] : [CAPTURE_LOCK_VOLUME]),
      imagePullSecrets: template.imagePullSecrets.map(entryName),
    };
    namesOfTemplates.set(template, names);
  }
  return names;
}
