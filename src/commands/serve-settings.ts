import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { DEFAULT_ALLOWED_OVERRIDES, type LabelSelector, type OverrideName } from '../injection/index.js';
import { isPolicyApiPreference, type PolicyApiPreference } from '../policy/policy-api-version.js';
import { parseAllowedOverrides, parseInteger, parseSelectorsOption } from './options.js';

/**
 * `serve`'s flags and environment variables, read into ServeSettings: what
 * both modes start from (start-injector.ts for the webhook,
 * policy-controller.ts for policy mode).
 */

export const SERVE_HELP = `Usage: envoy-injector serve [options]

Runs the admission webhook over HTTPS. Every option can also be set by the
environment variable named after it. Durations take ms or s (500ms, 5s).

Options:
  --mode MODE               MODE                 webhook (default) | policy: keep a MutatingAdmissionPolicy and its
                                                 binding in sync with the templates instead (Kubernetes 1.36+, or
                                                 1.34+ with the API's flags); then --port serves only /healthz,
                                                 /readyz and /metrics over plain HTTP
  --policy-name NAME        POLICY_NAME          policy: name of the policy and binding (default envoy-injector)
  --failure-policy P        FAILURE_POLICY       policy: Fail (default) | Ignore when an expression fails
  --policy-api-version V    POLICY_API_VERSION   policy: auto (default: v1 where served, else v1beta1) | v1 | v1beta1
                                                 (used while the API server serves it, else the one it serves)
  --policy-owner NAME       POLICY_OWNER         policy: a ClusterRole that owns both objects: deleting it deletes
                                                 them (the chart passes its own); none by default
  --policy-generation N     POLICY_GENERATION    policy: this release's generation (the chart passes its revision); a
                                                 controller finding a higher one in the cluster stands by (default 0)
  --port N                  PORT                 listening port (default 8443)
  --host ADDR               HOST                 address to listen on (default "::", every IPv4 and IPv6 address)
  --tls-cert FILE           TLS_CERT_FILE        serving certificate (PEM); reloaded when it changes
  --tls-key FILE            TLS_KEY_FILE         its private key (PEM)
  --client-ca FILE          TLS_CLIENT_CA_FILE   require client certificates signed by this CA
  --certs-dir DIR           CERTS_DIR            without --tls-cert: dev certificates here, made if absent (default certs)
  --cert-mode MODE          CERT_MODE            files (the flags above) | auto (a Secret the injector makes,
                                                 shares, renews, and whose CA it puts in the webhook's caBundle)
  --cert-secret NAME        CERT_SECRET          auto: the Secret in --namespace (default envoy-injector-tls)
  --webhook-config NAME     WEBHOOK_CONFIG_NAME  auto: the MutatingWebhookConfiguration to patch (default envoy-injector)
  --service-name NAME       SERVICE_NAME         auto: the Service the certificate names (default envoy-injector)
  --cluster-domain NAME     CLUSTER_DOMAIN       auto: the cluster's DNS domain (default cluster.local)
  --kubeconfig FILE         KUBECONFIG           the cluster to watch; in a Pod, its service account is used
  --configmap NAME          TEMPLATE_CONFIGMAP   the template ConfigMap watched in --namespace (default envoy-initializer)
  --template-file FILE      TEMPLATE_FILE        sidecar templates from a file (ConfigMap or bare template), no
                                                 ConfigMap watch; outside a cluster the default is the bundled seed template
  --excluded-namespaces L   EXCLUDED_NAMESPACES  comma-separated namespaces never injected (beyond kube-*)
  --namespace NAME          POD_NAMESPACE        the injector's own namespace: never injected, holds the ConfigMap
                                                 (default: the kubeconfig context's or service account's, else default)
  --native-sidecar MODE     NATIVE_SIDECAR       auto | on | off (default auto: native sidecars when the
                                                 API server and every node's kubelet are 1.29 or later;
                                                 off outside a cluster)
  --allowed-overrides LIST  ALLOWED_OVERRIDES    the proxy-* annotations Pods may use (default
                                                 proxy-cpu,proxy-memory,proxy-cpu-limit,proxy-memory-limit; add
                                                 proxy-image to let Pods choose the proxy image; "none" for none)
  --never-inject-selector JSON  NEVER_INJECT_SELECTOR   Pod label selectors (a JSON list of
                                                 {matchLabels, matchExpressions}): matching Pods are not injected
                                                 unless annotated envoy-injector.io/inject: "true"
  --always-inject-selector JSON ALWAYS_INJECT_SELECTOR  matching Pods (and no never-selector) are injected in
                                                 every namespace not disabled, unless annotated "false"
  --log-level LEVEL         LOG_LEVEL            trace | debug | info | warn | error (default info)
  --metrics-port N          METRICS_PORT         also serve GET /metrics over plain HTTP on this port (default: none)
  --metrics-release ID      METRICS_RELEASE      put the label envoy_injector_release="ID" on every metric series, so
                                                 alerts select this release's whatever the scrape (the chart passes
                                                 <namespace>/<release>; default: no label)
  --tls-reload-interval D   TLS_RELOAD_INTERVAL  how often the certificate files are checked (default 2s)
  --shutdown-delay D        SHUTDOWN_DELAY       on SIGTERM, stay up unready this long before closing (default 0s)
  --shutdown-timeout D      SHUTDOWN_TIMEOUT     then cut open connections after this long (default 10s)
  --max-connections N       MAX_CONNECTIONS      bound on open connections (default 1024)
  --event-queue-size N      EVENT_QUEUE_SIZE     in a cluster: distinct Warning Events on workloads queued at once, beyond
                                                 which they are dropped and counted (default 1000; 0: post no Events)
  --rollout MODE            ROLLOUT              webhook mode, in a cluster: off (default) | on: the leader among the
                                                 replicas (a Lease) brings outdated workloads current by budget
  --rollout-max-concurrent N ROLLOUT_MAX_CONCURRENT  with --rollout on: workloads rolling at once in the cluster (default 1)
  --rollout-ready-timeout D ROLLOUT_READY_TIMEOUT  with --rollout on: a rollout whose Pods are not all Ready this long
                                                 after it started has failed, and the rollout stops (default 600s)
  --rollout-lease NAME      ROLLOUT_LEASE        with --rollout on: the Lease in --namespace (default envoy-injector-rollout)
  --rollout-field-manager M ROLLOUT_FIELD_MANAGER  with --rollout on: the field manager of its restarts (default
                                                 envoy-injector; flux-client-side-apply keeps them under Flux)
  --test-cert-validity D    TEST_CERT_VALIDITY   FOR TESTS ONLY, auto: serving certificates valid this long
                                                 (e.g. 20s) instead of a year, renewed when half is left
  -h, --help
`;

