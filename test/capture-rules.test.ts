import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './helpers/fixtures.js';

/**
 * The capture rules for real: the very script the envoy-init image runs
 * (init/capture-rules.sh), with Debian's iptables, in two network namespaces
 * this test makes and removes, joined by a veth pair and holding only
 * documentation addresses (192.0.2.0/24, 2001:db8::/32) and no other route.
 * A stand-in proxy (test/helpers/capture-net.py, as Envoy's uid) reads each
 * connection's SO_ORIGINAL_DST and connects there itself, as Envoy's
 * pass-through cluster does; what each client is answered shows the path it took.
 */

const run = promisify(execFile);
const SCRIPT = join(ROOT, 'init', 'capture-rules.sh');
const HELPER = join(ROOT, 'test', 'helpers', 'capture-net.py');
const PROXY_UID = 101;
const APP_UID = 1000;
const POD = `envoy-capture-${process.pid}-pod`;
const PEER = `envoy-capture-${process.pid}-peer`;

const V4 = { pod: '192.0.2.1', peer: '192.0.2.2', excluded: '192.0.2.130', excludedCidr: '192.0.2.128/25' };
const V6 = { pod: '2001:db8::1', peer: '2001:db8::2', excluded: '2001:db8::8000:2', excludedCidr: '2001:db8::8000:0/113' };
const PORTS = { outbound: 15001, inbound: 15006, admin: 9901, health: 9902, app: 8080, appOther: 8081, excludedOut: 5432, excludedIn: 9100, appPeers: 8082, tproxy: 15016 };

const ARGS = [
  `--proxy-uid=${PROXY_UID}`,
  `--outbound-port=${PORTS.outbound}`,
  `--inbound-port=${PORTS.inbound}`,
  `--proxy-ports=${PORTS.admin},${PORTS.health}`,
  `--exclude-outbound-cidrs=${V4.excludedCidr},${V6.excludedCidr}`,
  `--exclude-outbound-ports=${PORTS.excludedOut}`,
  `--exclude-inbound-ports=${PORTS.excludedIn}`,
];

async function missingTools(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (network namespaces and iptables need it)';
  for (const tool of ['ip', 'iptables', 'ip6tables', 'python3']) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      return `no ${tool} on PATH (apt-get install iptables iproute2 python3)`;
    }
  }
  // Root in a container may still lack CAP_SYS_ADMIN, which network namespaces need.
  const probe = `envoy-capture-${process.pid}-probe`;
  try {
    await run('ip', ['netns', 'add', probe]);
    await run('ip', ['netns', 'del', probe]);
  } catch (error) {
    return `cannot make a network namespace (${String(error).split('\n')[0]})`;
  }
  return undefined;
}

const missing = await missingTools();
// CI installs every tool (.ci/run): there, a missing one is a failure, never a skip.
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`capture rules test cannot run in CI: ${missing}`);
if (missing !== undefined) console.log(`skipped: capture rules test (${missing})`);

const ip = (...args: string[]): Promise<unknown> => run('ip', args);
const inPod = (...command: string[]): Promise<{ stdout: string; stderr: string }> => run('ip', ['netns', 'exec', POD, ...command]);

const children: ChildProcess[] = [];

