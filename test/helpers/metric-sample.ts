/**
 * One sample of a Prometheus text exposition: the sum of the values of NAME's
 * series whose labels include every pair of LABELS (other labels, such as the
 * chart's envoy_injector_release, may be there too); undefined when none is.
 */
export function metricSample(text: string, name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  let total: number | undefined;
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null || match[1] !== name) continue;
    const pairs = new Map([...(match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((pair) => [pair[1], pair[2]]));
    if (!Object.entries(labels).every(([key, value]) => pairs.get(key) === value)) continue;
    total = (total ?? 0) + Number(match[3]);
  }
  return total;
}
