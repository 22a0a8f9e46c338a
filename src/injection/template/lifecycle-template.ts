import { isNonNegativeInteger, ProblemList } from './entry-checks.js';
import { describeValue, isJsonObject, own, stringAt, type JsonValue } from '../basics/index.js';

/**
 * A template's `proxyLifecycle` section: how its proxy takes part in the
 * Pod's life (docs/design.md §13). Without it the injector leaves the proxy's
 * probes and hooks as the template wrote them.
 */
export interface LifecycleSettings {
  /** Hold the app until the proxy is ready, for Pods without `envoy-injector.io/hold-application`. */
  readonly holdApplication: boolean;
  /** Envoy's admin API on 127.0.0.1: the classic hooks ask it `/ready` and start its drain. */
  readonly adminPort: number;
  /** The port and path of the native startupProbe (the health listener's `/ready`). */
  readonly readyPort: number;
  readonly readyPath: string;
  /** How long the proxy goes on serving after the Pod is told to stop (classic sidecars). */
  readonly drainSeconds: number;
  /** Seconds the proxy may take to become ready: the startupProbe's failureThreshold at a period of 1 s. */
  readonly startupSeconds: number;
}

const LIFECYCLE_FIELDS = ['holdApplication', 'adminPort', 'readyPort', 'readyPath', 'drainSeconds', 'startupSeconds'];

/** Kubernetes caps a grace period nowhere, but a drain past an hour is a typo. */
const MAX_DRAIN_SECONDS = 3600;
const MAX_STARTUP_SECONDS = 3600;

/** Reads a template's `proxyLifecycle` section (undefined when it has none); problems are `proxyLifecycle.field: problem`. */
export function parseLifecycleSettings(value: JsonValue | undefined): LifecycleSettings | undefined | string[] {
  if (value === undefined || value === null) return undefined;
  if (!isJsonObject(value)) return ['proxyLifecycle: must be a mapping (holdApplication, adminPort, readyPort, readyPath, drainSeconds, startupSeconds)'];
  const problems = new ProblemList();
  for (const key of Object.keys(value)) {
    if (!LIFECYCLE_FIELDS.includes(key)) problems.add(`proxyLifecycle.${key}`, `unknown field (proxyLifecycle may hold ${LIFECYCLE_FIELDS.join(', ')})`);
  }
  const holdApplication = own(value, 'holdApplication') ?? true;
  if (typeof holdApplication !== 'boolean') problems.add('proxyLifecycle.holdApplication', 'must be true or false');
  const port = (field: string): number => {
    const given = own(value, field);
    if (given === undefined) problems.add(`proxyLifecycle.${field}`, 'required');
    else if (!(typeof given === 'number' && Number.isInteger(given) && given >= 1 && given <= 65535)) problems.add(`proxyLifecycle.${field}`, `${describeValue(given)} is not a port (1-65535)`);
    return typeof given === 'number' ? given : 0;
  };
  const seconds = (field: string, fallback: number, min: number, max: number): number => {
    const given = own(value, field) ?? fallback;
    if (!isNonNegativeInteger(given) || typeof given !== 'number' || given < min || given > max) {
      problems.add(`proxyLifecycle.${field}`, `${describeValue(given)} is not a whole number of seconds from ${min} to ${max}`);
      return fallback;
    }
    return given;
  };
  const adminPort = port('adminPort');
  const readyPort = port('readyPort');
  const readyPath = own(value, 'readyPath') ?? '/ready';
  if (typeof readyPath !== 'string' || !readyPath.startsWith('/')) problems.add('proxyLifecycle.readyPath', `${describeValue(readyPath)} is not an absolute path`);
  const drainSeconds = seconds('drainSeconds', 5, 0, MAX_DRAIN_SECONDS);
  const startupSeconds = seconds('startupSeconds', 60, 1, MAX_STARTUP_SECONDS);
  if (!problems.isEmpty()) return problems.list();
  return {
    holdApplication: holdApplication === true,
    adminPort,
    readyPort,
    readyPath: stringAt(value, 'readyPath') ?? '/ready',
    drainSeconds,
    startupSeconds,
  };
}
