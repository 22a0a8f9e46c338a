import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { ROOT } from './helpers/fixtures.js';
import { addPod, injectedAnnotations, INJECTOR_NAMESPACE, LIVE, LIVE_DATA, OLD, runStatusCli, seedFleet } from './helpers/fleet-fixture.js';

interface StatusJson {
  source: string;
  templates: { name: string; hash: string }[];
  workloads: { namespace: string; apiVersion: string; kind: string; name: string; templates: string[]; current: number; outdated: number; notInjected: number; outdatedHashes: { template: string; hash: string; pods: number }[]; restartable: boolean }[];
  totals: { pods: number; current: number; outdated: number; notInjected: number };
  restart?: { dryRun: boolean; targets: { kind: string; name: string }[]; confirmed: boolean; restartedAt?: string; restarted: { kind: string; name: string }[]; failed: { kind: string; name: string; error: string }[]; notRestartable: { kind: string; name: string }[] };
}

const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

describe('envoy-injector status against an API server', () => {
  let fake: FakeApiServer;
  let kubeconfig: string;
  beforeEach(async () => {
    fake = await FakeApiServer.start();
    kubeconfig = fake.writeKubeconfig();
    seedFleet(fake);
  });
  afterEach(async () => {
    await fake.close();
  });
  const status = (args: string[], options: { stdin?: string; tty?: boolean } = {}) => runStatusCli(['--kubeconfig', kubeconfig, ...args], options);
  const patches = () => fake.requests.filter((request) => request.method === 'PATCH');
  const restartedAt = (resource: string, name: string) =>
    ((fake.get(resource, 'shop', name)?.['spec'] as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata.annotations ?? {})[RESTARTED_AT];

  it('groups Pods by workload and exits 3 when some are outdated', async () => {
    const { code, stdout, stderr } = await status([]);
    assert.equal(code, 3, stderr);
    assert.match(stdout, /^shop +Deployment\/web +config +1 +2 +1 +config@sha256:\w{16} \(2\)$/m);
    assert.match(stdout, /^shop +StatefulSet\/db +config +0 +2 +0 /m);
    assert.match(stdout, /^shop +CronJob\/report +config +0 +1 +0 /m);
    assert.match(stdout, /^legacy +Pod\/tool +lite +1 +0 +0 +-$/m);
    assert.match(stdout, /--restart would restart: Deployment shop\/web, StatefulSet shop\/db\./);
    assert.match(stdout, /Recreate by hand \(no Pod template to roll\): CronJob shop\/report, Pod shop\/debug\./);
    assert.doesNotMatch(stdout, /opted-out|node-probe|quiet|report-29000|going/, 'opted out, hostNetwork, disabled, finished and terminating Pods are not reported');
  });

  it('--output json: the same report for machines', async () => {
    const { code, stdout } = await status(['-o', 'json']);
    assert.equal(code, 3);
    const report = JSON.parse(stdout) as StatusJson;
    assert.equal(report.source, `ConfigMap ${INJECTOR_NAMESPACE}/envoy-initializer`);
    assert.deepEqual(report.templates, [...LIVE.templates.values()].map(({ name, hash }) => ({ name, hash })));
    assert.deepEqual(report.totals, { pods: 12, current: 4, outdated: 6, resizable: 0, notInjected: 2, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
    const web = report.workloads.find((workload) => workload.name === 'web');
    assert.deepEqual(web, { namespace: 'shop', apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', templates: ['config'], current: 1, outdated: 2, resizable: 0, notInjected: 1, unknown: 0, copied: 0, copiedMarks: [], tcpProbes: 0, proxyProtocol: 0, tproxy: 0, outdatedHashes: [{ template: 'config', hash: OLD.defaultTemplate.hash, pods: 2 }], restartable: true });
    assert.equal(report.restart, undefined);
  });

  it('exits 0 when every injected Pod in scope is current (-n, -l)', async () => {
    const inLegacy = await status(['-n', 'legacy']);
    assert.equal(inLegacy.code, 0, inLegacy.stderr);
    assert.match(inLegacy.stdout, /1 Pod in 1 workload \(namespace legacy\): 1 current, 0 outdated, 0 not injected\./);
    const agents = await status(['-l', 'app=agent', '-o', 'json']);
    assert.equal(agents.code, 0);
    assert.deepEqual((JSON.parse(agents.stdout) as StatusJson).workloads.map((w) => `${w.kind}/${w.name}`), ['DaemonSet/agent']);
    const none = await status(['-n', 'quiet']);
    assert.equal(none.code, 0);
    assert.match(none.stdout, /No injected Pods, and none missing the sidecar, in namespace quiet\./);
  });

  it("--never-inject-selector and --always-inject-selector, as serve's: the Pod's labels decide with them", async () => {
    // shop is enabled: a Pod the never-selector matches is none of our business; legacy is not: one the always-selector matches should have the sidecar.
    addPod(fake, 'shop', 'etcd-0', { labels: { app: 'etcd' } });
    addPod(fake, 'legacy', 'member', { labels: { 'mesh.example.com/member': '' } });
    const without = JSON.parse((await status(['-o', 'json'])).stdout) as StatusJson;
    assert.deepEqual(without.workloads.filter((w) => w.name === 'etcd-0' || w.name === 'member').map((w) => `${w.namespace}/${w.name} ${w.notInjected}`), ['shop/etcd-0 1']);
    const { code, stdout, stderr } = await status([
      '-o', 'json',
      '--never-inject-selector', '[{"matchLabels":{"app":"etcd"}}]',
      '--always-inject-selector', '[{"matchExpressions":[{"key":"mesh.example.com/member","operator":"Exists"}]}]',
    ]);
    assert.equal(code, 3, stderr);
    const report = JSON.parse(stdout) as StatusJson;
    assert.deepEqual(report.workloads.filter((w) => w.name === 'etcd-0' || w.name === 'member').map((w) => `${w.namespace}/${w.name} ${w.notInjected}`), ['legacy/member 1']);
    assert.deepEqual(report.totals, without.totals, 'one Pod out, one in');
    const bad = await status(['--never-inject-selector', '[{"matchLabels":{"app":1}}]']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--never-inject-selector: /);
    const help = await runStatusCli(['--help']);
    assert.match(help.stdout, /--never-inject-selector JSON/);
    assert.match(help.stdout, /--always-inject-selector JSON/);
  });

  it('a Deployment whose Pod template carries copied marks: its Pods are their own state, with the fix, exit 3; --restart leaves it to a human while the marks are there', async () => {
    const marks = { annotations: injectedAnnotations(LIVE), labels: { app: 'copy', 'envoy-injector.io/injected': 'true' } };
    fake.apply('deployments', { metadata: { name: 'copy', namespace: 'legacy' }, spec: { template: { metadata: marks, spec: { containers: [{ name: 'app', image: 'app:1' }] } } } });
    fake.apply('replicasets', { metadata: { name: 'copy-1', namespace: 'legacy', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'copy', uid: 'u-copy', controller: true }] } });
    // In legacy (not enabled), as copied from a Pod that was opted in: the annotation came along.
    const annotations = { ...marks.annotations, 'envoy-injector.io/inject': 'true' };
    for (const name of ['copy-1-a', 'copy-1-b']) addPod(fake, 'legacy', name, { owner: { kind: 'ReplicaSet', name: 'copy-1' }, annotations, labels: marks.labels, copied: true });
    const { code, stdout, stderr } = await status(['-n', 'legacy']);
    assert.equal(code, 3, stderr);
    assert.match(stdout, /NOT-INJECTED  COPIED  OUTDATED-HASHES/);
    assert.match(stdout, /^legacy +Deployment\/copy +- +0 +0 +0 +2 +-$/m);
    assert.match(stdout, /3 Pods in 2 workloads \(namespace legacy\): 1 current, 0 outdated, 0 not injected, 2 with copied marks \(no sidecar\)\./);
    assert.match(stdout, /^Copied marks, no sidecar: Deployment legacy\/copy \(label envoy-injector\.io\/injected, annotation envoy-injector\.io\/status\)\. Remove them from the Pod template \(kubectl edit\): its Pods are then replaced, injected\.$/m);
    assert.match(stdout, /^Recreate by hand \(its Pod template carries a copied envoy-injector\.io\/status: remove it\): Deployment legacy\/copy\.$/m);
    const json = JSON.parse((await status(['-n', 'legacy', '-o', 'json'])).stdout) as { workloads: { name: string; copied: number; copiedMarks: string[] }[]; totals: { copied: number } };
    assert.deepEqual(json.workloads.filter((w) => w.name === 'copy').map((w) => [w.copied, w.copiedMarks]), [[2, ['injectedLabel', 'statusAnnotation']]]);
    assert.equal(json.totals.copied, 2);
    const dryRun = await status(['-n', 'legacy', '--restart', '--dry-run']);
    assert.match(dryRun.stdout, /Nothing to restart/);
    assert.match(dryRun.stdout, /Not restarted \(its Pod template carries a copied envoy-injector\.io\/status: remove it; recreate them by hand\): Deployment legacy\/copy\./);
    // The template cleaned: its old Pods are left, and --restart rolls it.
    fake.apply('deployments', { metadata: { name: 'copy', namespace: 'legacy' }, spec: { template: { metadata: { labels: { app: 'copy' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } } });
    const cleaned = await status(['-n', 'legacy', '--restart', '--dry-run']);
    assert.match(cleaned.stdout, /--restart would set kubectl\.kubernetes\.io\/restartedAt on the Pod template of:\n  Deployment legacy\/copy\n/);
  });

  it('reads a handful of lists, owners once per scope and never Pod by Pod', async () => {
    await status([]);
    const calls = fake.requests.map((request) => `${request.method} ${request.path}`);
    assert.deepEqual(calls.sort(), [
      'GET /api/v1/namespaces',
      `GET /api/v1/namespaces/${INJECTOR_NAMESPACE}/configmaps/envoy-initializer`,
      'GET /api/v1/pods',
      // The outdated Deployment and StatefulSet, read whole for their strategy and rollout: one list per kind.
      'GET /apis/apps/v1/deployments',
      'GET /apis/apps/v1/replicasets',
      'GET /apis/apps/v1/statefulsets',
      'GET /apis/batch/v1/jobs',
    ]);
    for (const path of ['/apis/apps/v1/replicasets', '/apis/batch/v1/jobs', '/api/v1/namespaces']) {
      assert.match(fake.requests.find((request) => request.path === path)?.accept ?? '', /as=PartialObjectMetadataList/, `${path} is read as metadata only`);
    }
    fake.requests.length = 0;
    await status(['-n', 'shop']);
    assert.deepEqual(fake.requests.map((request) => `${request.method} ${request.path}`).sort(), [
      'GET /api/v1/namespaces/envoy-injector-system/configmaps/envoy-initializer',
      'GET /api/v1/namespaces/shop',
      'GET /api/v1/namespaces/shop/pods',
      'GET /apis/apps/v1/namespaces/shop/deployments',
      'GET /apis/apps/v1/namespaces/shop/replicasets',
      'GET /apis/apps/v1/namespaces/shop/statefulsets',
      'GET /apis/batch/v1/namespaces/shop/jobs',
    ]);
  });

  it('a Deployment list whose continue token expired goes on from the token the 410 offers: the restart plan is whole, with a note', async () => {
    fake.expireContinueTokens(1, '/apis/apps/v1/deployments');
    const { code, stdout, stderr } = await status(['--page-size', '1', '--restart', '--dry-run']);
    assert.equal(code, 3, stderr);
    assert.match(stdout, /--restart would set kubectl\.kubernetes\.io\/restartedAt on the Pod template of:\n  Deployment shop\/web\n  StatefulSet shop\/db\n/);
    assert.deepEqual(fake.requests.filter((request) => request.path === '/apis/apps/v1/deployments').map((request) => request.status), [200, 410, 200]);
    assert.match(stderr, /^envoy-injector: note: listing Deployments in all namespaces outlasted the API server's history \(410 Gone\); the rest was listed as it is now/m);
    assert.deepEqual(patches(), []);
  });

  it('--restart --dry-run shows what it would restart and changes nothing', async () => {
    const before = ['web', 'api'].map((name) => fake.get('deployments', 'shop', name)?.metadata.resourceVersion);
    const { code, stdout } = await status(['--restart', '--dry-run']);
    assert.equal(code, 3);
    assert.match(stdout, /Dry run, nothing changed\. --restart would set kubectl\.kubernetes\.io\/restartedAt on the Pod template of:\n  Deployment shop\/web\n  StatefulSet shop\/db\n/);
    assert.match(stdout, /Not restarted \(no Pod template to roll; recreate them by hand\): CronJob shop\/report, Pod shop\/debug\./);
    assert.deepEqual(patches(), []);
    assert.deepEqual(['web', 'api'].map((name) => fake.get('deployments', 'shop', name)?.metadata.resourceVersion), before);
    const json = JSON.parse((await status(['--restart', '--dry-run', '-o', 'json'])).stdout) as StatusJson;
    assert.deepEqual(json.restart?.targets.map((ref) => `${ref.kind}/${ref.name}`), ['Deployment/web', 'StatefulSet/db']);
    assert.deepEqual(json.restart?.restarted, []);
    assert.equal(json.restart?.dryRun, true);
    assert.deepEqual(patches(), []);
  });

  it('--restart --yes patches restartedAt on the outdated Deployment, StatefulSet and DaemonSet only', async () => {
    // A second DaemonSet, outdated: the fixture's one is current.
    fake.apply('daemonsets', { metadata: { name: 'logs', namespace: 'shop' }, spec: { template: { metadata: {}, spec: { containers: [] } } } });
    addPod(fake, 'shop', 'logs-z9', { owner: { kind: 'DaemonSet', name: 'logs' }, annotations: injectedAnnotations(OLD) });
    const started = Date.now();
    const { code, stdout, stderr } = await status(['--restart', '--yes', '-o', 'json']);
    assert.equal(code, 3, stderr);
    const { restart } = JSON.parse(stdout) as StatusJson;
    assert.deepEqual(restart?.restarted.map((ref) => `${ref.kind}/${ref.name}`), ['DaemonSet/logs', 'Deployment/web', 'StatefulSet/db']);
    assert.deepEqual(restart?.notRestartable.map((ref) => `${ref.kind}/${ref.name}`), ['CronJob/report', 'Pod/debug']);
    assert.deepEqual(patches().map((request) => request.path), [
      '/apis/apps/v1/namespaces/shop/daemonsets/logs',
      '/apis/apps/v1/namespaces/shop/deployments/web',
      '/apis/apps/v1/namespaces/shop/statefulsets/db',
    ]);
    for (const [resource, name] of [['daemonsets', 'logs'], ['deployments', 'web'], ['statefulsets', 'db']] as const) {
      const stamp = restartedAt(resource, name);
      assert.equal(stamp, restart?.restartedAt);
      assert.ok(Date.parse(stamp ?? '') >= Math.floor(started / 1000) * 1000, `${name}: ${stamp} is now`);
    }
    assert.equal(restartedAt('deployments', 'api'), undefined, 'a current Deployment is not touched');
    assert.equal(restartedAt('daemonsets', 'agent'), undefined, 'a current DaemonSet is not touched');
  });

  it('a Pod owned by example.com/v1 Deployment web is its own workload: apps/v1 web is not restarted for it', async () => {
    // apps/v1 Deployment api is current; a Deployment of another group with the same name owns an outdated Pod.
    addPod(fake, 'shop', 'api-foreign', { owner: { kind: 'Deployment', name: 'api', apiVersion: 'example.com/v1' }, annotations: injectedAnnotations(OLD) });
    const { code, stdout, stderr } = await status(['--restart', '--yes', '-o', 'json']);
    assert.equal(code, 3, stderr);
    const json = JSON.parse(stdout) as StatusJson & { workloads: { apiVersion: string }[] };
    assert.deepEqual(json.workloads.filter((w) => w.name === 'api').map((w) => `${w.apiVersion} ${w.kind} ${w.current}/${w.outdated}`), ['apps/v1 Deployment 1/0', 'example.com/v1 Deployment 0/1']);
    assert.deepEqual(json.restart?.restarted.map((ref) => `${ref.kind}/${ref.name}`), ['Deployment/web', 'StatefulSet/db']);
    assert.ok(json.restart?.notRestartable.some((ref) => `${(ref as { apiVersion?: string }).apiVersion} ${ref.kind}/${ref.name}` === 'example.com/v1 Deployment/api'));
    assert.equal(restartedAt('deployments', 'api'), undefined, 'the apps/v1 Deployment of the same name is not touched');
    const table = await status(['--restart', '--dry-run']);
    assert.match(table.stdout, /^shop +Deployment\.example\.com\/api +config +0 +1 /m);
    assert.match(table.stdout, /Deployment\.example\.com shop\/api/);
  });

  it('status -n NS without get on namespaces: a note on stderr, un-injected Pods counted unknown, exit 3 (not 1)', async () => {
    fake.failNext(1, 403, (path) => path === '/api/v1/namespaces/shop');
    const { code, stdout, stderr } = await status(['-n', 'shop', '-o', 'json']);
    assert.equal(code, 3, stderr);
    assert.match(stderr, /^envoy-injector: note: no permission to get namespace shop \(HTTP 403: injected failure\): its labels are unknown, so Pods there without the sidecar are counted as unknown\n$/);
    const json = JSON.parse(stdout) as StatusJson & { totals: { unknown: number } };
    // fresh and web's un-injected Pod: the label decides. opted-out and node-probe are skipped whatever it says.
    assert.deepEqual(json.totals, { pods: 11, current: 3, outdated: 6, resizable: 0, notInjected: 0, unknown: 2, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
    fake.failNext(1, 403, (path) => path === '/api/v1/namespaces/shop');
    const table = await status(['-n', 'shop']);
    assert.equal(table.code, 3);
    assert.match(table.stdout, /NOT-INJECTED  UNKNOWN  OUTDATED-HASHES/);
    assert.match(table.stdout, /, 0 not injected, 2 unknown \(namespace labels not readable\)\./);
  });

  it('status over all namespaces without list on namespaces: the same, for every namespace', async () => {
    fake.failNext(1, 403, (path) => path === '/api/v1/namespaces');
    const { code, stdout, stderr } = await status(['-o', 'json']);
    assert.equal(code, 3, stderr);
    assert.match(stderr, /no permission to list namespaces \(HTTP 403: injected failure\)/);
    // quiet/plain: the disabled label would skip it, but it cannot be read: unknown too.
    assert.equal((JSON.parse(stdout) as { totals: { unknown: number } }).totals.unknown, 3);
  });

  it('an OnDelete StatefulSet or DaemonSet is not patched: listed to recreate by hand, saying why', async () => {
    fake.apply('statefulsets', { metadata: { name: 'db', namespace: 'shop' }, spec: { updateStrategy: { type: 'OnDelete' }, template: { metadata: {}, spec: { containers: [] } } } });
    fake.apply('daemonsets', { metadata: { name: 'logs', namespace: 'shop' }, spec: { updateStrategy: { type: 'OnDelete' }, template: { metadata: {}, spec: { containers: [] } } } });
    addPod(fake, 'shop', 'logs-z9', { owner: { kind: 'DaemonSet', name: 'logs' }, annotations: injectedAnnotations(OLD) });
    const { code, stdout, stderr } = await status(['--restart', '--yes', '-o', 'json']);
    assert.equal(code, 3, stderr);
    const { restart } = JSON.parse(stdout) as StatusJson;
    assert.deepEqual(restart?.restarted.map((ref) => `${ref.kind}/${ref.name}`), ['Deployment/web']);
    assert.deepEqual(restart?.notRestartable.map((ref) => `${ref.kind}/${ref.name}: ${(ref as { why?: string }).why}`), [
      'CronJob/report: no Pod template to roll',
      'DaemonSet/logs: updateStrategy OnDelete: a restart changes no Pod',
      'Pod/debug: no Pod template to roll',
      'StatefulSet/db: updateStrategy OnDelete: a restart changes no Pod',
    ]);
    assert.deepEqual(patches().map((request) => request.path), ['/apis/apps/v1/namespaces/shop/deployments/web']);
    const table = await status(['--restart', '--yes']);
    assert.match(table.stdout, /^Not restarted \(updateStrategy OnDelete: a restart changes no Pod; recreate them by hand\): DaemonSet shop\/logs, StatefulSet shop\/db\.$/m);
  });

  it('a rollout in progress is skipped, and said so; --force restarts it anyway', async () => {
    // web: 1 of 3 Pods updated, as its controller reports.
    fake.apply('deployments', { metadata: { name: 'web', namespace: 'shop', generation: 2 }, spec: { replicas: 3, template: { metadata: {}, spec: { containers: [] } } }, status: { observedGeneration: 2, replicas: 4, updatedReplicas: 1 } });
    const { code, stdout, stderr } = await status(['--restart', '--yes', '-o', 'json']);
    assert.equal(code, 3, stderr);
    const { restart } = JSON.parse(stdout) as StatusJson & { restart: { skipped: { kind: string; name: string; why: string; detail: string }[] } };
    assert.deepEqual(restart.restarted.map((ref) => `${ref.kind}/${ref.name}`), ['StatefulSet/db']);
    assert.deepEqual(restart.skipped.map((ref) => `${ref.kind}/${ref.name}: ${ref.why} (${ref.detail})`), ['Deployment/web: rollout in progress (1 of 3 Pods updated)']);
    assert.equal(restartedAt('deployments', 'web'), undefined);
    const hint = await status([]);
    assert.match(hint.stdout, /^--restart would skip, rollout in progress \(--force restarts them anyway\): Deployment shop\/web \(1 of 3 Pods updated\)\.$/m);
    const text = await status(['--restart', '--yes']);
    assert.match(text.stdout, /^Skipped, rollout in progress \(--force restarts them anyway\): Deployment shop\/web \(1 of 3 Pods updated\)\.$/m);
    assert.equal(restartedAt('deployments', 'web'), undefined);
    const forced = await status(['--restart', '--yes', '--force']);
    assert.match(forced.stdout, /  restarted Deployment shop\/web\n/);
    assert.ok(restartedAt('deployments', 'web'));
  });

  it('--restart on a terminal asks first: yes restarts, anything else restarts nothing', async () => {
    const declined = await status(['--restart'], { tty: true, stdin: 'n\n' });
    assert.equal(declined.code, 3);
    assert.match(declined.stdout, /Restart 2 workloads \(as kubectl rollout restart\):\n  Deployment shop\/web\n  StatefulSet shop\/db\n/);
    assert.match(declined.stderr, /Restart them\? \[y\/N\] $/);
    assert.match(declined.stdout, /Not confirmed: nothing restarted\./);
    assert.deepEqual(patches(), []);

    const ended = await status(['--restart'], { tty: true });
    assert.match(ended.stdout, /Not confirmed: nothing restarted\./, 'end of input is a no');
    assert.deepEqual(patches(), []);

    const accepted = await status(['--restart'], { tty: true, stdin: 'yes\n' });
    assert.equal(accepted.code, 3);
    assert.match(accepted.stdout, /  restarted Deployment shop\/web\n  restarted StatefulSet shop\/db\n/);
    assert.equal(patches().length, 2);
    const printed = accepted.stdout.slice(accepted.stdout.indexOf('Set kubectl')).replace(/restartedAt=\S+ on:/, 'restartedAt=2026-12-01T03:24:10Z on:');
    assert.ok(readFileSync(join(ROOT, 'docs/fleet.md'), 'utf8').includes('```\n' + printed + '```\n'), `docs/fleet.md shows what --restart prints:\n${printed}`);
  });

  it('--restart without --yes and without a terminal refuses before touching the cluster', async () => {
    const { code, stderr } = await status(['--restart']);
    assert.equal(code, 2);
    assert.match(stderr, /--restart asks before restarting, but standard input is not a terminal: add --yes to restart without asking, or --dry-run to see what would be restarted/);
    assert.deepEqual(fake.requests, []);
  });

  it('a restart that fails is reported, the others still happen, and the exit code is 1', async () => {
    fake.failNext(1, 403, (path) => path.endsWith('/statefulsets/db'));
    const { code, stdout } = await status(['--restart', '--yes']);
    assert.equal(code, 1);
    assert.match(stdout, /  restarted Deployment shop\/web\n  FAILED    StatefulSet shop\/db: restarting StatefulSet shop\/db: HTTP 403: injected failure\n/);
    assert.ok(restartedAt('deployments', 'web'));
    assert.equal(restartedAt('statefulsets', 'db'), undefined);
  });

  it('errors: each names the thing and the fix, with exit 1 (cluster) or 2 (usage)', async () => {
    const noCluster = await runStatusCli([]);
    assert.equal(noCluster.code, 2);
    assert.match(noCluster.stderr, /status reads a cluster: pass --kubeconfig FILE or set KUBECONFIG/);
    for (const [args, message] of [
      [['--dry-run'], /--dry-run, --yes and --force go with --restart/],
      [['-o', 'yaml'], /--output: must be table or json/],
      [['--page-size', '0'], /--page-size: must be an integer from 1 to 10000/],
    ] as const) {
      const result = await status([...args]);
      assert.equal(result.code, 2, args.join(' '));
      assert.match(result.stderr, message);
    }
    const wrongNamespace = await status(['--injector-namespace', 'elsewhere']);
    assert.equal(wrongNamespace.code, 1);
    assert.match(wrongNamespace.stderr, /reading the templates, ConfigMap elsewhere\/envoy-initializer: HTTP 404: .*is the injector installed there\? see --injector-namespace and --configmap/);

    fake.failNext(1, 403, (path) => path === '/api/v1/pods');
    const forbidden = await status([]);
    assert.equal(forbidden.code, 1);
    assert.match(forbidden.stderr, /^envoy-injector: listing Pods in all namespaces: HTTP 403: injected failure\n$/);

    fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: INJECTOR_NAMESPACE }, data: { ...LIVE_DATA, config: 'containers: [{name: envoy}]' } });
    const invalid = await status([]);
    assert.equal(invalid.code, 1);
    assert.match(invalid.stderr, /ConfigMap envoy-injector-system\/envoy-initializer: config: containers\[0\]\.image: required/);
  });
});

describe('envoy-injector status: paging', () => {
  let fake: FakeApiServer;
  before(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', { metadata: { name: INJECTOR_NAMESPACE } });
    fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: INJECTOR_NAMESPACE }, data: LIVE_DATA });
    const live = injectedAnnotations(LIVE);
    const old = injectedAnnotations(OLD);
    // 1,200 Pods of 600 Deployments in 3 namespaces: one Pod current and one outdated each.
    for (let n = 0; n < 3; n++) {
      fake.apply('namespaces', { metadata: { name: `team-${n}`, labels: { 'envoy-injector.io/inject': 'enabled' } } });
      for (let d = 0; d < 200; d++) {
        const rs = `app-${d}-5f7c`;
        fake.apply('replicasets', { metadata: { name: rs, namespace: `team-${n}`, ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: `app-${d}`, uid: `u-${n}-${d}`, controller: true }] } });
        addPod(fake, `team-${n}`, `${rs}-a`, { owner: { kind: 'ReplicaSet', name: rs }, annotations: live });
        addPod(fake, `team-${n}`, `${rs}-b`, { owner: { kind: 'ReplicaSet', name: rs }, annotations: old });
      }
    }
  });
  after(async () => {
    await fake.close();
  });

  it('1,200 Pods with a page size of 500: three Pod pages joined by continue, every Pod counted once', async () => {
    const { code, stdout, stderr } = await runStatusCli(['--kubeconfig', fake.writeKubeconfig(), '--page-size', '500', '-o', 'json']);
    assert.equal(code, 3, stderr);
    const report = JSON.parse(stdout) as StatusJson;
    assert.deepEqual(report.totals, { pods: 1200, current: 600, outdated: 600, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 });
    assert.equal(report.workloads.length, 600);
    assert.ok(report.workloads.every((workload) => workload.kind === 'Deployment' && workload.current === 1 && workload.outdated === 1));
    const podPages = fake.requests.filter((request) => request.path === '/api/v1/pods');
    assert.deepEqual(podPages.map((request) => request.query['limit']), ['500', '500', '500']);
    assert.equal(podPages[0]?.query['continue'], undefined);
    assert.ok(podPages[1]?.query['continue'] && podPages[2]?.query['continue'] && podPages[1].query['continue'] !== podPages[2].query['continue']);
    // 600 ReplicaSets: two pages of the metadata-only list, not 1,200 GETs.
    assert.equal(fake.requests.filter((request) => request.path === '/apis/apps/v1/replicasets').length, 2);
    assert.equal(fake.requests.length, 1 + 3 + 2 + 1 + 1, 'the ConfigMap, 3 Pod pages, 2 ReplicaSet pages, 1 Namespace page, 1 Deployment page');
  });

  it('a continue token expired by a compaction: the list goes on from the token the 410 offers, with a note', async () => {
    fake.requests.length = 0;
    fake.expireContinueTokens(1);
    const { code, stdout, stderr } = await runStatusCli(['--kubeconfig', fake.writeKubeconfig(), '--page-size', '500', '-o', 'json']);
    assert.equal(code, 3, stderr);
    assert.deepEqual((JSON.parse(stdout) as StatusJson).totals, { pods: 1200, current: 600, outdated: 600, resizable: 0, notInjected: 0, unknown: 0, copied: 0, tcpProbes: 0, proxyProtocol: 0, tproxy: 0 }, 'no Pod lost or counted twice');
    assert.deepEqual(fake.requests.filter((request) => request.path === '/api/v1/pods').map((request) => request.status), [200, 410, 200, 200]);
    assert.match(stderr, /^envoy-injector: note: listing Pods in all namespaces outlasted the API server's history \(410 Gone\); the rest was listed as it is now/);
  });
});
