import { arrayAt, CAPTURE_CHECK_NAME, entryName, isExcludedNamespace, isJsonObject, objectAt, own, type JsonObject } from '../../injection/index.js';
import { cniModeStatus } from './capture-status.js';

/**
 * What the node agent makes of one request of the plugin's shim
 * (cni/envoy-injector-cni.c; docs/design.md §11, CNI mode). Pure: the agent
 * reads the Pod and runs the rule script.
 */

/** The shim's request: its CNI_* variables and the network configuration it was given. */
export interface ShimRequest {
  readonly env: Readonly<Record<string, string>>;
  readonly config: string;
}

/** "NAME=value" lines, an empty line, then the configuration as received. */
export function parseShimRequest(text: string): ShimRequest {
  const split = text.indexOf('\n\n');
  const head = split < 0 ? text : text.slice(0, split);
  const env: Record<string, string> = {};
  for (const line of head.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0) env[line.slice(0, at)] = line.slice(at + 1);
  }
  return { env, config: split < 0 ? '' : text.slice(split + 2) };
}

/** The shim's answer: the exit code, a newline, then what it prints. */
export function shimAnswer(code: number, stdout: string): string {
  return `${code}\n${stdout}`;
}

/** The Pod a request is for, from the kubelet's CNI_ARGS (K8S_POD_NAMESPACE, K8S_POD_NAME, and K8S_POD_UID where the runtime gives it). */
export function podOfRequest(env: Readonly<Record<string, string>>): { namespace: string; name: string; uid?: string } | undefined {
  const args = new Map((env['CNI_ARGS'] ?? '').split(';').map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const));
  const namespace = args.get('K8S_POD_NAMESPACE');
  const name = args.get('K8S_POD_NAME');
  const uid = args.get('K8S_POD_UID');
  if (namespace === undefined || name === undefined || namespace === '' || name === '') return undefined;
  return uid === undefined || uid === '' ? { namespace, name } : { namespace, name, uid };
}

/**
 * Whether the injector never captures a Pod of NAMESPACE: the control
 * plane's namespaces, the injector's own and the configured exclusions
 * (isExcludedNamespace, what the webhook and policy mode skip). The agent
 * then never waits on the API for such a Pod it has not cached: an API
 * outage must not hold CoreDNS's start. One there that says CNI mode anyway
 * (made by hand) gets no rules, and its check keeps it from running.
 */
export function neverCapturedNamespace(namespace: string, settings: { readonly injectorNamespace?: string | undefined; readonly excludedNamespaces?: readonly string[] | undefined }): boolean {
  return isExcludedNamespace(namespace, { ...(settings.injectorNamespace === undefined ? {} : { injectorNamespace: settings.injectorNamespace }), ...(settings.excludedNamespaces === undefined ? {} : { excludedNamespaces: settings.excludedNamespaces }) });
}

/** The rule script's arguments, every one (init/capture-rules.sh checks them again). */
const RULE_FLAGS = ['--proxy-uid=', '--outbound-port=', '--inbound-port=', '--proxy-ports=', '--exclude-outbound-cidrs=', '--exclude-outbound-ports=', '--exclude-inbound-ports=', '--include-inbound-ports='];

export type SetUpDecision =
  | { readonly kind: 'pass'; readonly why: string }
  | { readonly kind: 'capture'; readonly args: readonly string[] }
  | { readonly kind: 'error'; readonly message: string };

/**
 * Whether the rules go into this Pod's network namespace: only for a Pod
 * whose status says CNI mode, never a host-network one; the arguments are
 * the ones of its check container, which checks what is installed.
 */
export function decideSetUp(pod: JsonObject): SetUpDecision {
  const spec = objectAt(pod, 'spec');
  if (own(spec ?? {}, 'hostNetwork') === true) return { kind: 'pass', why: 'host network' };
  const parsed = cniModeStatus(pod);
  if (parsed === undefined) return { kind: 'pass', why: 'not injected in CNI mode' };
  const ours = own(parsed, 'initContainers');
  const check = (arrayAt(spec, 'initContainers') ?? []).find((entry) => entryName(entry) === CAPTURE_CHECK_NAME);
  if (!Array.isArray(ours) || !ours.includes(CAPTURE_CHECK_NAME) || !isJsonObject(check)) {
    return { kind: 'error', message: `the Pod's status says CNI mode but it has no ${CAPTURE_CHECK_NAME} of ours: its rules are unknown` };
  }
  const args = arrayAt(check, 'args') ?? [];
  const strings = args.filter((arg): arg is string => typeof arg === 'string');
  const missing = RULE_FLAGS.filter((flag) => !strings.some((arg) => arg.startsWith(flag)));
  if (missing.length > 0 || strings.length !== RULE_FLAGS.length) return { kind: 'error', message: `${CAPTURE_CHECK_NAME}'s args are not the rule script's (missing ${missing.join(' ') || 'none'}, ${strings.length} given)` };
  return { kind: 'capture', args: RULE_FLAGS.map((flag) => strings.find((arg) => arg.startsWith(flag)) ?? flag) };
}

/** What a chained plugin prints after ADD: the previous plugin's result, under the configuration's version. */
export function chainedResult(config: string): { result: string } | { problem: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(config);
  } catch {
    return { problem: 'the network configuration is not JSON' };
  }
  if (!isJsonObject(parsed)) return { problem: 'the network configuration is not a JSON object' };
  const previous = own(parsed, 'prevResult');
  if (!isJsonObject(previous)) return { problem: `no prevResult: ${'envoy-injector-cni'} must be chained after the primary plugin` };
  return { result: JSON.stringify({ ...previous, cniVersion: own(parsed, 'cniVersion') ?? own(previous, 'cniVersion') ?? '1.0.0' }) };
}

/** A CNI error result (the specification's shape), printed with exit code 1. */
export function cniError(config: string, code: number, message: string): string {
  let version: unknown = '1.0.0';
  try {
    const parsed: unknown = JSON.parse(config);
    if (isJsonObject(parsed)) version = own(parsed, 'cniVersion') ?? version;
  } catch {
    // The version stays the default.
  }
  return JSON.stringify({ cniVersion: version, code, msg: `envoy-injector-cni: ${message}` });
}
