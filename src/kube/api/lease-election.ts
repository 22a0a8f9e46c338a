import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { microTime } from '../../events/event-series.js';
import { isJsonObject, objectAt, own, stringAt, type JsonObject } from '../../injection/index.js';
import { describeKubeError, kubeErrorStatus } from './kube-errors.js';
import { kubeJson } from './kube-json.js';

/**
 * client-go's leader election (tools/leaderelection) timings: a follower may
 * take the Lease once its record has not changed for `leaseDurationMs`, as
 * measured on its own clock; a leader that has not renewed within
 * `renewDeadlineMs` stops leading, which leaves it `leaseDurationMs -
 * renewDeadlineMs` to stop acting before anyone else may start.
 */
export interface LeaseTimings {
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  /** How often the leader renews and a follower looks at the Lease (followers with jitter). */
  readonly retryPeriodMs: number;
}

/**
 * Slower than client-go's 15/10/2 s: a rollout waits minutes for Pods, and a
 * follower's one GET every 10 s (a leader's one PATCH) is all the election
 * costs the API server at rest.
 */
export const DEFAULT_LEASE_TIMINGS: LeaseTimings = { leaseDurationMs: 60_000, renewDeadlineMs: 40_000, retryPeriodMs: 10_000 };

/** client-go's JitterFactor: a follower waits a retry period plus up to 20 % of it. */
const JITTER = 0.2;

export interface LeaseElectionOptions {
  readonly kubeConfig: KubeConfig;
  readonly namespace: string;
  readonly name: string;
  /** Unique per process (client-go: host name and a UUID). */
  readonly identity: string;
  readonly timings?: LeaseTimings;
  readonly log: Logger;
  /** Called once this process holds the Lease. */
  readonly onStartedLeading: () => void;
  /** Called when it stops holding it (a renew deadline missed, the Lease taken, or stop): stop acting, at once. */
  readonly onStoppedLeading: () => void | Promise<void>;
}

/** What this process last saw of the Lease, and when it saw it change (its own clock, never the holder's). */
interface Observed {
  readonly resourceVersion: string;
  readonly holder: string;
  readonly durationMs: number;
  readonly transitions: number;
  readonly acquireTime: string | undefined;
  readonly annotations: Readonly<Record<string, string>>;
  readonly record: string;
  readonly changedAt: number;
}

/** Checks the timings as client-go's NewLeaderElector does; throws on a set that cannot hold. */
export function checkLeaseTimings(timings: LeaseTimings): void {
  if (!(timings.leaseDurationMs > timings.renewDeadlineMs)) throw new Error('lease duration must be greater than the renew deadline');
  if (!(timings.renewDeadlineMs > timings.retryPeriodMs * (1 + JITTER))) throw new Error('the renew deadline must be greater than the retry period times 1.2');
  if (!(timings.retryPeriodMs > 0)) throw new Error('the retry period must be positive');
}

/**
 * One leader among the replicas through a `coordination.k8s.io/v1` Lease, as
 * client-go's LeaseLock does it: GET, then a create or a merge patch whose
 * `resourceVersion` is a precondition (two candidates racing: one gets 409);
 * the holder's record is trusted for `leaseDurationSeconds` after this process
 * saw it change; on stop the leader gives the Lease up (holder emptied,
 * duration 1 s) so that another replica takes over at its next look.
 * Annotations set by the leader (`setAnnotation`) ride on its renewals: state
 * that outlives a change of leader.
 */
export class LeaseElection {
  readonly #options: LeaseElectionOptions;
  readonly #timings: LeaseTimings;
  readonly #path: string;
  #observed: Observed | undefined;
  #leading = false;
  #lastRenewAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = true;
  #round: Promise<void> = Promise.resolve();
  readonly #annotations = new Map<string, string | undefined>();

