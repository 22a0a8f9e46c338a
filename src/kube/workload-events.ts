import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import {
  eventObject,
  newSeries,
  noticeKey,
  PendingNotices,
  seriesPatch,
  storedEventOf,
  type EventSeries,
  type PendingNotice,
  type WorkloadEventRecorder,
  type WorkloadEventSink,
} from '../events/event-series.js';
import { controllerOf, ownerLookupPath, type ObjectRef, type WorkloadNotice } from '../events/workload-notices.js';
import { isJsonObject, objectAt } from '../injection/index.js';
import { describeKubeError, kubeErrorStatus, kubeJson, type KubeJsonRequest } from './api/index.js';

export interface WorkloadEventsOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly recorder: WorkloadEventRecorder;
  /** Distinct notices queued between two flushes, and Events followed at once (`--event-queue-size`). */
  readonly queueSize: number;
  /** The Events' `reportingInstance`: this replica (its Pod's name). */
  readonly reportingInstance: string;
  /** How often queued notices are written (default 1 s). */
  readonly flushIntervalMs?: number;
  /** Bound on each API call (default 5 s). */
  readonly requestTimeoutMs?: number;
  readonly now?: () => Date;
}

/** A ReplicaSet's or Job's owner, remembered this long: a burst of Pods costs one read per ReplicaSet. */
const OWNER_TTL_MS = 5 * 60_000;
const OWNER_CACHE_MAX = 1_000;
/** A series not seen for this long is forgotten here (its Event stays; a new occurrence finds it by name). */
const SERIES_FORGET_MS = 10 * 60_000;
/** Flushes a notice or series may fail (API server down) before its occurrences are given up. */
const MAX_ATTEMPTS = 5;

/**
 * Warning Events on workloads, off the request path: `record` queues (bounded,
 * aggregated, never waiting), a timer flushes. Each flush follows a
 * ReplicaSet or Job up to its controller (cached), adds the occurrences to
 * the series of their workload, reason and note, and creates or patches one
 * Event per series (docs/design.md §12).
 */
export class WorkloadEvents implements WorkloadEventSink {
  readonly #options: WorkloadEventsOptions;
  readonly #pending: PendingNotices;
  readonly #series = new Map<string, EventSeries>();
  readonly #owners = new Map<string, { workload: ObjectRef; at: number }>();
  readonly #now: () => Date;
  #timer: NodeJS.Timeout | undefined;
  #flushing: Promise<void> | undefined;

  constructor(options: WorkloadEventsOptions) {
    this.#options = options;
    this.#pending = new PendingNotices(options.queueSize);
    this.#now = options.now ?? (() => new Date());
  }

  record(notice: WorkloadNotice): void {
    if (!this.#pending.add(notice, this.#now())) this.#options.recorder.workloadEventsDropped(1);
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.flush(), this.#options.flushIntervalMs ?? 1_000);
    this.#timer.unref();
  }

