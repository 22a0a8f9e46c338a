import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { captureListProblem, CheckCaptureExit, listItems } from '../injection/index.js';
import { captureTargets, redirectProblem, type CheckSettings } from '../node/check-capture.js';
import type { ProbeTarget } from '../node/cni/index.js';
import type { CommandIo } from './io.js';

export const CHECK_CAPTURE_HELP = `Usage: envoy-injector check-capture [RULE ARGUMENTS] [--timeout-seconds N]

CNI mode's check (the init container envoy-capture-check): whether the node
installed the capture rules in this network namespace. Listens on the outbound
port, connects to an address and port the rules redirect, and waits at most
--timeout-seconds for that connection to arrive at its own listener: for each
family the Pod has a route of, IPv4 (192.0.2.1 with a default route), IPv6
(2001:db8::1 with a default route), or both, each of which must pass.

Exit codes: ${CheckCaptureExit.redirected} redirected; ${CheckCaptureExit.notRedirected} not redirected in a family, or no route to
check (the Pod must not run uncaptured; the node agent deletes such Pods);
${CheckCaptureExit.usage} bad arguments.

Options (the rule script init/capture-rules.sh's arguments, every one required):
  --proxy-uid=UID                 the proxy's user
  --outbound-port=PORT            where the rules send outbound TCP (the check listens there)
  --inbound-port=PORT             where the rules send inbound TCP
  --proxy-ports=LIST              the proxy's own ports, never redirected
  --exclude-outbound-cidrs=LIST   CIDRs outbound TCP goes to straight
  --exclude-outbound-ports=LIST   ports outbound TCP goes to straight
  --exclude-inbound-ports=LIST    inbound ports not redirected
  --include-inbound-ports=LIST    when not empty, the only inbound ports redirected
  --timeout-seconds N             how long to wait for the redirected connection (1-60, default 5)
  -h, --help
`;

const RULE_ARGS = ['proxy-uid', 'outbound-port', 'inbound-port', 'proxy-ports', 'exclude-outbound-cidrs', 'exclude-outbound-ports', 'exclude-inbound-ports', 'include-inbound-ports'] as const;


export async function runCheckCapture(args: readonly string[], io: CommandIo): Promise<number> {
  const options = Object.fromEntries([...RULE_ARGS, 'timeout-seconds'].map((name) => [name, { type: 'string' as const }]));
  const { values } = parseArgs({ args: [...args], options: { ...options, help: { type: 'boolean', short: 'h' } }, strict: true });
  if (values['help'] === true) {
    io.stdout.write(CHECK_CAPTURE_HELP);
    return 0;
  }
  const settings = checkSettings(values);
  const targets = await captureTargets(settings);
  if (targets.length === 0) {
    io.stderr.write('envoy-capture-check: no IPv4 or IPv6 route a redirected connection could take (outside loopback, link-local and the excluded CIDRs)\n');
    return CheckCaptureExit.notRedirected;
  }
  // Every family the Pod has must be redirected (a dual-stack Pod without its ip6tables rules fails), checked side by side within one timeout.
  const problems = await Promise.all(targets.map((target) => redirectProblem(settings, target)));
  let failed = false;
  for (const [index, target] of targets.entries()) {
    const problem = problems[index];
    if (problem === undefined) {
      io.stdout.write(`envoy-capture-check: IPv${target.family} ${destination(target)} is redirected to port ${settings.outboundPort}\n`);
      continue;
    }
    failed = true;
    io.stderr.write(`envoy-capture-check: IPv${target.family} TCP to ${destination(target)} is not redirected to port ${settings.outboundPort} (${problem}): the node's CNI plugin did not install the IPv${target.family} capture rules\n`);
  }
  return failed ? CheckCaptureExit.notRedirected : CheckCaptureExit.redirected;
}

function destination(target: ProbeTarget): string {
  return target.family === 6 ? `[${target.address}]:${target.port}` : `${target.address}:${target.port}`;
}

/** Every rule argument is required, as the rule script wants; the lists are checked with the webhook's grammar. */
function checkSettings(values: Record<string, string | boolean | undefined>): CheckSettings {
  const text = (name: string): string => {
    const value = values[name];
    if (typeof value !== 'string') throw new UsageError(`--${name}: required (check-capture takes every argument of the rule script)`);
    return value;
  };
  const port = (name: string, value: string): number => {
    const problem = captureListProblem('ports', value);
    if (problem !== undefined || value === '' || value.includes(',')) throw new UsageError(`--${name}: ${JSON.stringify(value)} is not a port (1-65535)`);
    return Number(value);
  };
  const ports = (name: string): number[] => {
    const value = text(name);
    const problem = captureListProblem('ports', value);
    if (problem !== undefined) throw new UsageError(`--${name}: ${problem}`);
    return listItems(value).map(Number);
  };
  if (!/^[0-9]+$/.test(text('proxy-uid'))) throw new UsageError(`--proxy-uid: ${JSON.stringify(text('proxy-uid'))} is not a user id`);
  const cidrs = text('exclude-outbound-cidrs');
  const cidrProblem = captureListProblem('cidrs', cidrs);
  if (cidrProblem !== undefined) throw new UsageError(`--exclude-outbound-cidrs: ${cidrProblem}`);
  ports('exclude-inbound-ports');
  ports('include-inbound-ports');
  const outboundPort = port('outbound-port', text('outbound-port'));
  port('inbound-port', text('inbound-port'));
  const timeout = values['timeout-seconds'] ?? '5';
  const seconds = typeof timeout === 'string' && /^[0-9]+$/.test(timeout) ? Number(timeout) : 0;
  if (seconds < 1 || seconds > 60) throw new UsageError(`--timeout-seconds: ${JSON.stringify(timeout)} is not a number of seconds from 1 to 60`);
  return {
    outboundPort,
    excludedCidrs: listItems(cidrs),
    excludedPorts: [...ports('proxy-ports'), ...ports('exclude-outbound-ports')],
    timeoutMs: seconds * 1000,
  };
}