const OPTIONS = {
  mode: { env: 'MODE', default: 'webhook' },
  'policy-name': { env: 'POLICY_NAME', default: 'envoy-injector' },
  'failure-policy': { env: 'FAILURE_POLICY', default: 'Fail' },
  'policy-api-version': { env: 'POLICY_API_VERSION', default: 'auto' },
  'policy-owner': { env: 'POLICY_OWNER', default: undefined },
  'policy-generation': { env: 'POLICY_GENERATION', default: '0' },
  port: { env: 'PORT', default: '8443' },
  host: { env: 'HOST', default: '::' },
  'tls-cert': { env: 'TLS_CERT_FILE', default: undefined },
  'tls-key': { env: 'TLS_KEY_FILE', default: undefined },
  'client-ca': { env: 'TLS_CLIENT_CA_FILE', default: undefined },
  'certs-dir': { env: 'CERTS_DIR', default: 'certs' },
  'cert-mode': { env: 'CERT_MODE', default: 'files' },
  'cert-secret': { env: 'CERT_SECRET', default: 'envoy-injector-tls' },
  'webhook-config': { env: 'WEBHOOK_CONFIG_NAME', default: 'envoy-injector' },
  'service-name': { env: 'SERVICE_NAME', default: 'envoy-injector' },
  'cluster-domain': { env: 'CLUSTER_DOMAIN', default: 'cluster.local' },
  kubeconfig: { env: 'KUBECONFIG', default: undefined },
  configmap: { env: 'TEMPLATE_CONFIGMAP', default: 'envoy-initializer' },
  'template-file': { env: 'TEMPLATE_FILE', default: undefined },
  'excluded-namespaces': { env: 'EXCLUDED_NAMESPACES', default: '' },
  namespace: { env: 'POD_NAMESPACE', default: undefined },
  'native-sidecar': { env: 'NATIVE_SIDECAR', default: 'auto' },
  'allowed-overrides': { env: 'ALLOWED_OVERRIDES', default: DEFAULT_ALLOWED_OVERRIDES.join(',') },
  'never-inject-selector': { env: 'NEVER_INJECT_SELECTOR', default: undefined },
  'always-inject-selector': { env: 'ALWAYS_INJECT_SELECTOR', default: undefined },
  'log-level': { env: 'LOG_LEVEL', default: 'info' },
  'metrics-port': { env: 'METRICS_PORT', default: undefined },
  'metrics-release': { env: 'METRICS_RELEASE', default: undefined },
  'tls-reload-interval': { env: 'TLS_RELOAD_INTERVAL', default: '2s' },
  'shutdown-delay': { env: 'SHUTDOWN_DELAY', default: '0s' },
  'shutdown-timeout': { env: 'SHUTDOWN_TIMEOUT', default: '10s' },
  'max-connections': { env: 'MAX_CONNECTIONS', default: '1024' },
  'event-queue-size': { env: 'EVENT_QUEUE_SIZE', default: '1000' },
  rollout: { env: 'ROLLOUT', default: 'off' },
  'rollout-max-concurrent': { env: 'ROLLOUT_MAX_CONCURRENT', default: '1' },
  'rollout-ready-timeout': { env: 'ROLLOUT_READY_TIMEOUT', default: '600s' },
  'rollout-lease': { env: 'ROLLOUT_LEASE', default: 'envoy-injector-rollout' },
  'rollout-field-manager': { env: 'ROLLOUT_FIELD_MANAGER', default: 'envoy-injector' },
  'test-cert-validity': { env: 'TEST_CERT_VALIDITY', default: undefined },
} as const satisfies Record<string, { env: string; default: string | undefined }>;

