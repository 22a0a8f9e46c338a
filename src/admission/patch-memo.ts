import {
  ALL_OVERRIDES,
  Annotations,
  arrayAt,
  entryName,
  objectAt,
  own,
  OVERRIDE_ANNOTATION_PREFIX,
  type Admission,
  type AddableNames,
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
 * The names a shape compares the Pod's lists against: every name the merges
 * the memo ran could add (`InjectionResult.addable`), learnt from them, in
 * the order learnt. `learnt` counts them: a shape made before a name was
 * learnt is another key than one made after.
 */
export interface ShapeNames extends AddableNames {
  readonly learnt: number;
}

/** A bound on the names learnt: they come from the template set and the code, a few dozen; past it, answers are computed and not kept. */
const MAX_SHAPE_NAMES = 1024;

/**
 * The replicas of one Deployment send byte-identical Pod templates, and the
 * patch depends only on the template, the Pod's shape and the options: this
 * bounded LRU map from shape to answer skips the merge and the encoding for
 * all but the first Pod of a rollout. It serves one template set at a time
 * and forgets everything when the set changes. Not shared between processes,
 * no clock: a plain data structure the server passes into each review.
 *
 * Which names of the Pod's lists the shape compares is learnt from the
 * merges themselves (`ShapeNames`): a name a merge could add is in the key
 * of every answer kept after it, so a Pod that holds it is never served a
 * patch made for one that does not, nor the reverse.
 */
export class PatchMemo {
  readonly limits: PatchMemoLimits;
  #templates: TemplateSet | undefined;
  readonly #entries = new Map<string, { readonly value: MemoizedInjection; readonly bytes: number }>();
  #bytes = 0;
  /** The entry last set or moved to the end of #entries (the most recently used), if still there: compared by identity, not by its key's characters. */
  #last: { readonly value: MemoizedInjection; readonly bytes: number } | undefined;
  #names = noNames();

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

  /**
   * The answer for the Pod whose key SHAPE makes of the names learnt, under
   * TEMPLATES; computed (and kept, if it fits) when absent.
   */
  answer(templates: TemplateSet, shape: (names: ShapeNames) => string, compute: () => MemoizedInjection): MemoizedInjection {
    if (templates !== this.#templates) {
      this.#entries.clear();
      this.#last = undefined;
      this.#bytes = 0;
      this.#names = noNames();
      this.#templates = templates;
    }
    const key = shape(this.#names);
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
    // A name this merge could add that no shape compared yet: the key is made again with it.
    const names = learnNames(this.#names, value.injection.addable);
    if (names === undefined) return value;
    const kept = names === this.#names ? key : shape(names);
    this.#names = names;
    this.#keep(kept, value);
    return value;
  }

  /** Keeps VALUE under KEY as the most recently used, if it fits; evicts the least recently used beyond the bounds. */
  #keep(key: string, value: MemoizedInjection): void {
    const bytes = entryBytes(key, value);
    if (bytes > this.limits.maxBytes || this.limits.maxEntries < 1) return;
    const entry = { value, bytes };
    this.#entries.set(key, entry);
    this.#last = entry;
    this.#bytes += bytes;
    for (const [oldest, entry] of this.#entries) {
      if (this.#entries.size <= this.limits.maxEntries && this.#bytes <= this.limits.maxBytes) break;
      this.#entries.delete(oldest);
      this.#bytes -= entry.bytes;
    }
  }
}

function noNames(): ShapeNames {
  return { containers: [], volumes: [], imagePullSecrets: [], learnt: 0 };
}

/**
 * NAMES with those of ADDABLE it lacks appended: NAMES itself when it has
 * them all (a rollout's every review), undefined past MAX_SHAPE_NAMES.
 */
function learnNames(names: ShapeNames, addable: AddableNames): ShapeNames | undefined {
  const lists = ['containers', 'volumes', 'imagePullSecrets'] as const;
  if (lists.every((list) => addable[list].every((name) => names[list].includes(name)))) return names;
  const learnt = { containers: [...names.containers], volumes: [...names.volumes], imagePullSecrets: [...names.imagePullSecrets] };
  for (const list of lists) for (const name of addable[list]) if (!learnt[list].includes(name)) learnt[list].push(name);
  const count = learnt.containers.length + learnt.volumes.length + learnt.imagePullSecrets.length;
  return count > MAX_SHAPE_NAMES ? undefined : { ...learnt, learnt: count };
}

/**
 * An upper estimate of what one entry keeps alive: its strings at two bytes
 * a character, and the patch's objects at twice their JSON (the base64 is
 * 4/3 of it), the merge's three lists of addable names at 96 bytes each and
 * 8 a name (grown by push, they hold spare room); the template's entries
 * they share are the template set's.
 */
function entryBytes(key: string, value: MemoizedInjection): number {
  const patchLength = value.patch.reduce((sum, piece) => sum + piece.length, 0);
  const strings = key.length + patchLength + value.warnings.reduce((sum, warning) => sum + warning.length, 0);
  const { containers, volumes, imagePullSecrets } = value.injection.addable;
  return 2 * strings + 2 * patchLength + 256 + 3 * 96 + 8 * (containers.length + volumes.length + imagePullSecrets.length);
}

/** What a review knows besides the Pod, which the shape holds. */
export interface ShapeSettings {
  readonly template: SidecarTemplate;
  readonly nativeSidecar: boolean;
  readonly allowedOverrides: readonly OverrideName[];
  /** The request's: a Pod's answer is kept for its own namespace (one tenant's Pods never shape another's). */
  readonly namespace: string;
  /** The capture's outcome: "" when off, else its mode and exclusions, and the plans the per-Pod bootstrap is made of. */
  readonly captureKey?: string;
  /** Whether the added containers get the ServiceAccount token mount. */
  readonly tokenMount?: boolean;
}

/**
 * Everything of the Pod that the merge and the overrides read, as a string:
 * two Pods with one shape get byte-identical patches from one template.
 * The namespace; which lists are arrays, which of NAMES (every name the
 * merge could add: the memo learns them from the merges) each already has;
 * whether metadata, annotations and labels are objects, the override annotations'
 * values, the sidecar mode, the allowed overrides and the capture's outcome
 * (`captureKey`), whether the added
 * containers get the ServiceAccount token mount (its volume's name, random
 * per Pod, is not part of the shape: the answer leaves a gap for it), and what
 * the proxy's lifecycle reads (hold-application, the autoscaler annotation,
 * the grace period, kubectl's default container and the first container's name).
 */
export function podShape(pod: JsonObject, names: ShapeNames, settings: ShapeSettings): string {
  const spec = objectAt(pod, 'spec');
  const metadata = objectAt(pod, 'metadata');
  const annotations = objectAt(metadata, 'annotations');
  const labels = objectAt(metadata, 'labels');
  // The JSON of one array, written piece by piece (per request: no array of parts, no JSON.stringify of the constant ones).
  let shape = `${shapePrefix(settings.template, settings.nativeSidecar, settings.allowedOverrides)},${names.learnt},${spec !== undefined},${metadata !== undefined},${annotations !== undefined},${labels !== undefined}`;
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
  shape += `],${JSON.stringify(settings.captureKey ?? '')},${settings.tokenMount ?? false},[${annotationShape(annotations, Annotations.holdApplication)},${annotationShape(annotations, Annotations.safeToEvictLocalVolumes)}`;
  shape += `,${annotationShape(annotations, Annotations.defaultContainer)},${JSON.stringify(first ?? null)}]`;
  // The namespace last, as it came: what precedes it delimits itself, so no escaping is needed.
  return `${shape},${JSON.stringify(spec === undefined ? null : (own(spec, 'terminationGracePeriodSeconds') ?? null))}]${settings.namespace}`;
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
function listShape(spec: JsonObject | undefined, list: string, candidates: readonly string[]): string {
  const entries = arrayAt(spec, list);
  if (entries === undefined) return '-';
  let shape = '';
  for (let index = 0; index < candidates.length; index++) {
    shape += `${index === 0 ? '' : ','}${hasEntryNamed(entries, candidates[index] ?? '') ? index : ''}`;
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
