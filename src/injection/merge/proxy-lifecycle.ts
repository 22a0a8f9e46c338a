import { readBooleanAnnotation } from '../decision/index.js';
import { Annotations, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../basics/index.js';
import type { LifecycleSettings } from '../template/index.js';

/** Kubernetes' default `terminationGracePeriodSeconds`. */
export const DEFAULT_GRACE_SECONDS = 30;
/** What the grace period keeps for Envoy after the drain: SIGTERM to exit. */
export const EXIT_MARGIN_SECONDS = 1;

/** What the proxy does in this Pod's life (docs/design.md §13). */
export interface LifecycleDecision {
  /** The app waits for the proxy: a native startupProbe, or (classic) first in `containers` with a postStart wait. */
  readonly hold: boolean;
  /** Classic sidecars only: the preStop drain, shortened to fit the grace period; 0 means no preStop. */
  readonly drainSeconds: number;
  readonly warnings: readonly string[];
}

/**
 * Decides holding and draining for one Pod. `envoy-injector.io/hold-application`
 * beats the template's `holdApplication`. The drain must end before the
 * grace period does, with a second left for Envoy to exit: a longer one is
 * shortened with a warning, and the Pod's grace period is never changed.
 */
export function decideLifecycle(pod: JsonObject, settings: LifecycleSettings, nativeSidecar: boolean): LifecycleDecision {
  const warnings: string[] = [];
  const annotations = objectAt(objectAt(pod, 'metadata'), 'annotations');
  const hold = readBooleanAnnotation(annotations, Annotations.holdApplication, warnings) ?? settings.holdApplication;
  // Native sidecars are stopped after the app by the kubelet itself: no drain hook.
  if (nativeSidecar) return { hold, drainSeconds: 0, warnings };
  const given = own(objectAt(pod, 'spec') ?? {}, 'terminationGracePeriodSeconds');
  const grace = typeof given === 'number' && Number.isInteger(given) && given >= 0 ? given : DEFAULT_GRACE_SECONDS;
  const fits = Math.max(0, grace - EXIT_MARGIN_SECONDS);
  if (settings.drainSeconds <= fits) return { hold, drainSeconds: settings.drainSeconds, warnings };
  warnings.push(
    `the proxy's drain of ${settings.drainSeconds} s does not fit the Pod's terminationGracePeriodSeconds of ${grace} s: shortened to ${fits} s ` +
      `(raise terminationGracePeriodSeconds to at least ${settings.drainSeconds + EXIT_MARGIN_SECONDS} for the whole drain)`,
  );
  return { hold, drainSeconds: fits, warnings };
}

/** A hold-application annotation on a Pod whose template has no proxyLifecycle section does nothing: say so. */
export function lifecycleIgnoredWarnings(pod: JsonObject): string[] {
  const annotations = objectAt(objectAt(pod, 'metadata'), 'annotations');
  if (annotations === undefined || own(annotations, Annotations.holdApplication) === undefined) return [];
  return [`${Annotations.holdApplication}: the template has no proxyLifecycle section; ignored`];
}

/**
 * The proxy container as this Pod's life wants it. Native: a startupProbe on
 * the health listener's ready path (the kubelet starts the next containers
 * only once it passes). Classic: a postStart hook that returns once Envoy is
 * ready (the kubelet starts the next container only after it returns), and a
 * preStop hook that starts Envoy's graceful drain and waits. A probe or hook
 * the template's proxy already has is kept as written.
 */
export function applyLifecycle(container: JsonObject, settings: LifecycleSettings, decision: LifecycleDecision, nativeSidecar: boolean): JsonObject {
  if (nativeSidecar) {
    if (!decision.hold || own(container, 'startupProbe') !== undefined) return container;
    return { ...container, startupProbe: startupProbe(settings) };
  }
  const lifecycle = objectAt(container, 'lifecycle') ?? {};
  const postStart = decision.hold && own(lifecycle, 'postStart') === undefined ? { postStart: execHook(waitReadyScript(settings)) } : {};
  const preStop = decision.drainSeconds > 0 && own(lifecycle, 'preStop') === undefined ? { preStop: execHook(drainScript(settings, decision.drainSeconds)) } : {};
  if (Object.keys(postStart).length === 0 && Object.keys(preStop).length === 0) return container;
  return { ...container, lifecycle: { ...lifecycle, ...postStart, ...preStop } };
}

export function startupProbe(settings: LifecycleSettings): JsonObject {
  return {
    httpGet: { path: settings.readyPath, port: settings.readyPort },
    periodSeconds: 1,
    failureThreshold: settings.startupSeconds,
  };
}

/**
 * The Envoy image (envoyproxy/envoy, ci/Dockerfile-envoy: Ubuntu with
 * ca-certificates only) has bash and coreutils but no curl or wget, and
 * Envoy's admin API takes its mutating calls by POST only, which neither an
 * httpGet handler nor the `sleep` action can send. So the hooks are bash,
 * speaking HTTP/1.1 over bash's /dev/tcp (HTTP/1.0 gets a 426 from Envoy).
 */
export function execHook(script: string): JsonObject {
  return { exec: { command: ['/bin/bash', '-c', script] } };
}

/** One admin API call, true on a 200; READTIMEOUT is bash's `read -t` operand (a number or an arithmetic expansion). */
function adminCall(settings: LifecycleSettings, method: string, path: string, readTimeout = '2'): string {
  return (
    `(exec 3<>/dev/tcp/127.0.0.1/${settings.adminPort} && ` +
    `printf '${method} ${path} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 0\\r\\nConnection: close\\r\\n\\r\\n' >&3 && ` +
    `IFS= read -r -t ${readTimeout} line <&3 && [[ $line == 'HTTP/1.1 200 '* ]]) 2>/dev/null`
  );
}

/** postStart: returns once Envoy's admin `/ready` answers 200; fails (the kubelet restarts the proxy) after startupSeconds. */
export function waitReadyScript(settings: LifecycleSettings): string {
  const limit = settings.startupSeconds;
  // One clock for the whole wait (bash's SECONDS): each try's read may take at most what is left of it, 2 s at most.
  return [
    'SECONDS=0',
    `while ((SECONDS < ${limit})); do`,
    `  if ${adminCall(settings, 'GET', '/ready', `$((${limit} - SECONDS < 2 ? ${limit} - SECONDS : 2))`)}; then exit 0; fi`,
    `  if ((SECONDS < ${limit})); then sleep 1; fi`,
    'done',
    `echo 'envoy-injector: Envoy was not ready after ${settings.startupSeconds} s (GET 127.0.0.1:${settings.adminPort}/ready)' >&2`,
    'exit 1',
  ].join('\n');
}

/**
 * preStop: Envoy closes its listeners at once on SIGTERM, so first a graceful
 * drain (it keeps serving, discouraging new requests for its --drain-time-s),
 * then the wait; SIGTERM follows when the hook returns.
 */
export function drainScript(settings: LifecycleSettings, drainSeconds: number): string {
  return drainScriptHead(settings) + String(drainSeconds);
}

/** The drain script up to its wait's number (policy mode appends the Pod's own). */
export function drainScriptHead(settings: LifecycleSettings): string {
  return `${adminCall(settings, 'POST', '/drain_listeners?graceful')} || echo 'envoy-injector: could not start the graceful drain (POST 127.0.0.1:${settings.adminPort}/drain_listeners?graceful)' >&2\nsleep `;
}

/**
 * The names of the local volumes among `volumes`, as cluster-autoscaler
 * counts them: `hostPath`, and `emptyDir` unless backed by memory.
 */
export function localVolumeNames(volumes: readonly JsonObject[]): string[] {
  return volumes
    .filter((volume) => own(volume, 'hostPath') !== undefined || (isJsonObject(own(volume, 'emptyDir')) && stringAt(objectAt(volume, 'emptyDir'), 'medium') !== 'Memory'))
    .map((volume) => stringAt(volume, 'name') ?? '')
    .filter((name) => name !== '');
}

/**
 * `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes` extended by
 * `names`: the Pod's own list is kept, in its order, and ours appended once.
 * Undefined when there is nothing to add. (Policy mode computes the same in CEL: compile-lifecycle.ts.)
 */
export function safeToEvictValue(pod: JsonObject, names: readonly string[]): string | undefined {
  const existing = stringAt(objectAt(objectAt(pod, 'metadata'), 'annotations'), Annotations.safeToEvictLocalVolumes);
  const listed = (existing ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
  const added = names.filter((name, index) => !listed.includes(name) && names.indexOf(name) === index);
  if (added.length === 0) return undefined;
  if (existing === undefined || listed.length === 0) return added.join(',');
  return `${existing}${existing.endsWith(',') ? '' : ','}${added.join(',')}`;
}