type OptionName = keyof typeof OPTIONS;
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** Everything `serve` needs, from flags, then the environment, then defaults. */
export interface ServeSettings {
  /** `policy`: no webhook; the injector keeps a MutatingAdmissionPolicy in sync (see policy-controller.ts). */
  readonly mode: 'webhook' | 'policy';
  readonly policy: {
    readonly name: string;
    readonly failurePolicy: 'Fail' | 'Ignore';
    readonly apiVersion: PolicyApiPreference;
    /** A ClusterRole owning the policy and binding (their garbage collection with the release). */
    readonly owner: string | undefined;
    /** Orders the controllers of two releases: the higher one's policy is never overwritten. */
    readonly generation: number;
  };
  readonly port: number;
  readonly host: string;
  readonly logLevel: string;
  readonly tls: { readonly certFile: string; readonly keyFile: string } | undefined;
  readonly clientCaFile: string | undefined;
  readonly certsDir: string;
  /** `auto`: certificates from a Secret the injector manages (see CertificateManager). */
  readonly certificates:
    | { readonly mode: 'files' }
    | { readonly mode: 'auto'; readonly secretName: string; readonly webhookConfigName: string; readonly serviceName: string; readonly clusterDomain: string };
  readonly kubeconfig: string | undefined;
  readonly configMapName: string;
  readonly templateFile: string | undefined;
  readonly excludedNamespaces: readonly string[];
  readonly namespace: string | undefined;
  readonly nativeSidecar: 'auto' | 'on' | 'off';
  readonly allowedOverrides: readonly OverrideName[];
  /** Pod label selectors never (unless annotated "true") or always (unless "false") injected. */
  readonly neverInjectSelectors: readonly LabelSelector[];
  readonly alwaysInjectSelectors: readonly LabelSelector[];
  readonly tlsReloadIntervalMs: number;
  readonly shutdownDelayMs: number;
  readonly shutdownTimeoutMs: number;
  readonly maxConnections: number;
  /** Bound on queued workload Events (distinct notices); 0 posts none. */
  readonly eventQueueSize: number;
  readonly metricsPort: number | undefined;
  /** The envoy_injector_release label of every series: the chart's `<namespace>/<release>`. */
  readonly metricsRelease: string | undefined;
  /** The rollout by budget (kube/rollout-controller.ts): off unless `--rollout on`. */
  readonly rollout: RolloutServeSettings;
  /** Tests only: serving certificates of auto mode valid this long (see shortLivedCertificateSettings). */
  readonly testCertValidityMs: number | undefined;
}