/** Starts a helper server in a namespace and waits until it says it listens. */
async function startServer(namespace: string, args: string[]): Promise<void> {
  const child = spawn('ip', ['netns', 'exec', namespace, 'python3', HELPER, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const lines = createInterface({ input: child.stdout });
  await new Promise<void>((resolve, reject) => {
    lines.once('line', (line) => (line === 'ready' ? resolve() : reject(new Error(`${args.join(' ')}: ${line}`))));
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}: ${stderr}`)));
  });
}

async function client(namespace: string, uid: number, host: string, port: number): Promise<string> {
  const { stdout } = await run('ip', ['netns', 'exec', namespace, 'python3', HELPER, '--uid', String(uid), 'client', host, String(port)], { timeout: 20_000 });
  return stdout.trim();
}

async function removeNamespaces(): Promise<void> {
  for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  for (const namespace of [POD, PEER]) await ip('netns', 'del', namespace).catch(() => undefined);
}

// Should the runner stop this process before `after`, the namespaces go with it.
process.once('exit', () => {
  for (const namespace of [POD, PEER]) spawnSync('ip', ['netns', 'del', namespace], { stdio: 'ignore' });
});

async function makeNamespaces(): Promise<void> {
  await removeNamespaces();
  await ip('netns', 'add', POD);
  await ip('netns', 'add', PEER);
  await ip('-n', POD, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', PEER);
  for (const [namespace, addresses] of [
    [POD, [`${V4.pod}/24`, `${V6.pod}/64`]],
    [PEER, [`${V4.peer}/24`, `${V4.excluded}/24`, `${V6.peer}/64`, `${V6.excluded}/64`]],
  ] as const) {
    // nodad: an IPv6 address is usable at once, not after duplicate address detection.
    for (const address of addresses) await ip('-n', namespace, 'addr', 'add', address, 'dev', 'eth0', ...(address.includes(':') ? ['nodad'] : []));
    await ip('-n', namespace, 'link', 'set', 'lo', 'up');
    await ip('-n', namespace, 'link', 'set', 'eth0', 'up');
  }
}

async function natRules(binary: string): Promise<string[]> {
  const { stdout } = await inPod(binary, '-t', 'nat', '-S');
  return stdout.trim().split('\n');
}

describe('init/capture-rules.sh in two network namespaces', { skip: missing !== undefined, timeout: 120_000 }, () => {
  let firstRun = '';
  let rulesAfterOneRun: string[] = [];
  before(async () => {
    await makeNamespaces();
    await startServer(PEER, ['server', 'remote', String(PORTS.app), String(PORTS.excludedOut)]);
    await startServer(POD, ['server', 'app', String(PORTS.app), String(PORTS.appOther), String(PORTS.excludedIn)]);
    await startServer(POD, ['server', 'health', String(PORTS.health)]);
    await startServer(POD, ['--uid', String(PROXY_UID), 'proxy', String(PORTS.outbound), String(PORTS.inbound)]);
    firstRun = (await inPod('sh', SCRIPT, ...ARGS)).stdout;
    rulesAfterOneRun = [...(await natRules('iptables')), ...(await natRules('ip6tables'))];
    await inPod('sh', SCRIPT, ...ARGS);
  });
  after(removeNamespaces);

  it('uses the nft backend where the kernel has it, and says so', () => {
    assert.match(firstRun, /TCP captured with iptables-nft: outbound to port 15001 \(proxy uid 101\), inbound to port 15006/);
  });

  for (const [family, addresses] of [['IPv4', V4], ['IPv6', V6]] as const) {
    it(`${family}: an application's outbound connection reaches the proxy with its original destination, and the proxy's goes on to it`, async () => {
      assert.equal(await client(POD, APP_UID, addresses.peer, PORTS.app), `proxy ${PORTS.outbound} original ${addresses.peer} ${PORTS.app} | remote ${addresses.peer} ${PORTS.app}`);
    });

    it(`${family}: the proxy's own connection goes straight through (no loop)`, async () => {
      assert.equal(await client(POD, PROXY_UID, addresses.peer, PORTS.app), `remote ${addresses.peer} ${PORTS.app}`);
    });

    it(`${family}: an excluded port and an excluded CIDR go straight through`, async () => {
      assert.equal(await client(POD, APP_UID, addresses.peer, PORTS.excludedOut), `remote ${addresses.peer} ${PORTS.excludedOut}`);
      assert.equal(await client(POD, APP_UID, addresses.excluded, PORTS.app), `remote ${addresses.excluded} ${PORTS.app}`);
    });

    it(`${family}: inbound to the application's port is redirected to the inbound port; the health and excluded ports are not`, async () => {
      assert.equal(await client(PEER, APP_UID, addresses.pod, PORTS.app), `proxy ${PORTS.inbound} original ${addresses.pod} ${PORTS.app} | app ${addresses.pod} ${PORTS.app}`);
      assert.equal(await client(PEER, APP_UID, addresses.pod, PORTS.health), `health ${addresses.pod} ${PORTS.health}`);
      assert.equal(await client(PEER, APP_UID, addresses.pod, PORTS.excludedIn), `app ${addresses.pod} ${PORTS.excludedIn}`);
    });
  }

  it('running the script twice leaves one copy of each rule', async () => {
    const rules = [...(await natRules('iptables')), ...(await natRules('ip6tables'))];
    assert.deepEqual(rules, rulesAfterOneRun);
    for (const binary of ['iptables', 'ip6tables']) {
      const own = await natRules(binary);
      assert.equal(own.filter((rule) => rule === '-A OUTPUT -p tcp -j ENVOY_OUTBOUND').length, 1, binary);
      assert.equal(own.filter((rule) => rule === '-A PREROUTING -p tcp -j ENVOY_INBOUND').length, 1, binary);
      assert.equal(new Set(own).size, own.length, `${binary}: a rule twice`);
      // UDP (DNS) is never redirected: every jump and redirect is TCP only.
      for (const rule of own.filter((line) => /-j (REDIRECT|ENVOY_)/.test(line))) assert.match(rule, /-p tcp/, rule);
    }
  });

  it('a rerun with other arguments rebuilds the chains: only the included inbound ports are redirected then', async () => {
    await inPod('sh', SCRIPT, ...ARGS, `--include-inbound-ports=${PORTS.app}`);
    assert.equal(await client(PEER, APP_UID, V4.pod, PORTS.app), `proxy ${PORTS.inbound} original ${V4.pod} ${PORTS.app} | app ${V4.pod} ${PORTS.app}`);
    assert.equal(await client(PEER, APP_UID, V4.pod, PORTS.appOther), `app ${V4.pod} ${PORTS.appOther}`);
    assert.equal(await client(PEER, APP_UID, V6.pod, PORTS.appOther), `app ${V6.pod} ${PORTS.appOther}`);
    const inbound = (await natRules('iptables')).filter((rule) => rule.startsWith('-A ENVOY_INBOUND'));
    assert.deepEqual(inbound, [
      `-A ENVOY_INBOUND -p tcp -m tcp --dport ${PORTS.admin} -j RETURN`,
      `-A ENVOY_INBOUND -p tcp -m tcp --dport ${PORTS.health} -j RETURN`,
      `-A ENVOY_INBOUND -p tcp -m tcp --dport ${PORTS.excludedIn} -j RETURN`,
      `-A ENVOY_INBOUND -p tcp -m tcp --dport ${PORTS.app} -j REDIRECT --to-ports ${PORTS.inbound}`,
    ]);
  });

  it('refuses a bad argument before changing any rule', async () => {
    const before = await natRules('iptables');
    await assert.rejects(inPod('sh', SCRIPT, ...ARGS, '--exclude-outbound-ports=80,99999'), (error: { code?: number; stderr?: string }) => {
      assert.equal(error.code, 2);
      assert.match(error.stderr ?? '', /--exclude-outbound-ports: "99999" is not a port \(1-65535\)/);
      return true;
    });
    assert.deepEqual(await natRules('iptables'), before);
  });

  it('--interception=tproxy: the proxy gets inbound connections with the client\'s own address, and the app, reached from it, sees the client (IPv4 and IPv6)', async () => {
    // The app reports its peers; the TPROXY proxy listens transparently on its own inbound port (the REDIRECT one holds 15006).
    await startServer(POD, ['peers', 'app', String(PORTS.appPeers)]);
    await startServer(POD, ['tproxy', String(PORTS.tproxy)]);
    const args = [...ARGS.map((arg) => (arg.startsWith('--inbound-port=') ? `--inbound-port=${PORTS.tproxy}` : arg)), '--interception=tproxy'];
    assert.match((await inPod('sh', SCRIPT, ...args)).stdout, new RegExp(`inbound to port ${PORTS.tproxy} by TPROXY`));
    await inPod('sh', SCRIPT, ...args);
    for (const addresses of [V4, V6]) {
      // The client's source is one of the peer's addresses (IPv6 picks its own): the proxy and the app see the same one.
      const answer = await client(PEER, APP_UID, addresses.pod, PORTS.appPeers);
      const seen = new RegExp(`^tproxy ${PORTS.tproxy} original ${addresses.pod} ${PORTS.appPeers} from (\\S+) \\| app ${addresses.pod} ${PORTS.appPeers} from (\\S+)$`).exec(answer);
      assert.ok(seen !== null, answer);
      assert.ok([addresses.peer, addresses.excluded].includes(seen[1] ?? ''), answer);
      assert.equal(seen[2], seen[1], `the app sees the client's own address: ${answer}`);
      assert.equal(await client(PEER, APP_UID, addresses.pod, PORTS.health), `health ${addresses.pod} ${PORTS.health}`);
      assert.equal(await client(PEER, APP_UID, addresses.pod, PORTS.excludedIn), `app ${addresses.pod} ${PORTS.excludedIn}`);
      // Outbound is the same in both modes.
      assert.equal(await client(POD, APP_UID, addresses.peer, PORTS.app), `proxy ${PORTS.outbound} original ${addresses.peer} ${PORTS.app} | remote ${addresses.peer} ${PORTS.app}`);
    }
    // Run twice: each jump, rule and route once; the nat inbound chain empty; the proxy's group let out (TPROXY's proxy runs as root in it).
    for (const [binary, family] of [['iptables', '-4'], ['ip6tables', '-6']] as const) {
      assert.deepEqual((await natRules(binary)).filter((rule) => rule.startsWith('-A ENVOY_INBOUND')), [], binary);
      assert.equal((await natRules(binary)).filter((rule) => rule === `-A ENVOY_OUTBOUND -m owner --gid-owner ${PROXY_UID} -j RETURN`).length, 1, binary);
      const mangle = (await inPod(binary, '-t', 'mangle', '-S')).stdout.trim().split('\n');
      assert.equal(new Set(mangle).size, mangle.length, `${binary}: a rule twice`);
      assert.equal(mangle.filter((rule) => rule === '-A PREROUTING -p tcp -j ENVOY_INBOUND').length, 1, binary);
      const rules = (await inPod('ip', family, 'rule', 'show')).stdout.split('\n').filter((line) => line.includes('fwmark 0x539 lookup 133'));
      assert.equal(rules.length, 1, `${family}: ${rules.join(' | ')}`);
    }
  });

  it('the legacy backend installs the same rules', async () => {
    await inPod('sh', SCRIPT, ...ARGS, '--backend=legacy');
    // The nft rules still hold the TPROXY run's of the test before (its group rule); the outbound chain and the jumps are alike.
    const outbound = (rules: string[]): string[] => rules.filter((rule) => rule.includes('ENVOY_OUTBOUND') && !rule.includes('--gid-owner'));
    const legacy = outbound(await natRules('iptables-legacy'));
    assert.ok(legacy.length > 5, legacy.join('\n'));
    assert.deepEqual(legacy, outbound(await natRules('iptables-nft')));
  });
});
