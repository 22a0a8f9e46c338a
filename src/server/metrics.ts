import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { WorkloadEventRecorder } from '../events/event-series.js';
import { CaptureMode, Reason } from '../injection/index.js';
import type { TemplateReloadRecorder } from '../state/template-store.js';
import { DurationHistogram, type HistogramSeries } from './duration-histogram.js';
import { RolloutMetrics } from './rollout-metrics.js';

/** Why a request ended in an error, beside the decision reasons: a fixed set, never free text. */
export const ErrorReason = {
  malformedReview: 'malformed_review',
  bodyTooLarge: 'body_too_large',
  unsupportedMediaType: 'unsupported_media_type',
  internalError: 'internal_error',
  /** The namespace's labels could not be read: answered with HTTP 503 so that failurePolicy decides. */
  namespaceLabelsUnknown: 'namespace_labels_unknown',
} as const;
export type ErrorReason = (typeof ErrorReason)[keyof typeof ErrorReason];

export type AdmissionResult = 'injected' | 'skipped' | 'error';

/** What one label set of the admission metrics has counted since the counters were last read. */
interface AdmissionSlot {
  readonly requests: Counter.Internal;
  readonly warnings: Counter.Internal;
  readonly duration: HistogramSeries;
  counted: number;
  warned: number;
}

/** The label every series carries with `--metrics-release`: a name no scrape's target labels use. */
export const RELEASE_LABEL = 'envoy_injector_release';

/**
 * Every reason the webhook answers with, by result: the label values of
 * envoy_injector_admission_requests_total known in advance, each series
 * started at 0 (`startAdmissionSeriesAtZero`). Every `Reason` is in one list
 * but `requested_offline`, which only the offline `inject` gives
 * (test/observability.test.ts holds them to it).
 */
export const ADMISSION_REASONS: Readonly<Record<AdmissionResult, readonly (Reason | ErrorReason)[]>> = {
  injected: [Reason.podAnnotationTrue, Reason.legacyAnnotation, Reason.alwaysInjectSelector, Reason.namespaceEnabled],
  skipped: [
    Reason.notPodCreate,
    Reason.excludedNamespace,
    Reason.namespaceDisabled,
    Reason.podAnnotationFalse,
    Reason.neverInjectSelector,
    Reason.namespaceNotEnabled,
    Reason.hostNetwork,
    Reason.windowsPod,
    Reason.alreadyInjected,
    Reason.statusCopied,
    Reason.otherMeshInjected,
    Reason.proxyNameTaken,
    Reason.unknownTemplate,
    Reason.unknownNamespaceTemplate,
    Reason.templateNotLoaded,
    Reason.podResourcesUnpaddable,
    Reason.annotationsTooLarge,
  ],
  error: Object.values(ErrorReason),
};

/** Live values read at scrape time, so a scrape never shows a stale copy. */
export interface MetricSources {
  staleSeconds(): number;
  certificateNotAfter(): Date | undefined;
}

/**
 * The injector's Prometheus metrics, in a registry of their own (no global
 * state, so tests and several apps in one process do not collide).
 */
export class InjectorMetrics implements TemplateReloadRecorder, WorkloadEventRecorder {
  readonly registry = new Registry();

  readonly admissionRequests: Counter<'result' | 'reason'> = new Counter({
    name: 'envoy_injector_admission_requests_total',
    help: 'AdmissionReviews answered, by result (injected, skipped, error) and reason.',
    labelNames: ['result', 'reason'] as const,
    registers: [this.registry],
    // Counted per admission as plain numbers (recordAdmission), added here at every read: exact at every scrape.
    collect: (): void => this.#flushCounts(),
  });

  // Observed on every review: its series resolved once per slot (see duration-histogram.ts), exposed as prom-client's Histogram.
  readonly admissionDuration = new DurationHistogram(
    'envoy_injector_admission_duration_seconds',
    'Time to decide and build the answer to one AdmissionReview, from parsed body to response.',
    'result',
    // 100 µs to 1 s: the API server's timeout is seconds, our work is microseconds.
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
    this.registry,
  );

  readonly admissionWarnings: Counter<'result'> = new Counter({
    name: 'envoy_injector_admission_warnings_total',
    help: 'AdmissionReviews answered with at least one warning (an override not applied, a name the Pod already uses, a template problem), by result.',
    labelNames: ['result'] as const,
    registers: [this.registry],
    collect: (): void => this.#flushCounts(),
  });

