import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { PolicyApiVersion } from '../../src/policy/policy-api-version.js';
import { only, renderChart, type Manifest } from '../helpers/helm.js';
import { ParityRun, type ApiAccess } from './policy-parity.js';

/** A started ParityRun over the chart's own default template (the proxy a user gets), its ConfigMap, and a stop that also removes its file. */
export interface ChartParityRun {
  readonly run: ParityRun;
  readonly configMap: Manifest;
  stop(): Promise<void>;
}

export async function startChartParityRun(access: ApiAccess, apiVersion: PolicyApiVersion): Promise<ChartParityRun> {
  const configMap = only(await renderChart({}), 'ConfigMap', 'envoy-initializer');
  const dir = await mkdtemp(join(tmpdir(), 'ei-chart-parity-'));
  const file = join(dir, 'templates.json');
  await writeFile(file, JSON.stringify(configMap));
  const run = new ParityRun(access, apiVersion, file);
  const stop = async (): Promise<void> => {
    await run.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await run.start();
  } catch (error) {
    await stop();
    throw error;
  }
  return { run, configMap, stop };
}