  /** Writes what is queued; one flush at a time (a caller during one gets that one). Never rejects. */
  flush(): Promise<void> {
    this.#flushing ??= this.#flushOnce()
      .catch((error: unknown) => this.#options.log.error({ err: error }, 'writing workload Events failed'))
      .finally(() => (this.#flushing = undefined));
    return this.#flushing;
  }

  /** Stops the timer and makes a last flush, given at most TIMEOUTMS. */
  async stop(timeoutMs: number): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), timeoutMs)));
    const result = await Promise.race([this.flush().then(() => this.flush()), timedOut]);
    clearTimeout(timer);
    if (result === 'timeout') this.#options.log.warn({ timeoutMs }, `workload Events not all written within ${timeoutMs} ms of shutdown`);
  }

  /** Queued notices, for tests and the shutdown log. */
  get pending(): number {
    return this.#pending.size;
  }

  async #flushOnce(): Promise<void> {
    const failures: string[] = [];
    for (const entry of this.#pending.take()) {
      const workload = await this.#workloadOf(entry, failures);
      if (workload !== undefined) this.#observe(entry, workload);
    }
    for (const series of this.#series.values()) {
      if (series.unwritten === 0) continue;
      // The API server is down: the rest waits for the next flush instead of each waiting for its timeout.
      if (!(await this.#write(series, failures))) break;
    }
    this.#forgetFinished(this.#now().getTime());
    if (failures.length > 0) this.#options.log.warn({ failures: failures.length }, `workload Events: ${failures.length} API calls failed, retrying at the next flush; first: ${failures[0]}`);
  }

  /** The workload of a notice's Pod controller; undefined when it could not be read now (requeued or given up). */
  async #workloadOf(entry: PendingNotice, failures: string[]): Promise<ObjectRef | undefined> {
    const { namespace, owner } = entry.notice;
    const path = ownerLookupPath(namespace, owner);
    if (path === undefined) return owner;
    const now = this.#now().getTime();
    const cached = this.#owners.get(owner.uid);
    if (cached !== undefined && now - cached.at < OWNER_TTL_MS) return cached.workload;
    let workload: ObjectRef;
    try {
      const object = await this.#call({ method: 'GET', path });
      workload = controllerOf(isJsonObject(object) ? objectAt(object, 'metadata') : undefined) ?? owner;
    } catch (error) {
      const status = kubeErrorStatus(error);
      if (status !== 403 && status !== 404) {
        failures.push(`GET ${path}: ${describeKubeError(error)}`);
        entry.attempts += 1;
        if (entry.attempts >= MAX_ATTEMPTS || !this.#pending.requeue(entry)) this.#giveUp(entry.count, `the owner of ${owner.kind} ${namespace}/${owner.name} could not be read`, error);
        return undefined;
      }
      // Gone, or not ours to read: the Event goes on the Pod's controller itself.
      this.#options.log.warn({ err: new Error(describeKubeError(error)), path }, `reading ${owner.kind} ${namespace}/${owner.name} failed; its Event goes on it rather than on its owner`);
      workload = owner;
    }
    if (this.#owners.size >= OWNER_CACHE_MAX) this.#owners.delete(this.#owners.keys().next().value ?? '');
    this.#owners.set(owner.uid, { workload, at: now });
    return workload;
  }

  #observe(entry: PendingNotice, workload: ObjectRef): void {
    const { namespace, reason, note } = entry.notice;
    const key = noticeKey(namespace, workload.uid, reason, note);
    let series = this.#series.get(key);
    if (series === undefined) {
      if (this.#series.size >= this.#options.queueSize && !this.#evictOne()) {
        this.#options.recorder.workloadEventsDropped(entry.count);
        return;
      }
      series = newSeries(namespace, workload, entry);
      this.#series.set(key, series);
    }
    series.unwritten += entry.count;
    if (entry.lastAt > series.lastAt) series.lastAt = entry.lastAt;
  }

  /** Creates or patches the series' Event; false when the API server failed in a way worth retrying later. */
  async #write(series: EventSeries, failures: string[]): Promise<boolean> {
    const eventPath = `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(series.namespace)}/events`;
    try {
      let stored = series.stored;
      if (stored === undefined) {
        const created = await this.#call({ method: 'POST', path: eventPath, body: eventObject(series, this.#options.reportingInstance) }).catch((error: unknown) => {
          // Another replica (or this one before a restart) made it: add to its count.
          if (kubeErrorStatus(error) === 409) return undefined;
          throw error;
        });
        if (created !== undefined) return this.#written(series, created, 'created');
        // Read through an empty merge patch (it changes nothing): RBAC grants create and patch on Events, not get.
        stored = storedEventOf(await this.#call({ method: 'PATCH', path: `${eventPath}/${series.name}`, contentType: 'application/merge-patch+json', body: {} }));
        if (stored === undefined) throw new Error(`Event ${series.namespace}/${series.name}: the API server answered something else`);
      }
      const patched = await this.#call({ method: 'PATCH', path: `${eventPath}/${series.name}`, contentType: 'application/merge-patch+json', body: seriesPatch(series, stored) });
      return this.#written(series, patched, 'patched');
    } catch (error) {
      this.#options.recorder.workloadEventWritten('failed');
      const status = kubeErrorStatus(error);
      // Deleted (Events expire after an hour) or changed by another replica: read or create it again at the next flush.
      if (status === 404 || status === 409) {
        series.stored = undefined;
        return true;
      }
      const transient = status === undefined || status === 429 || status >= 500;
      series.failures += 1;
      if (transient && series.failures < MAX_ATTEMPTS) {
        failures.push(`Event ${series.namespace}/${series.name}: ${describeKubeError(error)}`);
        return false;
      }
      this.#giveUp(series.unwritten, `the ${series.reason} Event of ${series.regarding.kind} ${series.namespace}/${series.regarding.name} could not be written`, error);
      series.unwritten = 0;
      series.failures = 0;
      return transient ? false : true;
    }
  }

  #written(series: EventSeries, answer: unknown, result: 'created' | 'patched'): true {
    this.#options.recorder.workloadEventWritten(result);
    series.stored = storedEventOf(answer);
    series.unwritten = 0;
    series.failures = 0;
    return true;
  }

  #giveUp(occurrences: number, what: string, error: unknown): void {
    this.#options.recorder.workloadEventsDropped(occurrences);
    this.#options.log.warn({ err: new Error(describeKubeError(error)), occurrences }, `${what}: ${describeKubeError(error)}; ${occurrences} occurrences dropped`);
  }

  /** Makes room for a new series by forgetting the one seen longest ago with nothing left to write. */
  #evictOne(): boolean {
    let oldest: [string, EventSeries] | undefined;
    for (const entry of this.#series) if (entry[1].unwritten === 0 && (oldest === undefined || entry[1].lastAt < oldest[1].lastAt)) oldest = entry;
    if (oldest === undefined) return false;
    this.#series.delete(oldest[0]);
    return true;
  }

  #forgetFinished(now: number): void {
    for (const [key, series] of this.#series) if (series.unwritten === 0 && now - series.lastAt.getTime() > SERIES_FORGET_MS) this.#series.delete(key);
  }

  #call(call: KubeJsonRequest): Promise<unknown> {
    return kubeJson(this.#options.kubeConfig, { ...call, timeoutMs: this.#options.requestTimeoutMs ?? 5_000 });
  }
}
