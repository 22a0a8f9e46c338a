import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { rolloutFailedEvent } from '../events/rollout-event.js';
import { buildFleetReport, ownerKey, resolveWorkload, type WorkloadReport } from '../fleet/fleet-report.js';
import type { ResizeContext } from '../fleet/resize-plan.js';
import {
  inheritedInFlight,
  parseRolloutStop,
  planRollout,
  ROLLOUT_STOPPED_ANNOTATION,
  stopHolds,
  templatesFingerprint,
  type InFlight,
  type RolloutSettings,
  type RolloutStop,
} from '../fleet/rollout-plan.js';
import { objectAt, stringAt, type DecisionOptions, type JsonObject, type NamespaceMetadata, type OverrideName, type TemplateSet } from '../injection/index.js';
import { describeKubeError, kubeJson, LeaseElection, type Backoff, type LeaseTimings, type WatchLiveness } from './api/index.js';
import { restartWorkload } from './fleet-status.js';
import type { PodRef } from './pod-resize.js';
import { resizeOrRestart, type ResizeStepOptions, type UpdateOutcome } from './rollout-resize.js';
import { RolloutWatches } from './watches/index.js';

/**
 * The per-workload step that brings an outdated workload's Pods current:
 * resized in place where every outdated Pod differs from the live template
 * only in CPU and memory, else the restart `status --restart` makes.
 */
export interface WorkloadUpdateStep {
  bringCurrent(workload: WorkloadReport, object: JsonObject, pods: readonly PodRef[]): Promise<UpdateOutcome>;
}

/** `kubectl rollout restart`'s change, as `status --restart` makes it, under FIELDMANAGER. */
function restartNow(kubeConfig: KubeConfig, workload: WorkloadReport, fieldManager: string | undefined): Promise<void> {
  return restartWorkload(kubeConfig, workload, new Date().toISOString().replace(/\.\d+Z$/, 'Z'), fieldManager);
}

/** The resize in place where it brings every Pod current (`resizeOrRestart`), else the restart. */
export function resizeOrRestartStep(kubeConfig: KubeConfig, options: { readonly fieldManager?: string | undefined; readonly context: ResizeStepOptions['context']; readonly log: Logger }): WorkloadUpdateStep {
  return {
    bringCurrent: (workload, _object, pods) =>
      resizeOrRestart(workload, pods, {
        kubeConfig,
        context: options.context,
        warn: (message) => options.log.warn({ workload: describe(workload) }, message),
        restart: () => restartNow(kubeConfig, workload, options.fieldManager),
      }),
  };
}

/** What the rollout reports to the metrics (server/metrics.ts implements it). */
export interface RolloutRecorder {
  rolloutLeading(leading: boolean): void;
  /** A workload started (`restarted`, `resized`), settled, failed, or whose update step threw (`error`). */
  rolloutWorkload(outcome: 'restarted' | 'resized' | 'settled' | 'failed' | 'error'): void;
  rolloutStopped(stopped: boolean): void;
  rolloutInFlight(count: number): void;
}

export interface RolloutControllerOptions {
  readonly kubeConfig: KubeConfig;
  /** Where the Lease lives: the injector's namespace. */
  readonly namespace: string;
  readonly leaseName: string;
  readonly identity: string;
  readonly settings: RolloutSettings;
  readonly decision: DecisionOptions;
  readonly templates: () => TemplateSet | undefined;
  /** The Namespace watch's answer (a promise when not cached: then unknown, this round). */
  readonly namespaceMetadata: (namespace: string) => NamespaceMetadata | Promise<NamespaceMetadata>;
  readonly recorder: RolloutRecorder;
  readonly log: Logger;
  readonly backoff: Backoff;
  /** The per-workload step (default: resizeOrRestartStep under `fieldManager`). */
  readonly update?: WorkloadUpdateStep;
  /** The server's `--allowed-overrides`: a resized proxy keeps the overrides injection gave it. */
  readonly allowedOverrides?: readonly OverrideName[];
  /** The field manager of the restart's patch (default `envoy-injector`). */
  readonly fieldManager?: string;
  readonly watchLiveness?: Partial<WatchLiveness> | undefined;
  readonly leaseTimings?: LeaseTimings;
  /** Events are gathered this long before a plan (default 1 s). */
  readonly debounceMs?: number;
  /** A plan at least this often, for the ready timeout (default 10 s; in memory, no request). */
  readonly tickMs?: number;
}