export interface RolloutServeSettings {
  readonly enabled: boolean;
  readonly maxConcurrent: number;
  readonly readyTimeoutMs: number;
  readonly leaseName: string;
  readonly fieldManager: string;
}

/** Parses flags and environment; undefined when --help was asked for. */
export function parseServeArgs(args: readonly string[], env: NodeJS.ProcessEnv): ServeSettings | undefined {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...(Object.fromEntries(Object.keys(OPTIONS).map((name) => [name, { type: 'string' }])) as Record<OptionName, { type: 'string' }>),
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const setting = (name: OptionName): string | undefined => values[name] ?? nonEmpty(env[OPTIONS[name].env]) ?? OPTIONS[name].default;

  const logLevel = setting('log-level') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new UsageError(`--log-level: must be one of ${LOG_LEVELS.join(', ')}`);
  const nativeSidecar = setting('native-sidecar');
  if (nativeSidecar !== 'auto' && nativeSidecar !== 'on' && nativeSidecar !== 'off') throw new UsageError('--native-sidecar: must be auto, on or off');
  const certFile = setting('tls-cert');
  const keyFile = setting('tls-key');
  if ((certFile === undefined) !== (keyFile === undefined)) throw new UsageError('--tls-cert and --tls-key go together');
  const certMode = setting('cert-mode');
  if (certMode !== 'files' && certMode !== 'auto') throw new UsageError('--cert-mode: must be files or auto');
  if (certMode === 'auto' && certFile !== undefined) throw new UsageError('--cert-mode auto makes its own certificate: drop --tls-cert and --tls-key');
  const testCertValidity = setting('test-cert-validity');
  if (testCertValidity !== undefined && certMode !== 'auto') throw new UsageError('--test-cert-validity applies to --cert-mode auto only');
  const mode = setting('mode');
  if (mode !== 'webhook' && mode !== 'policy') throw new UsageError('--mode: must be webhook or policy');
  const failurePolicy = setting('failure-policy');
  if (failurePolicy !== 'Fail' && failurePolicy !== 'Ignore') throw new UsageError('--failure-policy: must be Fail or Ignore');
  const policyApiVersion = setting('policy-api-version') ?? 'auto';
  if (!isPolicyApiPreference(policyApiVersion)) throw new UsageError('--policy-api-version: must be auto, v1 or v1beta1');
  return {
    mode,
    policy: {
      name: setting('policy-name') ?? 'envoy-injector',
      failurePolicy,
      apiVersion: policyApiVersion,
      owner: setting('policy-owner'),
      generation: parseInteger(setting('policy-generation'), '--policy-generation', 0, Number.MAX_SAFE_INTEGER),
    },
    port: parseInteger(setting('port'), '--port', 0, 65535),
    host: setting('host') ?? '::',
    logLevel,
    tls: certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile },
    clientCaFile: setting('client-ca'),
    certsDir: setting('certs-dir') ?? 'certs',
    certificates:
      certMode === 'files'
        ? { mode: 'files' }
        : {
            mode: 'auto',
            secretName: setting('cert-secret') ?? 'envoy-injector-tls',
            webhookConfigName: setting('webhook-config') ?? 'envoy-injector',
            serviceName: setting('service-name') ?? 'envoy-injector',
            clusterDomain: setting('cluster-domain') ?? 'cluster.local',
          },
    // KUBECONFIG from the environment is left to client-node, which merges a list of files as kubectl does.
    kubeconfig: values.kubeconfig,
    configMapName: setting('configmap') ?? 'envoy-initializer',
    templateFile: setting('template-file'),
    excludedNamespaces: (setting('excluded-namespaces') ?? '').split(',').map((name) => name.trim()).filter((name) => name !== ''),
    namespace: setting('namespace'),
    nativeSidecar,
    allowedOverrides: parseAllowedOverrides(setting('allowed-overrides')),
    neverInjectSelectors: parseSelectorsOption('--never-inject-selector (NEVER_INJECT_SELECTOR)', setting('never-inject-selector')),
    alwaysInjectSelectors: parseSelectorsOption('--always-inject-selector (ALWAYS_INJECT_SELECTOR)', setting('always-inject-selector')),
    tlsReloadIntervalMs: parseDuration(setting('tls-reload-interval'), '--tls-reload-interval'),
    shutdownDelayMs: parseDuration(setting('shutdown-delay'), '--shutdown-delay'),
    shutdownTimeoutMs: parseDuration(setting('shutdown-timeout'), '--shutdown-timeout'),
    maxConnections: parseInteger(setting('max-connections'), '--max-connections', 1, 1_000_000),
    eventQueueSize: parseInteger(setting('event-queue-size'), '--event-queue-size', 0, 100_000),
    // 0 (the chart's "off") and unset both mean no metrics port.
    metricsPort: setting('metrics-port') === undefined || setting('metrics-port') === '0' ? undefined : parseInteger(setting('metrics-port'), '--metrics-port', 1, 65535),
    metricsRelease: nonEmpty(setting('metrics-release')),
    rollout: parseRolloutSettings(setting, mode),
    testCertValidityMs: testCertValidity === undefined ? undefined : parseTestCertValidity(testCertValidity),
  };
}

