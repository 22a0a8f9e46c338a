import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { probeTarget } from '../src/commands/capture-probe-target.js';
import { CheckCaptureExit } from '../src/injection/index.js';
import { CNI_TEMPLATE_RULE_ARGS, ROOT } from './helpers/fixtures.js';

/**
 * CNI mode's check (`envoy-injector check-capture`, docs/design.md §11): the
 * destination it picks from a Pod's routes, and the check for real in a
 * network namespace this test makes, as the check container's user, before
 * and after init/capture-rules.sh (the script the node's plugin runs) put
 * the rules in.
 */

const run = promisify(execFile);
const NETNS = `envoy-check-${process.pid}`;

/** /proc/net/route as the kernel writes it (little-endian hex words). */
const ROUTES_HEADER = 'Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT';
const route = (iface: string, destination: string, mask: string): string => `${iface}\t${destination}\t00000000\t0001\t0\t0\t0\t${mask}\t0\t0\t0`;
// 198.51.100.0/24 on eth0; a default route; a host route; loopback.
const CONNECTED = route('eth0', '006433C6', '00FFFFFF');
const DEFAULT = route('eth0', '00000000', '00000000');

describe('check-capture: where it connects', () => {
  it('TEST-NET-1 when the Pod has a default route, else the last address of its connected subnet', () => {
    assert.deepEqual(probeTarget({ routes: [ROUTES_HEADER, CONNECTED, DEFAULT].join('\n'), ownAddresses: ['198.51.100.7'], excludedCidrs: [], excludedPorts: [] }), { address: '192.0.2.1', port: 9 });
    assert.deepEqual(probeTarget({ routes: [ROUTES_HEADER, CONNECTED].join('\n'), ownAddresses: ['198.51.100.7'], excludedCidrs: [], excludedPorts: [] }), { address: '198.51.100.254', port: 9 });
  });

  it('never an excluded CIDR, the Pod\'s own address, an excluded port, a host route or loopback', () => {
    const routes = [ROUTES_HEADER, route('lo', '0000007F', '000000FF'), route('eth0', '016433C6', 'FFFFFFFF'), CONNECTED, DEFAULT].join('\n');
    assert.deepEqual(probeTarget({ routes, ownAddresses: [], excludedCidrs: ['192.0.2.0/30', 'fd00::/8'], excludedPorts: [9, 10, 9901] }), { address: '198.51.100.254', port: 11 });
    assert.equal(probeTarget({ routes, ownAddresses: ['198.51.100.254'], excludedCidrs: ['192.0.2.1/32'], excludedPorts: [] }), undefined);
    assert.equal(probeTarget({ routes: [ROUTES_HEADER, route('lo', '0000007F', '000000FF')].join('\n'), ownAddresses: [], excludedCidrs: [], excludedPorts: [] }), undefined);
    assert.equal(probeTarget({ routes: [ROUTES_HEADER, CONNECTED].join('\n'), ownAddresses: [], excludedCidrs: ['0.0.0.0/0'], excludedPorts: [] }), undefined);
  });
});

async function missingTools(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (network namespaces and iptables need it)';
  for (const tool of ['ip', 'iptables', 'setpriv']) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      return `no ${tool} on PATH (apt-get install iptables iproute2 util-linux)`;
    }
  }
  try {
    await run('ip', ['netns', 'add', `${NETNS}-probe`]);
    await run('ip', ['netns', 'del', `${NETNS}-probe`]);
  } catch (error) {
    return `cannot make a network namespace (${String(error).split('\n')[0]})`;
  }
  return undefined;
}

const missing = await missingTools();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`check-capture test cannot run in CI: ${missing}`);
if (missing !== undefined) console.log(`skipped: check-capture in a network namespace (${missing})`);

const PEER = `${NETNS}-peer`;
async function removeNamespaces(): Promise<void> {
  for (const namespace of [NETNS, PEER]) await run('ip', ['netns', 'del', namespace]).catch(() => undefined);
}
process.once('exit', () => {
  for (const namespace of [NETNS, PEER]) spawnSync('ip', ['netns', 'del', namespace], { stdio: 'ignore' });
});

/** The check as its container runs it: its own user (65532), no capabilities, in the namespace. */
async function check(...extra: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const command = ['netns', 'exec', NETNS, 'setpriv', '--reuid=65532', '--regid=65532', '--clear-groups', '--inh-caps=-all', '--bounding-set=-all'];
  const cli = [process.execPath, '--import', 'tsx', join(ROOT, 'src', 'main.ts'), 'check-capture', ...CNI_TEMPLATE_RULE_ARGS, ...extra];
  return new Promise((resolve) => {
    execFile('ip', [...command, ...cli], { cwd: ROOT, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : -1;
      resolve({ code, stdout, stderr });
    });
  });
}

describe('check-capture in a network namespace', { skip: missing !== undefined, timeout: 120_000 }, () => {
  before(async () => {
    await removeNamespaces();
    await run('ip', ['netns', 'add', NETNS]);
    await run('ip', ['netns', 'add', PEER]);
    // A veth pair to an empty namespace: the subnet is routed, and nothing answers there.
    await run('ip', ['-n', NETNS, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', PEER]);
    await run('ip', ['-n', NETNS, 'addr', 'add', '198.51.100.7/24', 'dev', 'eth0']);
    for (const namespace of [NETNS, PEER]) for (const link of ['lo', 'eth0']) await run('ip', ['-n', namespace, 'link', 'set', link, 'up']);
  });
  after(removeNamespaces);

  it('exits 69 when the rules are not there, naming what it tried, within its bound', async () => {
    const result = await check('--timeout-seconds', '1');
    assert.equal(result.code, CheckCaptureExit.notRedirected, result.stderr);
    assert.match(result.stderr, /TCP to 198\.51\.100\.254:9 is not redirected to port 15001 \(no connection within 1 s\)/);
  });

  it('exits 0 once init/capture-rules.sh installed them, as the node plugin does', async () => {
    await run('ip', ['netns', 'exec', NETNS, 'sh', join(ROOT, 'init', 'capture-rules.sh'), ...CNI_TEMPLATE_RULE_ARGS]);
    const result = await check();
    assert.equal(result.code, CheckCaptureExit.redirected, result.stderr);
    assert.match(result.stdout, /198\.51\.100\.254:9 is redirected to port 15001/);
  });

  it('exits 2 on a bad or missing rule argument', async () => {
    const result = await check('--outbound-port=0');
    assert.equal(result.code, CheckCaptureExit.usage);
    assert.match(result.stderr, /--outbound-port: "0" is not a port/);
  });
});
