import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it, type TestContext } from 'node:test';
import { CoreV1Api, KubeConfig, setHeaderOptions } from '@kubernetes/client-node';
import { NamespaceLabels } from '../../src/kube/watches/namespace-labels.js';
import { DEFAULT_WATCH_LIVENESS } from '../../src/kube/api/stream-liveness.js';
import { imageEntrypoint, imageMallocEnvironment } from '../helpers/dockerfile.js';
import { ROOT } from '../helpers/fixtures.js';
import { captureLog } from '../helpers/server.js';
import { startTcpBalancer, type TcpBalancer } from '../helpers/tcp-balancer.js';
import { eventually, helmInstall, uniqueName } from './cluster.js';
import { selectedVersions, startControlPlane, type OwnedControlPlane } from './control-plane.js';
import { startChartInjector, waitReady, type ChartInjector } from './injector-process.js';

/**
 * Watches of a quiet cluster (issue 42). The API server sends a bookmark
 * only once what a stream watches has moved past the stream's
 * resourceVersion, and on a quiet resource that waits for a progress
 * notification from etcd, whose interval this control plane leaves at its
 * default (control-plane.ts passes no --experimental-watch-progress-notify-interval).
 * Seen on 1.36: the first bookmark 60 to 120 s after a stream opened, then
 * about every minute; a watchdog of 90 s gave up every such stream before its
 * first bookmark. A cluster of its own, with no controllers, so that nothing
 * changes in it; test/e2e/run.ts runs this file beside the files that share a
 * cluster, as it mostly waits. Quiet streams must stay open with no warning;
 * a stream whose path forwards nothing must be given up within a bound.
 */
/** Several minutes: three times the allowed silence. */
const QUIET_SECONDS = (3 * DEFAULT_WATCH_LIVENESS.quietMs) / 1000;

