import type { Metric, Registry } from 'prom-client';

/** One label set's counts: per bucket (not cumulative), their sum and count. */
export interface HistogramSeries {
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

interface ExportedValue {
  readonly labels: Record<string, string | number>;
  readonly sharedLabels: Record<string, string>;
  readonly value: number;
  readonly metricName: string;
}

/**
 * A Prometheus histogram with one label, exposed as prom-client's own
 * Histogram exposes it (the same lines, in the same order, with the
 * registry's default labels), but observed as plain numbers: a review adds
 * to the series it resolved once (`series`), where prom-client's `observe`
 * builds, validates and hashes the label set and looks the bucket up by its
 * bound's string on every call.
 */
export class DurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  /** As prom-client's metrics name theirs (the metrics reference reads them). */
  readonly labelNames: readonly string[];
  readonly #series = new Map<string, HistogramSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelName: string,
    readonly buckets: readonly number[],
    registry: Registry,
  ) {
    this.labelNames = [labelName];
    registry.registerMetric(this as unknown as Metric);
  }

  /** The series of LABELVALUE, made (empty) on first use, as prom-client makes a series on its first observation. */
  series(labelValue: string): HistogramSeries {
    let series = this.#series.get(labelValue);
    if (series === undefined) {
      series = { counts: new Float64Array(this.buckets.length), sum: 0, count: 0 };
      this.#series.set(labelValue, series);
    }
    return series;
  }

  /** One observation of SECONDS in SERIES. */
  observe(series: HistogramSeries, seconds: number): void {
    const { buckets } = this;
    for (let index = 0; index < buckets.length; index++) {
      if (seconds <= (buckets[index] as number)) {
        (series.counts[index] as number) += 1;
        break;
      }
    }
    series.sum += seconds;
    series.count += 1;
  }

  reset(): void {
    this.#series.clear();
  }

  /** What the registry's text exposition reads: per series, the cumulative buckets, `+Inf`, the sum and the count. */
  getForPromString(): Promise<{ name: string; help: string; type: string; aggregator: string; values: ExportedValue[] }> {
    const values: ExportedValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const [labelValue, series] of this.#series) {
      const sharedLabels = { [this.labelName]: labelValue };
      let cumulative = 0;
      this.buckets.forEach((bound, index) => {
        cumulative += series.counts[index] as number;
        values.push({ labels: { le: bound }, sharedLabels, value: cumulative, metricName: bucketName });
      });
      values.push({ labels: { le: '+Inf' }, sharedLabels, value: series.count, metricName: bucketName });
      values.push({ labels: {}, sharedLabels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels: {}, sharedLabels, value: series.count, metricName: `${this.name}_count` });
    }
    return Promise.resolve({ name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values });
  }

  /** The JSON form (`registry.getMetricsAsJSON()`): each value's labels with its series' label. */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: { labels: Record<string, string | number>; value: number; metricName: string }[] }> {
    const data = await this.getForPromString();
    return { ...data, values: data.values.map(({ labels, sharedLabels, value, metricName }) => ({ labels: { ...labels, ...sharedLabels }, value, metricName })) };
  }
}