/**
 * The rollout by budget (docs/fleet.md): the leader among the replicas
 * (LeaseElection) watches the fleet (RolloutWatches), plans (planRollout) on
 * every change and on a tick, and brings outdated workloads current one at a
 * time a namespace, `maxConcurrent` at once. A failed rollout is a Warning
 * Event on its workload, a metric, and a stop kept in the Lease's annotation.
 */
export class RolloutController {
  readonly #options: RolloutControllerOptions;
  readonly #election: LeaseElection;
  readonly #update: WorkloadUpdateStep;
  #watches: RolloutWatches | undefined;
  #inFlight: InFlight[] | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #tick: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stoppedLogged = '';
  /** A stop written to the Lease with the next renewal: it holds before the Lease shows it. */
  #pendingStop: RolloutStop | undefined;
  /** The `at` of a stop lifted here: the Lease may show it until the next renewal. */
  #liftedAt: string | undefined;
  /** Workloads whose change was refused (a 403, a webhook's no): not tried again before `until`, backing off. */
  readonly #refused = new Map<string, { failures: number; until: number }>();

  constructor(options: RolloutControllerOptions) {
    this.#options = options;
    this.#update = options.update ?? resizeOrRestartStep(options.kubeConfig, { fieldManager: options.fieldManager, context: (namespace) => this.#resizeContext(namespace), log: options.log });
    this.#election = new LeaseElection({
      kubeConfig: options.kubeConfig,
      namespace: options.namespace,
      name: options.leaseName,
      identity: options.identity,
      ...(options.leaseTimings === undefined ? {} : { timings: options.leaseTimings }),
      log: options.log,
      onStartedLeading: () => this.#startLeading(),
      onStoppedLeading: () => this.#stopLeading(),
    });
    options.recorder.rolloutLeading(false);
    options.recorder.rolloutStopped(false);
    options.recorder.rolloutInFlight(0);
  }

  get isLeader(): boolean {
    return this.#election.isLeader;
  }

  start(): void {
    this.#election.start();
  }

  /** Stops leading (the watches, the plans, waiting for the one running), then gives the Lease up. */
  stop(): Promise<void> {
    return this.#election.stop();
  }

  #startLeading(): void {
    this.#watches = new RolloutWatches({ kubeConfig: this.#options.kubeConfig, backoff: this.#options.backoff, watchLiveness: this.#options.watchLiveness, log: this.#options.log, onChange: () => this.#schedule() });
    this.#watches.start();
    this.#tick = setInterval(() => this.#schedule(), this.#options.tickMs ?? 10_000);
    this.#tick.unref();
    this.#options.recorder.rolloutLeading(true);
  }

  async #stopLeading(): Promise<void> {
    clearInterval(this.#tick);
    clearTimeout(this.#debounce);
    this.#tick = this.#debounce = undefined;
    this.#watches?.stop();
    this.#watches = undefined;
    await this.#running;
    this.#inFlight = undefined;
    this.#pendingStop = undefined;
    this.#refused.clear();
    this.#options.recorder.rolloutLeading(false);
    this.#options.recorder.rolloutInFlight(0);
  }

  #schedule(): void {
    if (this.#debounce !== undefined || this.#watches === undefined) return;
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      if (this.#running !== undefined) {
        this.#again = true;
        return;
      }
      this.#running = this.#plan()
        .catch((error: unknown) => this.#options.log.error({ err: error }, 'rollout: a plan failed'))
        .finally(() => {
          this.#running = undefined;
          if (this.#again) {
            this.#again = false;
            this.#schedule();
          }
        });
    }, this.#options.debounceMs ?? 1_000);
    this.#debounce.unref();
  }

  /** One round: judge what is in flight, keep or lift the stop, start what the budget allows. */
  async #plan(): Promise<void> {
    const watches = this.#watches;
    const templates = this.#options.templates();
    if (watches === undefined || !watches.hasSynced || templates === undefined || !this.#election.isLeader) return;
    const objects = watches.workloads();
    const namespaceMetadata = (namespace: string): NamespaceMetadata | undefined => {
      const found = this.#options.namespaceMetadata(namespace);
      if (!(found instanceof Promise)) return found;
      found.catch(() => undefined); // unknown this round; the read fills the cache for the next
      return undefined;
    };
    const report = buildFleetReport({ pods: watches.podRecords(), owners: watches.owners(), templates, namespaceLabels: (namespace) => namespaceMetadata(namespace)?.labels, decision: this.#options.decision });
    const now = Date.now();
    this.#inFlight ??= inheritedInFlight(report, objects, this.#options.settings, now);
    let stop = this.#currentStop(report, objects);
    const retryLater = new Set([...this.#refused].filter(([, refusal]) => refusal.until > now).map(([key]) => key));
    const step = planRollout({ report, objects, namespaceMetadata, decision: this.#options.decision, inFlight: this.#inFlight, settings: this.#options.settings, now, retryLater });
    for (const workload of step.settled) {
      this.#options.recorder.rolloutWorkload('settled');
      this.#options.log.info({ workload: describe(workload) }, `rollout: ${describe(workload)} is current and Ready`);
    }
    for (const { workload, why } of step.failed) {
      this.#options.recorder.rolloutWorkload('failed');
      this.#options.log.warn({ workload: describe(workload), why }, `rollout: ${describe(workload)} failed (${why}); the rollout stops`);
      await this.#postFailedEvent(workload, objects.get(ownerKey(workload.namespace, workload)), why);
      if (stop === undefined) {
        stop = { namespace: workload.namespace, kind: workload.kind, name: workload.name, why, templates: templatesFingerprint(report), at: new Date(now).toISOString() };
        this.#pendingStop = stop;
        this.#election.setAnnotation(ROLLOUT_STOPPED_ANNOTATION, JSON.stringify(stop));
      }
    }
    this.#options.recorder.rolloutStopped(stop !== undefined);
    if (stop !== undefined) {
      this.#inFlight = step.inFlight.filter((entry) => !step.start.includes(entry.workload));
      this.#options.recorder.rolloutInFlight(this.#inFlight.length);
      return;
    }
    this.#inFlight = [...step.inFlight];
    const pods = step.start.length === 0 ? new Map<string, PodRef[]>() : podsByWorkload(watches);
    for (const workload of step.start) {
      const key = ownerKey(workload.namespace, workload);
      await this.#bringCurrent(workload, objects.get(key), pods.get(key) ?? []);
    }
    this.#options.recorder.rolloutInFlight(this.#inFlight.length);
  }

  /** The stop the Lease holds, if it still holds; one that no longer does is lifted (logged, removed from the Lease). */
  #currentStop(report: Parameters<typeof stopHolds>[1], objects: ReadonlyMap<string, JsonObject>): RolloutStop | undefined {
    let stop = parseRolloutStop(this.#election.annotation(ROLLOUT_STOPPED_ANNOTATION));
    if (stop !== undefined && stop.at === this.#liftedAt) stop = undefined;
    // Until the Lease shows the stop this leader wrote, the stop is that one.
    if (this.#pendingStop !== undefined && stop?.at === this.#pendingStop.at) this.#pendingStop = undefined;
    stop ??= this.#pendingStop;
    if (stop === undefined) return undefined;
    if (stopHolds(stop, report, objects)) {
      const said = `${stop.namespace}/${stop.name}@${stop.at}`;
      if (this.#stoppedLogged !== said) this.#options.log.warn({ stop }, `rollout: stopped since ${stop.at} after ${stop.kind} ${stop.namespace}/${stop.name} failed (${stop.why}); it resumes when the templates change or that workload is Ready`);
      this.#stoppedLogged = said;
      return stop;
    }
    this.#options.log.info({ stop }, 'rollout: resumed (the templates changed, or the workload that failed is Ready or gone)');
    this.#pendingStop = undefined;
    this.#liftedAt = stop.at;
    this.#election.setAnnotation(ROLLOUT_STOPPED_ANNOTATION, undefined);
    return undefined;
  }

  /** What a resize plans with, as `status --resize`; undefined (a restart) while the templates or the namespace are unknown. */
  #resizeContext(namespace: string): ResizeContext | undefined {
    const templates = this.#options.templates();
    const metadata = this.#options.namespaceMetadata(namespace);
    if (templates === undefined || metadata instanceof Promise) return undefined;
    return { templates, namespaceAnnotations: metadata.annotations, ...(this.#options.allowedOverrides === undefined ? {} : { allowedOverrides: this.#options.allowedOverrides }) };
  }

  async #bringCurrent(workload: WorkloadReport, object: JsonObject | undefined, pods: readonly PodRef[]): Promise<void> {
    if (!this.#election.isLeader || object === undefined) {
      this.#inFlight = this.#inFlight?.filter((entry) => entry.workload !== workload);
      return;
    }
    try {
      const how = await this.#update.bringCurrent(workload, object, pods);
      if (how === 'restarted') {
        // A new Pod template is a new generation: the entry waits until the watch has seen it.
        const generation = numberOf(objectAt(object, 'metadata')?.['generation']) ?? 0;
        this.#inFlight = this.#inFlight?.map((entry) => (entry.workload === workload ? { ...entry, awaitGeneration: generation + 1 } : entry));
      }
      this.#refused.delete(ownerKey(workload.namespace, workload));
      this.#options.recorder.rolloutWorkload(how);
      this.#options.log.info({ workload: describe(workload), how }, `rollout: ${describe(workload)} ${how}`);
    } catch (error) {
      const key = ownerKey(workload.namespace, workload);
      const failures = (this.#refused.get(key)?.failures ?? 0) + 1;
      // 10 s, doubling, at most 10 minutes: a refused patch is never a loop against the API server.
      const delayMs = Math.min(REFUSED_MAX_MS, REFUSED_FIRST_MS * 2 ** (failures - 1));
      this.#refused.set(key, { failures, until: Date.now() + delayMs });
      this.#options.recorder.rolloutWorkload('error');
      this.#options.log.warn({ workload: describe(workload), err: describeKubeError(error), retryInMs: delayMs }, `rollout: bringing ${describe(workload)} current failed (${describeKubeError(error)}); tried again in ${Math.round(delayMs / 1000)} s`);
      this.#inFlight = this.#inFlight?.filter((entry) => entry.workload !== workload);
    }
  }

  async #postFailedEvent(workload: WorkloadReport, object: JsonObject | undefined, why: string): Promise<void> {
    const body = rolloutFailedEvent({ namespace: workload.namespace, kind: workload.kind, name: workload.name, uid: stringAt(objectAt(object, 'metadata'), 'uid'), why, reportingInstance: this.#options.identity, at: new Date() });
    try {
      await kubeJson(this.#options.kubeConfig, { method: 'POST', path: `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(workload.namespace)}/events`, body, timeoutMs: 5_000 });
    } catch (error) {
      this.#options.log.warn({ workload: describe(workload), err: describeKubeError(error) }, `rollout: the Warning Event on ${describe(workload)} was not written (${describeKubeError(error)})`);
    }
  }
}

const REFUSED_FIRST_MS = 10_000;
const REFUSED_MAX_MS = 10 * 60_000;

function numberOf(value: unknown): number | undefined {
  return typeof value === 'number' ? value : undefined;
}

function describe(workload: WorkloadReport): string {
  return `${workload.kind} ${workload.namespace}/${workload.name}`;
}

/** The Pods of each workload the watch holds, keyed by `ownerKey`, as the report groups them. */
function podsByWorkload(watches: RolloutWatches): Map<string, PodRef[]> {
  const owners = watches.owners();
  const pods = new Map<string, PodRef[]>();
  for (const pod of watches.podRecords()) {
    const key = ownerKey(pod.namespace, resolveWorkload(pod, owners));
    const list = pods.get(key) ?? [];
    list.push({ namespace: pod.namespace, name: pod.name });
    pods.set(key, list);
  }
  return pods;
}