for (const version of selectedVersions()) {
  describe(`watches of a quiet cluster, etcd with its defaults (Kubernetes ${version})`, () => {
    let plane: OwnedControlPlane | undefined;
    let injector: ChartInjector | undefined;
    let balancer: TcpBalancer | undefined;
    /** How the injector was started: the image's malloc settings and node flags. */
    let imageFlags: string[] = [];
    const cluster = (): OwnedControlPlane => {
      if (plane === undefined) throw new Error(`the Kubernetes ${version} control plane did not start (see the before hook's error)`);
      return plane;
    };

    before(async () => {
      plane = await startControlPlane(version, { controllers: false });
      const core = plane.kubeConfig.makeApiClient(CoreV1Api);
      // A few workload namespaces, as the measure of memory at rest has them.
      for (let index = 0; index < 5; index++) await core.createNamespace({ body: { metadata: { name: `app-${index}`, labels: { 'envoy-injector.io/inject': 'enabled' } } } });
      const release = await helmInstall(plane, { name: uniqueName('quiet'), namespace: uniqueName('quiet-system') });
      // As the image starts it (its node flags), with the Deployment's environment, at debug to see the checks.
      // The flags on the command line as the ENTRYPOINT has them (NODE_OPTIONS refuses --heap-growing-percent), the image's malloc settings in the environment.
      const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
      imageFlags = [...imageMallocEnvironment(dockerfile), ...imageEntrypoint(dockerfile).nodeFlags];
      const mallocEnv = Object.fromEntries(imageMallocEnvironment(dockerfile).map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));
      injector = await startChartInjector(plane, release, { env: { LOG_LEVEL: 'debug', ...mallocEnv }, nodeFlags: imageEntrypoint(dockerfile).nodeFlags, listen: { host: '127.0.0.1', port: 0 } });
      await waitReady(injector);
    });
    after(async () => {
      await injector?.stop().catch(() => undefined);
      await balancer?.close();
      await plane?.stop();
    });

    it(`${QUIET_SECONDS} s of quiet: every stream silent past the allowed ${DEFAULT_WATCH_LIVENESS.quietMs / 1000} s is checked and kept, with no warning`, async (t: TestContext) => {
      assert.ok(injector !== undefined);
      const running = injector;
      const started = Date.now();
      const warnings = (): unknown[] => running.logs.filter((line) => Number(line['level']) >= 40).map((line) => line['msg']);
      /** Per watch, how long each stream had been silent when it was checked and kept. */
      const checks = (): Map<string, number[]> => {
        const byWatch = new Map<string, number[]>();
        for (const line of running.logs) {
          if (typeof line['quietMs'] !== 'number' || typeof line['watch'] !== 'string') continue;
          byWatch.set(line['watch'], [...(byWatch.get(line['watch']) ?? []), line['quietMs']]);
        }
        return byWatch;
      };
      // Five watches (Namespaces, the ConfigMap, the certificate Secret, the webhook configuration, Nodes; no Nodes where
      // native sidecars are off): each checked at least once, and the whole quiet lived through, unless a warning comes first.
      const outcome = await eventually(
        `${QUIET_SECONDS} s of quiet with each watch checked and kept, or a warning`,
        async () => (warnings().length > 0 ? 'warned' : Date.now() - started >= QUIET_SECONDS * 1000 && checks().size >= 4 && checks().has('Namespaces') ? 'quiet' : undefined),
        5 * QUIET_SECONDS * 1000,
        1_000,
      );
      t.diagnostic(`after ${((Date.now() - started) / 1000).toFixed(0)} s: ${[...checks()].map(([watch, quiet]) => `${watch} quiet ${quiet.map((ms) => (ms / 1000).toFixed(0)).join(', ')} s`).join('; ')}`);
      assert.equal(outcome, 'quiet', `a quiet watch was given up: ${JSON.stringify(warnings())}`);
      // Nothing arrived for longer than the allowed silence (less a timer's few ms) before each check.
      for (const [watch, quiet] of checks()) assert.ok(quiet.every((ms) => ms >= DEFAULT_WATCH_LIVENESS.quietMs - 10), `${watch}: ${quiet.join(', ')} ms`);
      const pid = running.child.pid;
      if (pid !== undefined) {
        const status = await readFile(`/proc/${pid}/status`, 'utf8');
        const mib = (field: string): string => (Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) / 1024).toFixed(1);
        t.diagnostic(`the injector at rest (Node ${process.versions.node}, ${imageFlags.join(' ')}, the Deployment's environment, 5 namespaces): RSS ${mib('VmRSS')} MiB, peak ${mib('VmHWM')} MiB`);
      }
    });

    it('a stream whose path goes dark (a proxy that keeps the connection, forwards nothing) is given up within quietMs + checkTimeoutMs, and the watch catches up once the path is back', async (t: TestContext) => {
      const admin = cluster();
      balancer = await startTcpBalancer(() => [Number(new URL(admin.server).port)]);
      const proxied = new KubeConfig();
      proxied.loadFromOptions({
        clusters: [{ name: 'proxied', server: `https://127.0.0.1:${balancer.port}`, caData: Buffer.from(admin.ca).toString('base64') }],
        users: [{ name: 'admin', token: admin.adminToken }],
        contexts: [{ name: 'proxied', cluster: 'proxied', user: 'admin' }],
        currentContext: 'proxied',
      });
      const liveness = { quietMs: 2_000, checkTimeoutMs: 2_000 };
      const log = captureLog('debug');
      const labels = new NamespaceLabels({ kubeConfig: proxied, backoff: { initialMs: 100, maxMs: 1_000 }, watchLiveness: liveness, lookupTimeoutMs: 1_000, log: log.logger });
      labels.start();
      try {
        await eventually('the Namespace watch synced through the proxy', async () => (labels.problem() === undefined ? true : undefined), 30_000);
        balancer.blackhole(true);
        const dark = Date.now();
        await admin.kubeConfig.makeApiClient(CoreV1Api).patchNamespace(
          { name: 'app-0', body: { metadata: { labels: { 'envoy-injector.io/inject': 'disabled' } } } },
          setHeaderOptions('Content-Type', 'application/merge-patch+json'),
        );
        // The bound holds on a machine five times slower than the silence and the check it waits for.
        const given = await eventually('the dark stream given up', async () => log.lines.find((line) => Number(line['level']) === 40 && String(line['msg']).startsWith('watch of Namespaces failed')), 5 * (liveness.quietMs + liveness.checkTimeoutMs), 100);
        t.diagnostic(`given up ${Date.now() - dark} ms after the path went dark: ${String(given['msg'])}`);
        assert.match(String(given['msg']), /no event or bookmark for \d+ ms, and a check of the API server failed \(GET \/version: no answer within 2000 ms\)/);
        balancer.blackhole(false);
        await eventually('the change made in the dark seen', async () => ((await labels.metadataOf('app-0')).labels['envoy-injector.io/inject'] === 'disabled' ? true : undefined), 30_000, 100);
      } finally {
        labels.stop();
      }
    });
  });
}
