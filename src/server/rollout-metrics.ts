import { Counter, Gauge, type Registry } from 'prom-client';

/** What a rollout's workload came to: the label values of envoy_injector_rollout_workloads_total, each started at 0. */
export const ROLLOUT_OUTCOMES = ['restarted', 'resized', 'settled', 'failed', 'error'] as const;
export type RolloutOutcome = (typeof ROLLOUT_OUTCOMES)[number];

/**
 * The rollout by budget's metrics (kube/rollout-controller.ts reports through
 * its RolloutRecorder, which this implements). Registered in every webhook
 * injector, at 0 where the rollout is off: a replica that is not the leader
 * says 0 too.
 */
export class RolloutMetrics {
  readonly #leading: Gauge;
  readonly #stopped: Gauge;
  readonly #inFlight: Gauge;
  readonly #workloads: Counter<'outcome'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#leading = new Gauge({ name: 'envoy_injector_rollout_leader', help: '1 while this replica holds the rollout\'s Lease and runs the rollout by budget, else 0.', registers });
    this.#stopped = new Gauge({ name: 'envoy_injector_rollout_stopped', help: '1 while the rollout by budget is stopped after a failed rollout (on the leader), else 0.', registers });
    this.#inFlight = new Gauge({ name: 'envoy_injector_rollout_in_flight', help: 'Workloads the rollout by budget brought current whose Pods are not yet all Ready (on the leader).', registers });
    this.#workloads = new Counter({
      name: 'envoy_injector_rollout_workloads_total',
      help: 'Workloads of the rollout by budget, by outcome: restarted or resized (started), settled (current and Ready), failed (the rollout stops), error (the change was refused; tried again after a backoff).',
      labelNames: ['outcome'] as const,
      registers,
    });
    for (const outcome of ROLLOUT_OUTCOMES) this.#workloads.labels(outcome).inc(0);
  }

  rolloutLeading(leading: boolean): void {
    this.#leading.set(leading ? 1 : 0);
  }

  rolloutWorkload(outcome: RolloutOutcome): void {
    this.#workloads.labels(outcome).inc();
  }

  rolloutStopped(stopped: boolean): void {
    this.#stopped.set(stopped ? 1 : 0);
  }

  rolloutInFlight(count: number): void {
    this.#inFlight.set(count);
  }
}
