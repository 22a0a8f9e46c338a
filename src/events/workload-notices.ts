import {
  ALL_OVERRIDES,
  Annotations,
  isJsonObject,
  objectAt,
  OVERRIDE_ANNOTATION_PREFIX,
  own,
  Reason,
  stringAt,
  type Admission,
  type JsonObject,
} from '../injection/index.js';

/** Causes of a workload Event that are not a decision's skip reason. */
export const NoticeCause = {
  /** The namespace's labels could not be read: the webhook answered 503 and failurePolicy decided. */
  namespaceLabelsUnknown: 'namespace_labels_unknown',
  /** The Pod was injected, but a `proxy-*` override it carries was not applied. */
  overrideIgnored: 'override_ignored',
} as const;
export type NoticeCause = Reason | (typeof NoticeCause)[keyof typeof NoticeCause];

export interface WorkloadEventKind {
  /** The Event's `reason`: UpperCamelCase, as Kubernetes' own. */
  readonly reason: string;
  /** What the workload's owner can do, at the end of the note. */
  readonly fix: string;
}

/**
 * The one mapping from why a Pod that asked for the sidecar was not injected
 * (or had an override ignored) to the Warning Event its workload gets. A
 * decision reason absent here makes no Event (the Pod did not ask, or asked
 * not to be injected). A new reason of that kind is one line here.
 */
export const WORKLOAD_EVENTS: Partial<Readonly<Record<NoticeCause, WorkloadEventKind>>> = {
  [Reason.unknownTemplate]: { reason: 'UnknownTemplate', fix: `add the template to the injector's ConfigMap or change the Pod template's ${Annotations.template} annotation` },
  [Reason.unknownNamespaceTemplate]: { reason: 'UnknownNamespaceTemplate', fix: `add the template to the injector's ConfigMap, change the namespace's ${Annotations.template} label, or name a template in the Pod template's ${Annotations.template} annotation` },
  [Reason.templateNotLoaded]: { reason: 'TemplateNotLoaded', fix: "the injector's template ConfigMap is missing or invalid: its log names the problem" },
  [Reason.statusCopied]: { reason: 'StatusAnnotationCopied', fix: `remove ${Annotations.status} from the Pod template` },
  [Reason.otherMeshInjected]: {
    reason: 'OtherMeshInjected',
    fix: `a second proxy would fight the first over the traffic: annotate the Pod template ${Annotations.inject}: "false" to say it is meant, or take its namespace out of one mesh`,
  },
  [Reason.proxyNameTaken]: {
    reason: 'ProxyNameTaken',
    fix: `rename the Pod template's container, name another template in its ${Annotations.template} annotation, or annotate it ${Annotations.inject}: "false" to say it is meant`,
  },
  [Reason.windowsPod]: { reason: 'WindowsPod', fix: `annotate the Pod template ${Annotations.inject}: "false" to say it is meant, or run it on Linux nodes` },
  [Reason.annotationsTooLarge]: {
    reason: 'AnnotationsTooLarge',
    fix: `cut the Pod template's own annotations, or what the sidecar writes for it: fewer ports in ${Annotations.inboundProxyProtocol}, fewer tcpSocket probes of captured ports (or ${Annotations.rewriteTcpProbes}: "false")`,
  },
  [NoticeCause.namespaceLabelsUnknown]: { reason: 'NamespaceLabelsUnknown', fix: 'with failurePolicy Fail the Pod was refused and is retried; with Ignore it runs without the sidecar' },
  [NoticeCause.overrideIgnored]: { reason: 'OverrideIgnored', fix: "the template's value was kept" },
};

/** The API server's bound on an Event's note, in bytes. */
export const NOTE_MAX_BYTES = 1024;

