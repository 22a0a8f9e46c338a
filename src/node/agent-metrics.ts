import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';

/** The label naming the agent's node on every series. */
export const NODE_LABEL = 'envoy_injector_node';

/** How the agent answered one Pod's sandbox set-up (the runtime's CNI ADD). */
export type SetUpResult = 'captured' | 'skipped' | 'error';
export const SET_UP_RESULTS: readonly SetUpResult[] = ['captured', 'skipped', 'error'];

/** How the repair of one Pod whose check found no rules ended. */
export type RepairResult = 'deleted' | 'failed' | 'left';
export const REPAIR_RESULTS: readonly RepairResult[] = ['deleted', 'failed', 'left'];

/**
 * The CNI node agent's Prometheus metrics (docs/design.md §11, CNI mode),
 * named as the injector's (`envoy_injector_` then the component), in a
 * registry of their own; every series starts at 0.
 */
export class CniAgentMetrics {
  readonly registry = new Registry();

  readonly setUps = new Counter({
    name: 'envoy_injector_cni_agent_pod_setups_total',
    help: "Pod sandbox set-ups (the runtime's CNI ADD for a Pod) the agent answered, by result: captured (the rules installed), skipped (not a Pod in CNI mode), error (the ADD failed: the Pod could not be judged or its rules failed).",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly repairs = new Counter({
    name: 'envoy_injector_cni_agent_repairs_total',
    help: "Pods of the node whose envoy-capture-check exited 69 (no rules), by result: deleted (their controller makes new ones), failed (the delete failed) or left (no controller would make them again: kept, with a Warning Event, counted once each).",
    labelNames: ['result'] as const,
    registers: [this.registry],
  });

  readonly installed = new Gauge({
    name: 'envoy_injector_cni_agent_plugin_installed',
    help: "1 when the plugin is in the CNI binary folder and last in the primary configuration's chain (the agent is ready), else 0.",
    registers: [this.registry],
  });

  /**
   * LABELS go on every series: the agent's node (`envoy_injector_node`) and,
   * from the chart, the release (`envoy_injector_release`, as the injector's),
   * so that the chart's alerts select this release's agents whatever the
   * scrape's own labels, and name the node.
   */
  constructor(options: { processMetrics?: boolean; labels?: Readonly<Record<string, string>> } = {}) {
    if (options.labels !== undefined) this.registry.setDefaultLabels({ ...options.labels });
    for (const result of SET_UP_RESULTS) this.setUps.labels(result).inc(0);
    for (const result of REPAIR_RESULTS) this.repairs.labels(result).inc(0);
    this.installed.set(0);
    if (options.processMetrics ?? true) collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 100 });
  }

  setUp(result: SetUpResult): void {
    this.setUps.labels(result).inc();
  }

  repaired(result: RepairResult): void {
    this.repairs.labels(result).inc();
  }

  /** The Prometheus text exposition, with its content type. */
  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
