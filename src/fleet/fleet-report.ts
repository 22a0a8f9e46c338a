import { Annotations, chooseTemplate, copiedStatusProblem, decideInjection, InjectedLabel, isJsonObject, NamespaceLabel, stringAt, type DecisionOptions, type JsonObject, type TemplateSet } from '../injection/index.js';

/**
 * A controller reference, as `metadata.ownerReferences[]` names it. Group and
 * kind together say what it is: `example.com/v1 Deployment` is not `apps/v1`'s.
 */
export interface OwnerRef {
  /** `apps/v1`, `batch/v1`, `example.com/v1`; `v1` for a bare Pod. */
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** What the report needs of one Pod: a few fields, so that 50,000 of them fit in memory. */
export interface PodRecord {
  readonly namespace: string;
  readonly name: string;
  /** The controller owner (`controller: true`), if any. */
  readonly owner: OwnerRef | undefined;
  readonly annotations: Readonly<Record<string, string>>;
  /** The Pod's labels: the central selectors read them, as the webhook does. */
  readonly labels: Readonly<Record<string, string>>;
  /** Names of its containers and init containers: a status naming others was copied, not written by us. */
  readonly containers: readonly string[];
  readonly hostNetwork: boolean;
  /**
   * For a Pod with our status: the Pod cut down to what resizing it in place
   * reads (fleet/resize-plan.ts): its containers' names, resources,
   * restartPolicy and resizePolicy, its Pod-level resources, its QoS class
   * and resize conditions, and our annotations.
   */
  readonly resizeFacts?: JsonObject;
}

/** A mark of ours a Pod carries without the sidecar: copied into its Pod template from a running injected Pod. */
export const CopiedMark = { statusAnnotation: 'statusAnnotation', injectedLabel: 'injectedLabel' } as const;
export type CopiedMark = (typeof CopiedMark)[keyof typeof CopiedMark];

export interface FleetInput {
  readonly pods: Iterable<PodRecord>;
  /** The controller of each ReplicaSet and Job seen, keyed by `ownerKey`; absent when it has none. */
  readonly owners: ReadonlyMap<string, OwnerRef>;
  /** The live template set (the injector's ConfigMap). */
  readonly templates: TemplateSet;
  /** Labels of a namespace; undefined when unknown (treated as none, as the webhook does). */
  readonly namespaceLabels: (namespace: string) => Readonly<Record<string, string>> | undefined;
  /**
   * Namespaces whose labels could not be read (no permission): their Pods
   * without a status are counted `unknown` when the labels would decide.
   */
  readonly namespaceLabelsUnreadable?: (namespace: string) => boolean;
  /** The webhook's own settings, for Pods without a status: would it inject them now? */
  readonly decision: DecisionOptions;
}

/** One hash an outdated group carries, with how many Pods carry it. */
export interface OutdatedHash {
  readonly template: string;
  readonly hash: string;
  readonly pods: number;
}

export interface WorkloadReport {
  readonly namespace: string;
  /** The owner's API version: its group and kind identify the workload, with its namespace and name. */
  readonly apiVersion: string;
  /** Deployment, StatefulSet, DaemonSet, CronJob, Job, ReplicaSet, Pod, or another controller's kind. */
  readonly kind: string;
  readonly name: string;
  /** Template names of its injected Pods, sorted. */
  readonly templates: readonly string[];
  readonly current: number;
  readonly outdated: number;
  /** Of the outdated Pods, those whose sidecars differ from the live template only in CPU and memory: `--resize` resizes them in place. */
  readonly resizable: number;
  /** Pods without a status that the webhook would inject if they were created now. */
  readonly notInjected: number;
  /** Pods without a status in a namespace whose labels could not be read, when those labels would decide. */
  readonly unknown: number;
  /**
   * Pods without the sidecar that carry our marks (a status naming containers
   * they lack, or the injected label), though the webhook would inject them:
   * their Pod template was copied from an injected Pod, and a restart gives
   * the new Pods the same marks (docs/design.md §4).
   */
  readonly copied: number;
  /** The marks those Pods carry, sorted: what to remove from the Pod template. */
  readonly copiedMarks: readonly CopiedMark[];
  /** Injected Pods whose tcpSocket probes the proxy answers (`envoy-injector.io/tcp-probes`, docs/design.md §11). */
  readonly tcpProbes: number;
  /** Injected Pods with the PROXY protocol on some port (the status's `inboundProxyProtocol`, docs/design.md §11). */
  readonly proxyProtocol: number;
  /** Injected Pods captured by TPROXY (the status's `interception`, docs/design.md §11): their proxies run as root with NET_ADMIN. */
  readonly tproxy: number;
  readonly outdatedHashes: readonly OutdatedHash[];
  /** Whether `--restart` can roll it: an `apps/v1` kind with a Pod template to annotate. */
  readonly restartable: boolean;
}

export interface FleetReport {
  /** The live templates, by name, with the hash the injector writes today. */
  readonly templates: readonly { readonly name: string; readonly hash: string }[];
  /** Workloads with at least one injected Pod or Pod that should be; sorted by namespace, kind, name. */
  readonly workloads: readonly WorkloadReport[];
  readonly totals: { readonly pods: number; readonly current: number; readonly outdated: number; readonly resizable: number; readonly notInjected: number; readonly unknown: number; readonly copied: number; readonly tcpProbes: number; readonly proxyProtocol: number; readonly tproxy: number };
}

/** The kinds `--restart` rolls, as `kubectl rollout restart` does: the ones with a Pod template and a rollout, in this group only. */
export const RESTARTABLE_KINDS: readonly string[] = ['Deployment', 'StatefulSet', 'DaemonSet'];
export const RESTARTABLE_GROUP = 'apps';

/** A status we cannot read is reported under these names (and counted outdated: a restart rewrites it). */
const UNREADABLE = { template: '?', hash: 'unreadable' } as const;

/** The group of an `apiVersion`: `apps` of `apps/v1`, empty for the core `v1`. */
export function apiGroup(apiVersion: string): string {
  const slash = apiVersion.indexOf('/');
  return slash < 0 ? '' : apiVersion.slice(0, slash);
}

/** `ns/group/Kind/name`: how `owners` and workloads are keyed (the version may differ between references to one object). */
export function ownerKey(namespace: string, owner: OwnerRef): string {
  return `${namespace}/${apiGroup(owner.apiVersion)}/${owner.kind}/${owner.name}`;
}

/** The groups a kind is named without: the core, apps and batch, whose kinds everyone knows. */
const WELL_KNOWN_GROUPS: readonly string[] = ['', 'apps', 'batch'];

/** `Deployment` for apps', `Deployment.example.com` for another group's (as kubectl names a kind by its group). */
export function describeKind(workload: { readonly apiVersion: string; readonly kind: string }): string {
  const group = apiGroup(workload.apiVersion);
  return WELL_KNOWN_GROUPS.includes(group) ? workload.kind : `${workload.kind}.${group}`;
}

/** Whether `--restart` rolls this kind of workload. */
export function isRestartable(workload: { readonly apiVersion: string; readonly kind: string }): boolean {
  return apiGroup(workload.apiVersion) === RESTARTABLE_GROUP && RESTARTABLE_KINDS.includes(workload.kind);
}

/** The ReplicaSets and Jobs whose controller the report follows: only apps' and batch's own. */
export function isIntermediateOwner(owner: OwnerRef): boolean {
  const group = apiGroup(owner.apiVersion);
  return (group === 'apps' && owner.kind === 'ReplicaSet') || (group === 'batch' && owner.kind === 'Job');
}

/**
 * The workload a Pod belongs to: its controller, followed up one level for
 * ReplicaSets (to their Deployment) and Jobs (to their CronJob); a Pod without
 * a controller is its own workload.
 */
export function resolveWorkload(pod: PodRecord, owners: ReadonlyMap<string, OwnerRef>): OwnerRef {
  const { owner } = pod;
  if (owner === undefined) return { apiVersion: 'v1', kind: 'Pod', name: pod.name };
  if (isIntermediateOwner(owner)) return owners.get(ownerKey(pod.namespace, owner)) ?? owner;
  return owner;
}

/** The template name and hashes of `envoy-injector.io/status`, or undefined when the Pod has none; `hashWithoutResources` absent before issue 52. */
export function readInjectionStatus(annotations: Readonly<Record<string, string>>): { template: string; hash: string; hashWithoutResources?: string } | undefined {
  if (!Object.hasOwn(annotations, Annotations.status)) return undefined;
  let status: unknown;
  try {
    status = JSON.parse(annotations[Annotations.status] ?? '');
  } catch {
    return UNREADABLE;
  }
  const object = isJsonObject(status) ? status : undefined;
  const template = stringAt(object, 'template');
  const hash = stringAt(object, 'hash');
  const hashWithoutResources = stringAt(object, 'hashWithoutResources');
  if (template === undefined || hash === undefined) return UNREADABLE;
  return hashWithoutResources === undefined ? { template, hash } : { template, hash, hashWithoutResources };
}

export type PodState =
  | { state: 'current'; template: string }
  /** RESIZABLE: its sidecars differ from the live template only in CPU and memory (the same template, the same hashWithoutResources). */
  | { state: 'outdated'; template: string; hash: string; resizable: boolean }
  | { state: 'notInjected' }
  | { state: 'copied'; marks: readonly CopiedMark[] }
  | { state: 'unknown' }
  | { state: 'ignored' };

/** The namespace labels that can change the decision: none, enabled, disabled. */
const LABEL_CASES: readonly Readonly<Record<string, string>>[] = [{}, { [NamespaceLabel.key]: NamespaceLabel.enabled }, { [NamespaceLabel.key]: NamespaceLabel.disabled }];

/**
 * Current: injected with the hash the injector computes for that template
 * today. Outdated: any other hash, a template no longer in the set, or
 * another template than the one the Pod would get now (its namespace picks
 * another: a canary roll-out, issue 28). Not
 * injected: no status, though the webhook would inject the Pod if it were
 * created now (it predates the label, or was admitted while the webhook was
 * away). Everything else is none of our business.
 */
export function podState(pod: PodRecord, input: FleetInput): PodState {
  const marks = copiedMarks(pod);
  const status = marks.length > 0 ? undefined : readInjectionStatus(pod.annotations);
  if (status !== undefined) {
    const live = input.templates.templates.get(status.template);
    // Which template the Pod would get now; not known when its namespace's labels are not.
    const labelsKnown = input.namespaceLabelsUnreadable?.(pod.namespace) !== true;
    const now = labelsKnown ? chooseTemplate(input.templates, pod.annotations, input.namespaceLabels(pod.namespace) ?? {}, pod.namespace).template : undefined;
    const chosenElsewhere = now !== undefined && now.name !== status.template;
    if (live !== undefined && live.hash === status.hash && !chosenElsewhere) return { state: 'current', template: status.template };
    const resizable = live !== undefined && !chosenElsewhere && status.hashWithoutResources === live.hashWithoutResources;
    return { state: 'outdated', template: status.template, hash: status.hash, resizable };
  }
  // As the webhook would see the Pod without the copied marks: would it inject it?
  const annotations: Record<string, string> = { ...pod.annotations };
  const labels: Record<string, string> = { ...pod.labels };
  if (marks.includes(CopiedMark.statusAnnotation)) delete annotations[Annotations.status];
  delete labels[InjectedLabel.key];
  const missing: PodState = marks.length > 0 ? { state: 'copied', marks } : { state: 'notInjected' };
  // Its containers too: another mesh's, or its own of the proxy's name, mean the webhook leaves it (rules other-mesh, proxy-name).
  const asCreated: JsonObject = { metadata: { annotations, labels }, spec: { hostNetwork: pod.hostNetwork, containers: pod.containers.map((name) => ({ name })) } };
  const wouldInject = (namespaceLabels: Readonly<Record<string, string>> | undefined): boolean =>
    decideInjection({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: pod.namespace, namespaceLabels, pod: asCreated, templates: input.templates, options: input.decision }).inject;
  if (input.namespaceLabelsUnreadable?.(pod.namespace) === true) {
    // Labels unknown: sure only when every label the webhook reads gives the same answer.
    const answers = new Set(LABEL_CASES.map(wouldInject));
    if (answers.size > 1) return { state: 'unknown' };
    return answers.has(true) ? missing : { state: 'ignored' };
  }
  return wouldInject(input.namespaceLabels(pod.namespace)) ? missing : { state: 'ignored' };
}

/**
 * Our marks on a Pod that has no sidecar of ours: a status naming containers
 * it lacks (the decision's own check), or the injected label without a
 * status. The webhook writes both with the containers in one patch.
 */
export function copiedMarks(pod: PodRecord): CopiedMark[] {
  const marks: CopiedMark[] = [];
  const hasStatus = Object.hasOwn(pod.annotations, Annotations.status);
  // A status that does not parse is reported as it was (outdated, unreadable): its names are unknown.
  const readable = hasStatus && readInjectionStatus(pod.annotations) !== UNREADABLE;
  const asStored = { spec: { containers: pod.containers.map((name) => ({ name })) } };
  const statusCopied = readable && copiedStatusProblem(pod.annotations[Annotations.status], asStored) !== undefined;
  if (Object.hasOwn(pod.labels, InjectedLabel.key) && (!hasStatus || statusCopied)) marks.push(CopiedMark.injectedLabel);
  if (statusCopied) marks.push(CopiedMark.statusAnnotation);
  return marks;
}

interface Tally {
  readonly namespace: string;
  readonly workload: OwnerRef;
  readonly templates: Set<string>;
  current: number;
  outdated: number;
  resizable: number;
  notInjected: number;
  unknown: number;
  copied: number;
  tcpProbes: number;
  proxyProtocol: number;
  tproxy: number;
  readonly marks: Set<CopiedMark>;
  readonly hashes: Map<string, OutdatedHash>;
}

/** Groups Pods by workload and counts them current, outdated and not injected. */
export function buildFleetReport(input: FleetInput): FleetReport {
  const tallies = new Map<string, Tally>();
  const totals = { pods: 0, current: 0, outdated: 0, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 };
  for (const pod of input.pods) {
    const classified = podState(pod, input);
    if (classified.state === 'ignored') continue;
    const workload = resolveWorkload(pod, input.owners);
    const key = ownerKey(pod.namespace, workload);
    let tally = tallies.get(key);
    if (tally === undefined) {
      tally = { namespace: pod.namespace, workload, templates: new Set(), current: 0, outdated: 0, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0, marks: new Set(), hashes: new Map() };
      tallies.set(key, tally);
    }
    totals.pods += 1;
    totals[classified.state] += 1;
    tally[classified.state] += 1;
    if (classified.state === 'current' || classified.state === 'outdated') {
      tally.templates.add(classified.template);
      const rewritten = rewrittenTcpProbes(pod.annotations) > 0 ? 1 : 0;
      tally.tcpProbes += rewritten;
      totals.tcpProbes += rewritten;
      const status = statusOf(pod.annotations);
      const header = Array.isArray(status['inboundProxyProtocol']) && status['inboundProxyProtocol'].length > 0 ? 1 : 0;
      tally.proxyProtocol += header;
      totals.proxyProtocol += header;
      const tproxy = status['interception'] === 'tproxy' ? 1 : 0;
      tally.tproxy += tproxy;
      totals.tproxy += tproxy;
    }
    if (classified.state === 'copied') for (const mark of classified.marks) tally.marks.add(mark);
    if (classified.state === 'outdated') {
      if (classified.resizable) {
        tally.resizable += 1;
        totals.resizable += 1;
      }
      const hashKey = `${classified.template}@${classified.hash}`;
      const seen = tally.hashes.get(hashKey);
      tally.hashes.set(hashKey, { template: classified.template, hash: classified.hash, pods: (seen?.pods ?? 0) + 1 });
    }
  }
  const workloads = [...tallies.values()]
    .map((tally): WorkloadReport => ({
      namespace: tally.namespace,
      apiVersion: tally.workload.apiVersion,
      kind: tally.workload.kind,
      name: tally.workload.name,
      templates: [...tally.templates].sort(),
      current: tally.current,
      outdated: tally.outdated,
      resizable: tally.resizable,
      notInjected: tally.notInjected,
      unknown: tally.unknown,
      copied: tally.copied,
      copiedMarks: [...tally.marks].sort(),
      tcpProbes: tally.tcpProbes,
      proxyProtocol: tally.proxyProtocol,
      tproxy: tally.tproxy,
      outdatedHashes: [...tally.hashes.values()].sort((a, b) => compareText(`${a.template}@${a.hash}`, `${b.template}@${b.hash}`)),
      restartable: isRestartable(tally.workload),
    }))
    .sort((a, b) => compareText(a.namespace, b.namespace) || compareText(a.kind, b.kind) || compareText(a.name, b.name) || compareText(a.apiVersion, b.apiVersion));
  const templates = [...input.templates.templates.values()]
    .map((template) => ({ name: template.name, hash: template.hash }))
    .sort((a, b) => compareText(a.name, b.name));
  return { templates, workloads, totals };
}

/** How many tcpSocket probes the patch rewrote (`envoy-injector.io/tcp-probes`); 0 without it or when it does not parse. */
function rewrittenTcpProbes(annotations: Readonly<Record<string, string>>): number {
  if (!Object.hasOwn(annotations, Annotations.tcpProbes)) return 0;
  try {
    const record: unknown = JSON.parse(annotations[Annotations.tcpProbes] ?? '');
    return Array.isArray(record) ? record.length : 0;
  } catch {
    return 0;
  }
}

/** Whether the status annotation records ports with the PROXY protocol (`inboundProxyProtocol`); false when it does not parse. */
/** The status annotation's fields the report counts (the PROXY protocol's ports, TPROXY); {} when it is not a JSON object. */
function statusOf(annotations: Readonly<Record<string, string>>): Record<string, unknown> {
  try {
    const status: unknown = JSON.parse(annotations[Annotations.status] ?? '');
    return status !== null && typeof status === 'object' && !Array.isArray(status) ? (status as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** A namespace whose `envoy-injector.io/template` label picks its Pods' template. */
export interface NamespaceTemplate {
  readonly namespace: string;
  readonly template: string;
  /** False when the live set has no template of that name: its Pods are not injected (reason unknown_namespace_template). */
  readonly known: boolean;
}

/** The namespaces that pick a template, sorted by name. */
export function namespaceTemplates(labelsByNamespace: ReadonlyMap<string, Readonly<Record<string, string>>>, templates: TemplateSet): NamespaceTemplate[] {
  const picked: NamespaceTemplate[] = [];
  for (const [namespace, labels] of labelsByNamespace) {
    const template = Object.hasOwn(labels, NamespaceLabel.template) ? labels[NamespaceLabel.template] : undefined;
    if (template !== undefined) picked.push({ namespace, template, known: templates.templates.has(template) });
  }
  return picked.sort((a, b) => compareText(a.namespace, b.namespace));
}

/** Code-point order: the same on every machine and locale (golden files depend on it). */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