  constructor(options: LeaseElectionOptions) {
    this.#options = options;
    this.#timings = options.timings ?? DEFAULT_LEASE_TIMINGS;
    checkLeaseTimings(this.#timings);
    this.#path = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(options.namespace)}/leases`;
  }

  /** True while this process holds the Lease and renewed it within the renew deadline. */
  get isLeader(): boolean {
    return this.#leading && Date.now() - this.#lastRenewAt < this.#timings.renewDeadlineMs;
  }

  /** The holder last seen ('' when none). */
  get holder(): string {
    return this.#observed?.holder ?? '';
  }

  /** An annotation of the Lease as last seen. */
  annotation(key: string): string | undefined {
    return this.#observed?.annotations[key];
  }

  /** Writes KEY (undefined removes it) with the next renewal, which comes at once. Only a leader writes. */
  setAnnotation(key: string, value: string | undefined): void {
    this.#annotations.set(key, value);
    if (this.#leading) this.#schedule(0);
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#schedule(0);
  }

  /** Stops trying; a leader stops leading first, then gives the Lease up. Never rejects. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#round;
    if (!this.#leading) return;
    await this.#stopLeading();
    await this.#release();
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#round = this.#tryRound().finally(() => {
        const period = this.#timings.retryPeriodMs;
        // The leader renews on time; followers spread out, as client-go's JitterUntil does.
        if (this.#timer === undefined) this.#schedule(this.#leading ? period : period * (1 + Math.random() * JITTER));
      });
    }, delayMs);
    this.#timer.unref();
  }

  async #tryRound(): Promise<void> {
    let renewed = false;
    try {
      renewed = await this.#tryAcquireOrRenew();
    } catch (error) {
      this.#options.log.warn({ lease: this.#options.name, err: describeKubeError(error) }, `leader election: Lease ${this.#options.namespace}/${this.#options.name} not reached (${describeKubeError(error)})`);
    }
    if (this.#stopped) return;
    if (renewed) {
      this.#lastRenewAt = Date.now();
      if (!this.#leading) {
        this.#leading = true;
        this.#options.log.info({ lease: this.#options.name, identity: this.#options.identity }, `leader election: leading (Lease ${this.#options.namespace}/${this.#options.name})`);
        this.#options.onStartedLeading();
      }
    } else if (this.#leading && (this.holder !== this.#options.identity || Date.now() - this.#lastRenewAt >= this.#timings.renewDeadlineMs)) {
      this.#options.log.warn({ lease: this.#options.name, holder: this.holder }, 'leader election: lost the Lease (not renewed within the renew deadline, or taken)');
      await this.#stopLeading();
    }
  }

  async #stopLeading(): Promise<void> {
    this.#leading = false;
    try {
      await this.#options.onStoppedLeading();
    } catch (error) {
      this.#options.log.error({ err: error }, 'leader election: stopping the leader\'s work failed');
    }
  }

  /** True when this process holds the Lease after the round (acquired or renewed). */
  async #tryAcquireOrRenew(): Promise<boolean> {
    const now = new Date();
    const timeoutMs = this.#requestTimeoutMs();
    let current: JsonObject | undefined;
    try {
      current = asObject(await kubeJson(this.#options.kubeConfig, { method: 'GET', path: `${this.#path}/${encodeURIComponent(this.#options.name)}`, timeoutMs }));
    } catch (error) {
      if (kubeErrorStatus(error) !== 404) throw error;
    }
    if (current === undefined) {
      const created = await kubeJson(this.#options.kubeConfig, { method: 'POST', path: this.#path, body: this.#leaseBody(now, undefined), timeoutMs }).catch((error: unknown) => {
        // Another candidate created it first: a follower this round.
        if (kubeErrorStatus(error) === 409) return undefined;
        throw error;
      });
      if (created === undefined) return false;
      this.#observe(asObject(created));
      return true;
    }
    this.#observe(current);
    const observed = this.#observed;
    if (observed === undefined) return false;
    const mine = observed.holder === this.#options.identity;
    if (!mine && observed.holder !== '' && observed.changedAt + observed.durationMs > now.getTime()) return false;
    try {
      this.#observe(asObject(await kubeJson(this.#options.kubeConfig, {
        method: 'PATCH',
        path: `${this.#path}/${encodeURIComponent(this.#options.name)}`,
        contentType: 'application/merge-patch+json',
        body: this.#leaseBody(now, observed),
        timeoutMs,
      })));
    } catch (error) {
      // Someone else wrote it since our GET: they may hold it now; look again next round.
      if (kubeErrorStatus(error) === 409) return false;
      throw error;
    }
    for (const [key, value] of [...this.#annotations]) if (this.#observed?.annotations[key] === value) this.#annotations.delete(key);
    return true;
  }

  /** A request must end before the renew deadline can pass unnoticed: at most a retry period. */
  #requestTimeoutMs(): number {
    return Math.max(1_000, this.#timings.retryPeriodMs);
  }

  /** The whole Lease for a create, or the merge patch of an update (its resourceVersion a precondition). */
  #leaseBody(now: Date, observed: Observed | undefined): JsonObject {
    const mine = observed?.holder === this.#options.identity;
    const annotations: Record<string, string | null> = {};
    for (const [key, value] of this.#annotations) annotations[key] = value ?? null;
    const spec = {
      holderIdentity: this.#options.identity,
      leaseDurationSeconds: Math.ceil(this.#timings.leaseDurationMs / 1000),
      acquireTime: mine && observed?.acquireTime !== undefined ? observed.acquireTime : microTime(now),
      renewTime: microTime(now),
      leaseTransitions: observed === undefined ? 0 : mine ? observed.transitions : observed.transitions + 1,
    };
    if (observed === undefined) return { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: this.#options.name, namespace: this.#options.namespace, annotations: stringsOnly(annotations) }, spec };
    return { metadata: { resourceVersion: observed.resourceVersion, ...(this.#annotations.size === 0 ? {} : { annotations }) }, spec };
  }

  /** Gives the Lease up, only if it is still ours as we last wrote it: the next candidate need not wait out the duration. */
  async #release(): Promise<void> {
    const observed = this.#observed;
    if (observed === undefined || observed.holder !== this.#options.identity) return;
    const now = microTime(new Date());
    try {
      await kubeJson(this.#options.kubeConfig, {
        method: 'PATCH',
        path: `${this.#path}/${encodeURIComponent(this.#options.name)}`,
        contentType: 'application/merge-patch+json',
        body: { metadata: { resourceVersion: observed.resourceVersion }, spec: { holderIdentity: null, leaseDurationSeconds: 1, acquireTime: now, renewTime: now, leaseTransitions: observed.transitions } },
        timeoutMs: this.#requestTimeoutMs(),
      });
      this.#options.log.info({ lease: this.#options.name }, 'leader election: Lease given up');
    } catch (error) {
      this.#options.log.warn({ lease: this.#options.name, err: describeKubeError(error) }, `leader election: giving the Lease up failed (${describeKubeError(error)}); it expires by itself`);
    }
  }

  #observe(lease: JsonObject | undefined): void {
    if (lease === undefined) return;
    const metadata = objectAt(lease, 'metadata');
    const spec = objectAt(lease, 'spec');
    const duration = own(spec ?? {}, 'leaseDurationSeconds');
    const transitions = own(spec ?? {}, 'leaseTransitions');
    const holder = stringAt(spec, 'holderIdentity') ?? '';
    const durationMs = (typeof duration === 'number' && duration > 0 ? duration : 1) * 1000;
    // The record, as client-go compares it: any change (a renewTime too) restarts the holder's term on our clock.
    const record = JSON.stringify(spec ?? {});
    const changedAt = this.#observed?.record === record ? this.#observed.changedAt : Date.now();
    this.#observed = {
      resourceVersion: stringAt(metadata, 'resourceVersion') ?? '',
      holder,
      durationMs,
      transitions: typeof transitions === 'number' ? transitions : 0,
      acquireTime: stringAt(spec, 'acquireTime'),
      annotations: stringsOnly(objectAt(metadata, 'annotations') ?? {}),
      record,
      changedAt,
    };
  }
}

function asObject(value: unknown): JsonObject | undefined {
  return isJsonObject(value) ? value : undefined;
}

function stringsOnly(map: Readonly<Record<string, unknown>>): Record<string, string> {
  const strings: Record<string, string> = {};
  for (const [key, value] of Object.entries(map)) if (typeof value === 'string') strings[key] = value;
  return strings;
}