  readonly capturedPods = new Counter({
    name: 'envoy_injector_captured_pods_total',
    help: 'Pods injected with traffic capture, by mode: initContainer (envoy-init in the Pod) or cni (the node installs the rules, the Pod checks them).',
    labelNames: ['mode'] as const,
    registers: [this.registry],
  });

  readonly templateInfo = new Gauge({
    name: 'envoy_injector_template_info',
    help: 'The live sidecar templates: 1 per template name and content hash.',
    labelNames: ['template', 'hash'] as const,
    registers: [this.registry],
  });

  readonly templateReloads = new Counter({
    name: 'envoy_injector_template_reloads_total',
    help: 'Template set updates, by result: applied, rejected (invalid, the last good set kept) or deleted.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly templateLastReload = new Gauge({
    name: 'envoy_injector_template_last_reload_timestamp_seconds',
    help: 'Unix time of the last template set that was applied.',
    registers: [this.registry],
  });

  readonly templateKeptLastGood = new Gauge({
    name: 'envoy_injector_template_kept_last_good',
    help: '1 while the latest update of the template source was rejected (invalid) or deleted and the last good set still serves, else 0.',
    registers: [this.registry],
  });

  readonly workloadEventDrops = new Counter({
    name: 'envoy_injector_workload_events_dropped_total',
    help: 'Occurrences of a workload Warning Event never written: the Event queue was full (--event-queue-size), or the API server kept failing.',
    registers: [this.registry],
  });

  readonly workloadEventWrites = new Counter({
    name: 'envoy_injector_workload_event_writes_total',
    help: 'Writes of workload Warning Events to the API server, by result: created, patched (a series count), failed.',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  /** The rollout by budget's leader, workloads, stop (server/rollout-metrics.ts). */
  readonly rollout = new RolloutMetrics(this.registry);

  workloadEventsDropped(occurrences: number): void {
    if (occurrences > 0) this.workloadEventDrops.inc(occurrences);
  }

  workloadEventWritten(result: 'created' | 'patched' | 'failed'): void {
    this.workloadEventWrites.labels(result).inc();
  }

  /** Set by createServerState once the state exists. */
  sources: MetricSources = { staleSeconds: () => 0, certificateNotAfter: () => undefined };

  readonly watchStale: Gauge = new Gauge({
    name: 'envoy_injector_watch_stale_seconds',
    help: 'Seconds since the cluster watches were last known in sync (0 when in sync or not watching).',
    registers: [this.registry],
    collect: (): void => this.watchStale.set(this.sources.staleSeconds()),
  });

  readonly certificateExpiry: Gauge = new Gauge({
    name: 'envoy_injector_certificate_expiry_timestamp_seconds',
    help: 'Unix time at which the serving certificate expires.',
    registers: [this.registry],
    collect: (): void => {
      const notAfter = this.sources.certificateNotAfter();
      if (notAfter !== undefined) this.certificateExpiry.set(notAfter.getTime() / 1000);
    },
  });

  /** `--cert-mode auto` only: whether every webhook's caBundle holds the CA of the served certificate. */
  trackCaBundle(trusted: () => boolean): void {
    this.#trackCondition('envoy_injector_ca_bundle_trusted', '1 when every webhook of the MutatingWebhookConfiguration trusts the CA of the served certificate, else 0 (--cert-mode auto).', trusted);
  }

  /** `--cert-mode auto` only: the injector's own CA, which it renews as it renews the serving certificate. */
  trackCaExpiry(notAfter: () => Date | undefined): void {
    const gauge: Gauge = new Gauge({
      name: 'envoy_injector_ca_expiry_timestamp_seconds',
      help: 'Unix time at which the CA that signed the served certificate expires (--cert-mode auto).',
      registers: [this.registry],
      collect: (): void => {
        const expiry = notAfter();
        if (expiry !== undefined) gauge.set(expiry.getTime() / 1000);
      },
    });
  }

  /** Policy mode only: whether the MutatingAdmissionPolicy in the cluster matches the live templates. */
  trackPolicySync(inSync: () => boolean): void {
    this.#trackCondition('envoy_injector_policy_in_sync', '1 when the MutatingAdmissionPolicy in the cluster was compiled from the live templates, else 0 (policy mode).', inSync);
  }

  /** Policy mode only: 1 while the live templates compile to a policy the API server would refuse (a CEL limit), else 0. */
  trackPolicyRefused(refused: () => boolean): void {
    this.#trackCondition(
      'envoy_injector_policy_templates_refused',
      '1 while the live templates compile to a MutatingAdmissionPolicy the API server would refuse (a CEL limit: /readyz names it); the last good policy stays (policy mode).',
      refused,
    );
  }

  /** A gauge of one mode only, registered by that mode: 1 while CONDITION holds at scrape time, else 0. */
  #trackCondition(name: string, help: string, condition: () => boolean): void {
    const gauge: Gauge = new Gauge({ name, help, registers: [this.registry], collect: (): void => gauge.set(condition() ? 1 : 0) });
  }