function parseRolloutSettings(setting: (name: OptionName) => string | undefined, mode: ServeSettings['mode']): RolloutServeSettings {
  const rollout = setting('rollout');
  if (rollout !== 'on' && rollout !== 'off') throw new UsageError('--rollout: must be on or off');
  if (rollout === 'on' && mode === 'policy') throw new UsageError('--rollout on runs in webhook mode only');
  const readyTimeoutMs = parseDuration(setting('rollout-ready-timeout'), '--rollout-ready-timeout');
  if (readyTimeoutMs < 1000) throw new UsageError('--rollout-ready-timeout: must be at least 1s');
  return {
    enabled: rollout === 'on',
    maxConcurrent: parseInteger(setting('rollout-max-concurrent'), '--rollout-max-concurrent', 1, 1_000),
    readyTimeoutMs,
    leaseName: setting('rollout-lease') ?? 'envoy-injector-rollout',
    fieldManager: setting('rollout-field-manager') ?? 'envoy-injector',
  };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function parseTestCertValidity(value: string): number {
  const ms = parseDuration(value, '--test-cert-validity');
  // Shorter than a second, a renewal would be due before the certificate is served.
  if (ms < 1000) throw new UsageError('--test-cert-validity: must be at least 1s');
  return ms;
}

/** `500ms`, `5s`, or a bare number of milliseconds. */
export function parseDuration(value: string | undefined, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(value ?? '');
  if (match === null) throw new UsageError(`${flag}: must be a duration such as 500ms or 5s`);
  return Number(match[1]) * (match[2] === 's' ? 1000 : 1);
}
