import { createHash } from 'node:crypto';
import { isJsonObject, objectAt, own, stringAt } from '../injection/index.js';
import type { ObjectRef, WorkloadNotice } from './workload-notices.js';

/** The Events' `reportingController`: a qualified name, as the API server requires. */
export const REPORTING_CONTROLLER = 'envoy-injector.io/injector';
/** The Events' `action`: what the injector did, or failed to do, to the workload's Pods. */
export const EVENT_ACTION = 'InjectSidecar';
/** The API server's bound on `reportingInstance`. */
const REPORTING_INSTANCE_MAX = 128;

/** Where Events go: the request path hands notices over and never waits. */
export interface WorkloadEventSink {
  /** Queues one occurrence; never throws, never waits. */
  record(notice: WorkloadNotice): void;
}

/** What the Events machinery counts, for the metrics (which live in server/). */
export interface WorkloadEventRecorder {
  /** Occurrences that will never reach an Event: the queue was full, or the API server kept failing. */
  workloadEventsDropped(occurrences: number): void;
  /** One write to the API server: an Event created, a series patched, or a call that failed. */
  workloadEventWritten(result: 'created' | 'patched' | 'failed'): void;
}

/** Occurrences of one notice since the last flush. */
export interface PendingNotice {
  readonly notice: WorkloadNotice;
  count: number;
  firstAt: Date;
  lastAt: Date;
  /** Flushes that could not place it yet (its owner unreadable). */
  attempts: number;
}

/**
 * The queue between the request path and the API server: occurrences
 * aggregated by the Pod's controller, reason and note, so that a burst of
 * 2,000 replicas is one entry with a count. At most `cap` entries: a new one
 * beyond that is refused (and counted by the caller); repeats of a queued one
 * always count.
 */
export class PendingNotices {
  readonly #entries = new Map<string, PendingNotice>();

  constructor(readonly cap: number) {}

  get size(): number {
    return this.#entries.size;
  }

  /** Counts one occurrence; false when it was dropped (the queue full of other notices). */
  add(notice: WorkloadNotice, at: Date): boolean {
    return this.#merge({ notice, count: 1, firstAt: at, lastAt: at, attempts: 0 });
  }

  /** Puts back an entry taken but not placed; false when the queue has filled meanwhile. */
  requeue(entry: PendingNotice): boolean {
    return this.#merge(entry);
  }

  /** Everything queued, in arrival order; the queue is empty afterwards. */
  take(): PendingNotice[] {
    const taken = [...this.#entries.values()];
    this.#entries.clear();
    return taken;
  }

  #merge(entry: PendingNotice): boolean {
    const key = noticeKey(entry.notice.namespace, entry.notice.owner.uid, entry.notice.reason, entry.notice.note);
    const queued = this.#entries.get(key);
    if (queued !== undefined) {
      queued.count += entry.count;
      if (entry.firstAt < queued.firstAt) queued.firstAt = entry.firstAt;
      if (entry.lastAt > queued.lastAt) queued.lastAt = entry.lastAt;
      queued.attempts = Math.max(queued.attempts, entry.attempts);
      return true;
    }
    if (this.#entries.size >= this.cap) return false;
    this.#entries.set(key, { ...entry });
    return true;
  }
}

/** One Event and what is known of it: one per workload, reason and note. */
export interface EventSeries {
  readonly namespace: string;
  readonly regarding: ObjectRef;
  readonly reason: string;
  readonly note: string;
  /** Derived from the four above: every replica of the injector writes the same Event. */
  readonly name: string;
  firstAt: Date;
  lastAt: Date;
  /** Occurrences not yet in the API server's count. */
  unwritten: number;
  /** The Event as last read or written; undefined until then, or when it must be read again. */
  stored: StoredEvent | undefined;
  /** Consecutive failed writes. */
  failures: number;
}

export interface StoredEvent {
  readonly resourceVersion: string;
  /** Occurrences it counts: `series.count`, or 1 for an Event without a series. */
  readonly count: number;
}

/** The key of a notice or series: namespace, object uid, reason, note. */
export function noticeKey(namespace: string, uid: string, reason: string, note: string): string {
  return JSON.stringify([namespace, uid, reason, note]);
}

export function newSeries(namespace: string, regarding: ObjectRef, pending: PendingNotice): EventSeries {
  const { reason, note } = pending.notice;
  return { namespace, regarding, reason, note, name: eventName(regarding, reason, note), firstAt: pending.firstAt, lastAt: pending.lastAt, unwritten: 0, stored: undefined, failures: 0 };
}

/**
 * `NAME.HASH`, as client-go names Events after the object they regard, but
 * with a hash of what identifies the series instead of a timestamp: every
 * replica (and a restarted one) finds the same Event and adds to its count.
 */
export function eventName(regarding: ObjectRef, reason: string, note: string): string {
  const hash = createHash('sha256').update(JSON.stringify([REPORTING_CONTROLLER, regarding.uid, reason, note])).digest('hex').slice(0, 16);
  // A DNS subdomain of at most 253 characters: the object's name (already one) cut to fit, ending alphanumeric.
  const base = regarding.name.toLowerCase().replace(/[^a-z0-9.-]/g, '-').slice(0, 253 - 17).replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  return `${base === '' ? 'workload' : base}.${hash}`;
}

/** The events.k8s.io/v1 Event a series is created as. */
export function eventObject(series: EventSeries, reportingInstance: string): Record<string, unknown> {
  const count = series.unwritten;
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: series.name, namespace: series.namespace },
    eventTime: microTime(series.firstAt),
    type: 'Warning',
    reason: series.reason,
    note: series.note,
    action: EVENT_ACTION,
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: reportingInstance.slice(0, REPORTING_INSTANCE_MAX) || 'envoy-injector',
    regarding: { ...series.regarding, namespace: series.namespace },
    // One occurrence is an Event without a series; the API server wants a series' count to be 2 or more.
    ...(count >= 2 ? { series: { count, lastObservedTime: microTime(series.lastAt) } } : {}),
  };
}

/**
 * The merge patch adding the unwritten occurrences to a stored Event's count;
 * its resourceVersion makes it conditional, so that two replicas adding at
 * once cannot lose each other's count (one gets 409 and reads again).
 */
export function seriesPatch(series: EventSeries, stored: StoredEvent): Record<string, unknown> {
  return {
    metadata: { resourceVersion: stored.resourceVersion },
    series: { count: stored.count + series.unwritten, lastObservedTime: microTime(series.lastAt) },
  };
}

/** The resourceVersion and count of an Event as the API server answered it; undefined when it is not one. */
export function storedEventOf(object: unknown): StoredEvent | undefined {
  if (!isJsonObject(object)) return undefined;
  const resourceVersion = stringAt(objectAt(object, 'metadata'), 'resourceVersion');
  if (resourceVersion === undefined) return undefined;
  const count = own(objectAt(object, 'series') ?? {}, 'count');
  return { resourceVersion, count: typeof count === 'number' && count >= 1 ? count : 1 };
}

/** metav1.MicroTime: RFC 3339 with exactly six fractional digits, in UTC. */
export function microTime(at: Date): string {
  return at.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
