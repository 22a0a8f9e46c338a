import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { CniAgentMetrics } from '../src/node/agent-metrics.js';
import { metricSample } from './helpers/metric-sample.js';
import { promtoolOrSkip } from './helpers/promtool.js';

/**
 * The CNI agent's metrics (docs/design.md §11, CNI mode): every series there
 * at 0 from the start, each counter moving by its label, and an exposition
 * promtool's linter accepts. test/cni-agent.test.ts counts set-ups on the
 * shim's real path, test/e2e/cni-agent.test.ts scrapes a running agent.
 */
describe('the CNI agent\'s metrics', () => {
  it('every series starts at 0: set-ups by result, repairs by result, the plugin not installed', async () => {
    const text = (await new CniAgentMetrics({ processMetrics: false }).render()).body;
    for (const result of ['captured', 'skipped', 'error']) assert.equal(metricSample(text, 'envoy_injector_cni_agent_pod_setups_total', { result }), 0, result);
    for (const result of ['deleted', 'failed', 'left']) assert.equal(metricSample(text, 'envoy_injector_cni_agent_repairs_total', { result }), 0, result);
    assert.equal(metricSample(text, 'envoy_injector_cni_agent_plugin_installed'), 0);
  });

  it('each count moves its own series only', async () => {
    const metrics = new CniAgentMetrics({ processMetrics: false });
    metrics.setUp('captured');
    metrics.setUp('captured');
    metrics.setUp('error');
    metrics.repaired('failed');
    metrics.repaired('left');
    metrics.repaired('left');
    metrics.installed.set(1);
    const text = (await metrics.render()).body;
    assert.deepEqual(['captured', 'skipped', 'error'].map((result) => metricSample(text, 'envoy_injector_cni_agent_pod_setups_total', { result })), [2, 0, 1]);
    assert.deepEqual(['deleted', 'failed', 'left'].map((result) => metricSample(text, 'envoy_injector_cni_agent_repairs_total', { result })), [0, 1, 2]);
    assert.equal(metricSample(text, 'envoy_injector_cni_agent_plugin_installed'), 1);
  });

  it('the labels given go on every series: the node and the release, which the chart\'s alerts select', async () => {
    const text = (await new CniAgentMetrics({ processMetrics: false, labels: { envoy_injector_node: 'node-a', envoy_injector_release: 'ns/rel' } }).render()).body;
    const samples = text.split('\n').filter((line) => line.startsWith('envoy_injector_'));
    assert.equal(samples.length, 7, text);
    for (const line of samples) assert.match(line, /\{.*envoy_injector_node="node-a".*\}/, line);
    for (const line of samples) assert.match(line, /envoy_injector_release="ns\/rel"/, line);
  });

  it('promtool check metrics accepts the agent\'s own series', async (t) => {
    const bin = promtoolOrSkip(t);
    if (bin === undefined) return;
    // Not prom-client's process metrics: its nodejs_active_*_total gauges fail the linter, in the injector's exposition too.
    const text = (await new CniAgentMetrics({ processMetrics: false }).render()).body;
    const result = spawnSync(bin, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 60_000 });
    assert.equal(result.status, 0, result.stdout + result.stderr);
    // The linter can fail: a counter without _total.
    const bad = spawnSync(bin, ['check', 'metrics'], { input: '# HELP x_count A.\n# TYPE x_count counter\nx_count 1\n', encoding: 'utf8', timeout: 60_000 });
    assert.notEqual(bad.status, 0);
  });
});