/** An object as an Event's `regarding` names it. */
export interface ObjectRef {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

/** One Pod's reason for an Event, on the Pod's controller (not yet followed up to its workload). */
export interface WorkloadNotice {
  readonly namespace: string;
  /** The Pod's controller ownerReference (`controller: true`). */
  readonly owner: ObjectRef;
  readonly cause: NoticeCause;
  /** The Event's reason (WORKLOAD_EVENTS). */
  readonly reason: string;
  /** The Event's note: what happened, the value, the fix; the same for every Pod of one Pod template. */
  readonly note: string;
}

export interface NoticeInput {
  /** `request.namespace`. */
  readonly namespace: string;
  readonly pod: JsonObject;
  readonly dryRun: boolean;
  /** What the review decided; undefined when it could not decide (the namespace's labels unknown). */
  readonly admission: Admission | undefined;
}

/**
 * The Events one review warrants: none for a dry run or a Pod without a
 * controller (its creator saw the warning, and at admission the Pod has no
 * uid an Event could name), else one per cause in WORKLOAD_EVENTS.
 */
export function workloadNotices(input: NoticeInput): WorkloadNotice[] {
  if (input.dryRun) return [];
  const causes = causesOf(input);
  if (causes.length === 0) return [];
  const owner = controllerOf(objectAt(input.pod, 'metadata'));
  if (owner === undefined) return [];
  return causes.flatMap(({ cause, detail }) => {
    const kind = WORKLOAD_EVENTS[cause];
    return kind === undefined ? [] : [{ namespace: input.namespace, owner, cause, reason: kind.reason, note: truncateNote(`${detail}; ${kind.fix}`) }];
  });
}

type Cause = { readonly cause: NoticeCause; readonly detail: string };

function causesOf({ admission, pod, namespace }: NoticeInput): Cause[] {
  // Most reviews warrant no Event: those are decided before the Pod is read.
  if (admission !== undefined && (admission.decision.inject ? admission.warnings.length === 0 : WORKLOAD_EVENTS[admission.decision.reason] === undefined)) return [];
  const annotations = objectAt(objectAt(pod, 'metadata'), 'annotations');
  if (admission === undefined) {
    // Whether the Pod asked hangs on the labels that are unknown: only an explicit "no" is sure.
    if (annotations !== undefined && own(annotations, Annotations.inject) === 'false') return [];
    return [{ cause: NoticeCause.namespaceLabelsUnknown, detail: `Pods could not be decided on: the labels of namespace "${namespace}" could not be read (the webhook answered 503)` }];
  }
  const { decision } = admission;
  if (!decision.inject) {
    return WORKLOAD_EVENTS[decision.reason] === undefined ? [] : [{ cause: decision.reason, detail: `Pods were created without the envoy-injector sidecar: ${decision.message}` }];
  }
  // Whatever was ignored always comes with a warning; most injected Pods have none.
  if (admission.warnings.length === 0) return [];
  return INJECTED_CHECKS.flatMap((check) => check(admission, annotations) ?? []);
}

/** What an injected Pod asked for and did not get: one check per cause, each the detail of its note or undefined. */
const INJECTED_CHECKS: readonly ((admission: Admission, annotations: JsonObject | undefined) => Cause | undefined)[] = [ignoredOverrides];

/** `proxy-*` annotations present but not applied (not allowed, not valid, a request above its limit, no proxy injected). */
function ignoredOverrides(admission: Admission, annotations: JsonObject | undefined): Cause | undefined {
  if (annotations === undefined) return undefined;
  // Applied from the Pod's own annotation: a namespace's default of the same name does not make the Pod's one applied.
  const applied = new Set(admission.overrides.filter((override) => override.source === 'pod').map((override) => override.annotation));
  const ignored = ALL_OVERRIDES.map((name) => OVERRIDE_ANNOTATION_PREFIX + name).filter((annotation) => own(annotations, annotation) !== undefined && !applied.has(annotation));
  if (ignored.length === 0) return undefined;
  // The Pod's own warnings: one about a namespace's default starts `<annotation> (namespace "NAME")`.
  const said = admission.warnings.filter((warning) => ignored.some((annotation) => warning.startsWith(`${annotation}:`) || warning.startsWith(`${annotation} and `)));
  const detail = said.length > 0 ? said.join('; ') : `${ignored.map((annotation) => `${annotation}: ${JSON.stringify(stringAt(annotations, annotation) ?? '')}`).join(', ')}: not applied`;
  return { cause: NoticeCause.overrideIgnored, detail: `Pods were injected with an override ignored: ${detail}` };
}

/** The controller ownerReference of an object's metadata, with its uid; undefined when it has none. */
export function controllerOf(metadata: JsonObject | undefined): ObjectRef | undefined {
  const references = metadata === undefined ? undefined : own(metadata, 'ownerReferences');
  if (!Array.isArray(references)) return undefined;
  for (const reference of references) {
    if (!isJsonObject(reference) || own(reference, 'controller') !== true) continue;
    const [apiVersion, kind, name, uid] = ['apiVersion', 'kind', 'name', 'uid'].map((key) => stringAt(reference, key));
    if (apiVersion && kind && name && uid) return { apiVersion, kind, name, uid };
  }
  return undefined;
}

/**
 * Where the workload of a Pod's controller is to be read: a ReplicaSet's or a
 * Job's own controller (a Deployment, a CronJob) is the workload when it has
 * one. Undefined when the controller is the workload (StatefulSet, DaemonSet,
 * any other kind).
 */
export function ownerLookupPath(namespace: string, owner: ObjectRef): string | undefined {
  const scope = `namespaces/${encodeURIComponent(namespace)}`;
  if (owner.apiVersion.startsWith('apps/') && owner.kind === 'ReplicaSet') return `/apis/apps/v1/${scope}/replicasets/${encodeURIComponent(owner.name)}`;
  if (owner.apiVersion.startsWith('batch/') && owner.kind === 'Job') return `/apis/batch/v1/${scope}/jobs/${encodeURIComponent(owner.name)}`;
  return undefined;
}

/** A note cut to the API server's 1 KiB (in UTF-8 bytes, never splitting a character). */
export function truncateNote(note: string): string {
  if (Buffer.byteLength(note, 'utf8') <= NOTE_MAX_BYTES) return note;
  let cut = note.slice(0, NOTE_MAX_BYTES - 3);
  while (Buffer.byteLength(cut, 'utf8') > NOTE_MAX_BYTES - 3) cut = cut.slice(0, -1);
  // A lone high surrogate at the end would not be valid UTF-8.
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}...`;
}