  /** The Prometheus text exposition, with its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  constructor(options: { processMetrics?: boolean; release?: string | undefined } = {}) {
    // On every series, the process's too: the alerts select a release by it, whatever the scrape's own labels.
    if (options.release !== undefined) this.registry.setDefaultLabels({ [RELEASE_LABEL]: options.release });
    // Event loop lag sampled every 100 ms: prom-client's 10 ms wakes the idle loop 100 times a second (half its idle CPU).
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  /**
   * The webhook's counters the alerts read, every label value known in
   * advance at 0 from the start (Prometheus' "avoid missing metrics"): a
   * series that appears at 1 has no earlier sample, and `increase()` never
   * sees that first event.
   */
  startAdmissionSeriesAtZero(): void {
    for (const [result, reasons] of Object.entries(ADMISSION_REASONS)) for (const reason of reasons) this.admissionRequests.labels(result, reason).inc(0);
    // Warnings come with an answer that injects or skips; an error answer has none.
    for (const result of ['injected', 'skipped']) this.admissionWarnings.labels(result).inc(0);
    for (const mode of Object.values(CaptureMode)) this.capturedPods.labels(mode).inc(0);
  }

  /**
   * One slot per label set an admission can count, its children resolved
   * once (a prom-client child resolves its labels again on every call: a
   * string built, hashed, validated). An admission adds 1 to a plain number;
   * the counters take the sums when read (their `collect`, before every scrape).
   */
  readonly #slots: Readonly<Record<AdmissionResult, Map<Reason | ErrorReason, AdmissionSlot>>> = { injected: new Map(), skipped: new Map(), error: new Map() };

  /** One admission answered: counted, its duration observed, and whether it carried warnings (an error never does). */
  recordAdmission(result: AdmissionResult, reason: Reason | ErrorReason, seconds: number, warned = false): void {
    const slot = this.#slots[result].get(reason) ?? this.#addSlot(result, reason);
    slot.counted += 1;
    if (warned) slot.warned += 1;
    this.admissionDuration.observe(slot.duration, seconds);
  }

  #addSlot(result: AdmissionResult, reason: Reason | ErrorReason): AdmissionSlot {
    const slot = { requests: this.admissionRequests.labels(result, reason), warnings: this.admissionWarnings.labels(result), duration: this.admissionDuration.series(result), counted: 0, warned: 0 };
    this.#slots[result].set(reason, slot);
    return slot;
  }

  /** Adds the admissions counted since the last read to the counters. */
  #flushCounts(): void {
    for (const slot of Object.values(this.#slots).flatMap((byReason) => [...byReason.values()])) {
      if (slot.counted > 0) slot.requests.inc(slot.counted);
      if (slot.warned > 0) slot.warnings.inc(slot.warned);
      slot.counted = 0;
      slot.warned = 0;
    }
  }

  templatesApplied(templates: Iterable<{ name: string; hash: string }>): void {
    this.templateReloads.labels('applied').inc();
    this.templateLastReload.setToCurrentTime();
    this.templateKeptLastGood.set(0);
    // Replace the template_info series: old hashes must not linger.
    this.templateInfo.reset();
    for (const { name, hash } of templates) this.templateInfo.labels(name, hash).set(1);
  }

  templateReloadKept(result: 'rejected' | 'deleted'): void {
    this.templateReloads.labels(result).inc();
    this.templateKeptLastGood.set(1);
  }
}
