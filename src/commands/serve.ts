import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { ensureDevCertificates, createLogger, startServer } from '../server/serve.js';
import type { TlsFiles } from '../server/tls-files.js';
import { loadTemplates, type CommandIo } from './io.js';

export const SERVE_HELP = `Usage: envoy-injector serve [options]

Runs the admission webhook over HTTPS. Every option can also be set by the
environment variable named after it. Durations take ms or s (500ms, 5s).

Options:
  --port N                  PORT                 listening port (default 8443)
  --host ADDR               HOST                 address to listen on (default "::", every IPv4 and IPv6 address)
  --tls-cert FILE           TLS_CERT_FILE        serving certificate (PEM); reloaded when it changes
  --tls-key FILE            TLS_KEY_FILE         its private key (PEM)
  --client-ca FILE          TLS_CLIENT_CA_FILE   require client certificates signed by this CA
  --certs-dir DIR           CERTS_DIR            without --tls-cert: dev certificates here, made if absent (default certs)
  --template-file FILE      TEMPLATE_FILE        sidecar templates from a file (ConfigMap or bare template);
                                                 default: the bundled seed template
  --excluded-namespaces L   EXCLUDED_NAMESPACES  comma-separated namespaces never injected (beyond kube-*)
  --namespace NAME          POD_NAMESPACE        the injector's own namespace (never injected)
  --native-sidecar MODE     NATIVE_SIDECAR       on | off (default off)
  --log-level LEVEL         LOG_LEVEL            trace | debug | info | warn | error (default info)
  --tls-reload-interval D   TLS_RELOAD_INTERVAL  how often the certificate files are checked (default 2s)
  --shutdown-delay D        SHUTDOWN_DELAY       on SIGTERM, stay up unready this long before closing (default 0s)
  --shutdown-timeout D      SHUTDOWN_TIMEOUT     then cut open connections after this long (default 10s)
  --max-connections N       MAX_CONNECTIONS      bound on open connections (default 1024)
  -h, --help
`;

const OPTIONS = {
  port: { env: 'PORT', default: '8443' },
  host: { env: 'HOST', default: '::' },
  'tls-cert': { env: 'TLS_CERT_FILE', default: undefined },
  'tls-key': { env: 'TLS_KEY_FILE', default: undefined },
  'client-ca': { env: 'TLS_CLIENT_CA_FILE', default: undefined },
  'certs-dir': { env: 'CERTS_DIR', default: 'certs' },
  'template-file': { env: 'TEMPLATE_FILE', default: undefined },
  'excluded-namespaces': { env: 'EXCLUDED_NAMESPACES', default: '' },
  namespace: { env: 'POD_NAMESPACE', default: undefined },
  'native-sidecar': { env: 'NATIVE_SIDECAR', default: 'off' },
  'log-level': { env: 'LOG_LEVEL', default: 'info' },
  'tls-reload-interval': { env: 'TLS_RELOAD_INTERVAL', default: '2s' },
  'shutdown-delay': { env: 'SHUTDOWN_DELAY', default: '0s' },
  'shutdown-timeout': { env: 'SHUTDOWN_TIMEOUT', default: '10s' },
  'max-connections': { env: 'MAX_CONNECTIONS', default: '1024' },
} as const satisfies Record<string, { env: string; default: string | undefined }>;

type OptionName = keyof typeof OPTIONS;
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

export async function runServe(args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...(Object.fromEntries(Object.keys(OPTIONS).map((name) => [name, { type: 'string' }])) as Record<OptionName, { type: 'string' }>),
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(SERVE_HELP);
    return 0;
  }
  const setting = (name: OptionName): string | undefined => values[name] ?? nonEmpty(env[OPTIONS[name].env]) ?? OPTIONS[name].default;

  const logLevel = setting('log-level') ?? 'info';
  if (!LOG_LEVELS.includes(logLevel)) throw new UsageError(`--log-level: must be one of ${LOG_LEVELS.join(', ')}`);
  const nativeSidecar = setting('native-sidecar');
  if (nativeSidecar !== 'on' && nativeSidecar !== 'off') throw new UsageError('--native-sidecar: must be on or off');
  const port = parseInteger(setting('port'), '--port', 0, 65535);
  const certFile = setting('tls-cert');
  const keyFile = setting('tls-key');
  if ((certFile === undefined) !== (keyFile === undefined)) throw new UsageError('--tls-cert and --tls-key go together');

  const log = createLogger(logLevel);
  const templateFile = setting('template-file');
  const templates = await loadTemplates(templateFile, io);
  const clientCaFile = setting('client-ca');
  const devCerts = certFile === undefined;
  const certsDir = setting('certs-dir') ?? 'certs';
  const tls: TlsFiles = devCerts
    ? { ...(await ensureDevCertificates(certsDir, [], log)), clientCaFile }
    : { certFile, keyFile: keyFile ?? '', clientCaFile };

  const server = await startServer({
    port,
    host: setting('host') ?? '::',
    tls,
    tlsReloadIntervalMs: parseDuration(setting('tls-reload-interval'), '--tls-reload-interval'),
    templates: { set: templates, source: templateFile ?? 'the bundled seed template' },
    decisionOptions: {
      excludedNamespaces: (setting('excluded-namespaces') ?? '').split(',').map((name) => name.trim()).filter((name) => name !== ''),
      injectorNamespace: setting('namespace'),
      nativeSidecar: nativeSidecar === 'on',
    },
    maxConnections: parseInteger(setting('max-connections'), '--max-connections', 1, 1_000_000),
    shutdownDelayMs: parseDuration(setting('shutdown-delay'), '--shutdown-delay'),
    shutdownTimeoutMs: parseDuration(setting('shutdown-timeout'), '--shutdown-timeout'),
    log,
  });
  if (devCerts) {
    const ca = join(certsDir, 'ca.crt');
    io.stderr.write(
      `try it: curl --cacert ${ca} -H Content-Type:application/json --data-binary @examples/admission-review.json https://localhost:${server.port}/mutate\n`,
    );
  }

  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals += 1;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      log.info({ signal }, 'signal received');
      void server.shutdown().then(resolve);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  return 0;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value === '' ? undefined : value;
}

function parseInteger(value: string | undefined, flag: string, min: number, max: number): number {
  const number = Number(value);
  if (value === undefined || !/^\d+$/.test(value) || number < min || number > max) throw new UsageError(`${flag}: must be an integer from ${min} to ${max}`);
  return number;
}

/** `500ms`, `5s`, or a bare number of milliseconds. */
export function parseDuration(value: string | undefined, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(value ?? '');
  if (match === null) throw new UsageError(`${flag}: must be a duration such as 500ms or 5s`);
  return Number(match[1]) * (match[2] === 's' ? 1000 : 1);
}
