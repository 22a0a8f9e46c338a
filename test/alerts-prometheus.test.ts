import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { formatYaml } from '../src/injection/index.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { NAMESPACE as RELEASE_NAMESPACE, RELEASE } from './helpers/helm.js';
import { NAMESPACE, startHarness, until, type Harness } from './helpers/injector-harness.js';
import { renderMonitoring, ruleFile } from './helpers/monitoring.js';

/**
 * The chart's alerts in a real Prometheus (Debian's `prometheus`, beside
 * promtool) scraping a running injector on loopback: a counter an alert
 * reads must exist at 0 before its first event, or `increase()` never sees
 * that event (a series that appears at 1 has no earlier sample). Prometheus
 * scrapes and evaluates every second; every wait polls with a bound.
 */

const ALERT = 'EnvoyInjectorPodsSkippedByMisconfiguration';

function findPrometheus(): string | undefined {
  return (process.env['PATH'] ?? '').split(delimiter).map((dir) => join(dir, 'prometheus')).find((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

function prometheusOrSkip(t: TestContext): string | undefined {
  const found = findPrometheus();
  if (found !== undefined) return found;
  const missing = 'prometheus not found on PATH (apt-get install prometheus; .ci/run does)';
  if (process.env['CI'] === 'true') throw new Error(`${missing}: CI must run the alert tests`);
  process.stdout.write(`skipped: a real Prometheus scraping the injector: ${missing}\n`);
  t.skip(missing);
  return undefined;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function getJson(url: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => {
        try {
          resolve(response.statusCode === 200 ? JSON.parse(body) : undefined);
        } catch (error) {
          reject(error as Error);
        }
      });
    }).on('error', () => resolve(undefined));
  });
}

interface Alert {
  readonly labels: Record<string, string>;
  readonly state: string;
}

describe('the alerts in a real Prometheus scraping a running injector', () => {
  let fake: FakeApiServer | undefined;
  let harness: Harness | undefined;
  let prometheus: ChildProcess | undefined;
  let work: string | undefined;
  const output: string[] = [];
  before(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', { metadata: { name: NAMESPACE } });
    fake.apply('namespaces', { metadata: { name: 'shop', labels: { 'envoy-injector.io/inject': 'enabled' } } });
    // A typo in a namespace's template label: every Pod there is skipped (unknown_namespace_template).
    fake.apply('namespaces', { metadata: { name: 'typo', labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'confg' } } });
    fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: NAMESPACE }, data: { config: 'containers: [{name: envoy, image: "e:1"}]' } });
    // As the chart starts it (METRICS_RELEASE): the label its alerts select, whatever the scrape.
    harness = await startHarness(fake, ['--metrics-release', `${RELEASE_NAMESPACE}/${RELEASE}`]);
  });
  after(async () => {
    prometheus?.kill('SIGTERM');
    await harness?.injector.stop();
    await fake?.close();
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  });

  it("the first Pod skipped for a misconfiguration fires EnvoyInjectorPodsSkippedByMisconfiguration, with its reason", async (t) => {
    const bin = prometheusOrSkip(t);
    if (bin === undefined || harness === undefined) return;
    const injector = harness;
    work = await mkdtemp(join(tmpdir(), 'ei-prometheus-'));
    const chart = await renderMonitoring('webhook');
    await writeFile(join(work, 'rules.yaml'), formatYaml(ruleFile(chart)));
    const target = new URL(injector.url).host;
    // A scrape with target labels of its own (as one by the Pods' prometheus.io annotations): neither the job nor the
    // namespace a ServiceMonitor would give. The rules select the release by the injector's own label.
    const job = 'kubernetes-pods';
    const config = {
      global: { scrape_interval: '1s', evaluation_interval: '1s' },
      rule_files: ['rules.yaml'],
      scrape_configs: [{ job_name: job, scheme: 'https', tls_config: { insecure_skip_verify: true }, static_configs: [{ targets: [target], labels: { kubernetes_namespace: NAMESPACE } }] }],
    };
    await writeFile(join(work, 'prometheus.yaml'), formatYaml(config));
    const port = await freePort();
    const api = `http://127.0.0.1:${port}`;
    prometheus = spawn(bin, [`--config.file=${join(work, 'prometheus.yaml')}`, `--storage.tsdb.path=${join(work, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    prometheus.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const query = async (expr: string) => {
      const answer = (await getJson(`${api}/api/v1/query?query=${encodeURIComponent(expr)}`)) as { data?: { result?: { value: [number, string] }[] } } | undefined;
      return answer?.data?.result ?? [];
    };
    // Two scrapes of the injector before any event: whatever its counters held then is their earlier sample.
    await until('two scrapes of the injector', async () => {
      const [samples] = await query(`count_over_time(up{job="${job}"}[1m])`);
      return samples !== undefined && Number(samples.value[1]) >= 2 ? true : undefined;
    }, 60_000).catch((error: Error) => assert.fail(`${error.message}\n${output.join('').slice(-2000)}`));

    const skipped = await injector.review({ namespace: 'shop', annotations: { 'envoy-injector.io/template': 'nope' } });
    assert.equal(skipped.audit['envoy-injector.io/reason'] ?? skipped.audit['reason'], 'unknown_template', JSON.stringify(skipped.audit));
    const typo = await injector.review({ namespace: 'typo' });
    assert.equal(typo.audit['envoy-injector.io/reason'] ?? typo.audit['reason'], 'unknown_namespace_template', JSON.stringify(typo.audit));

    const firing = await until(`${ALERT} firing for unknown_template and unknown_namespace_template`, async () => {
      const answer = (await getJson(`${api}/api/v1/alerts`)) as { data?: { alerts?: Alert[] } } | undefined;
      const reasons = (answer?.data?.alerts ?? []).filter((alert) => alert.labels['alertname'] === ALERT && alert.state === 'firing').map((alert) => alert.labels['reason']);
      return reasons.length >= 2 ? reasons.sort() : undefined;
    }, 60_000).catch(async (error: Error) => {
      const series = await query('envoy_injector_admission_requests_total{result="skipped"}');
      assert.fail(`${error.message}; the scraped series: ${JSON.stringify(series)}`);
    });
    assert.deepEqual(firing, ['unknown_namespace_template', 'unknown_template']);
  });
});
