import { existsSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Server as TlsServer } from 'node:tls';
import { pino, type Logger } from 'pino';
import type { TemplateSet } from '../injection/index.js';
import { buildApp, DEFAULT_TIMEOUTS, type AppDependencies, type NamespaceLabelLookup, type NamespaceMetadataLookup, type ServerTimeouts } from './build-app.js';
import { makeCertificates } from '../tls/certificates.js';
import { ConnectionTracker } from './connection-tracker.js';
import { InjectorMetrics } from './metrics.js';
import { startMetricsServer } from './metrics-server.js';
import { ServerState } from './server-state.js';
import { TemplateStore } from '../state/template-store.js';
import { readTlsFiles, secureContextOptions, TlsFileWatcher, type TlsFiles, type TlsMaterial } from '../tls/tls-files.js';

export interface ServeOptions {
  readonly port: number;
  /** `::` listens on every IPv6 and IPv4 address. */
  readonly host: string;
  /** Files (polled every tlsReloadIntervalMs), or material someone else keeps fresh through setTls. */
  readonly tls: { readonly files: TlsFiles } | { readonly material: TlsMaterial };
  readonly tlsReloadIntervalMs: number;
  /** Live state shared with the cluster watches (see createServerState). */
  readonly state: ServerState;
  readonly metrics: InjectorMetrics;
  readonly decisionOptions: AppDependencies['decisionOptions'];
  readonly timeouts?: ServerTimeouts;
  readonly maxConnections: number;
  /** Time between readiness going false and the listener closing (endpoints drain meanwhile). */
  readonly shutdownDelayMs: number;
  /** After this, open connections are cut and the process exits anyway. */
  readonly shutdownTimeoutMs: number;
  readonly log: Logger;
  readonly namespaceLabels?: NamespaceLabelLookup;
  /** Labels and `envoy-injector.io/` annotations of a namespace; preferred to namespaceLabels. */
  readonly namespaceMetadata?: NamespaceMetadataLookup;
  readonly workloadEvents?: AppDependencies['workloadEvents'];
  /** A plain-HTTP port serving only /metrics; undefined for none. */
  readonly metricsPort?: number | undefined;
}

export interface RunningServer {
  readonly port: number;
  /** The plain-HTTP metrics port, when one was asked for. */
  readonly metricsPort: number | undefined;
  readonly app: ReturnType<typeof buildApp>;
  /** Applies a new serving certificate to new connections (open ones keep theirs). */
  setTls(material: TlsMaterial): void;
  /**
   * Readiness false for shutdownDelayMs; then connections with no request in
   * flight are closed, in-flight requests finish and the listener closes;
   * bounded by shutdownTimeoutMs.
   */
  shutdown(): Promise<void>;
}

/** Metrics, the template store and readiness state, made before the server so watches can feed them. */
export function createServerState(log: Logger, initial?: { set: TemplateSet; source: string }, metricsRelease?: string): { state: ServerState; metrics: InjectorMetrics } {
  const metrics = new InjectorMetrics({ release: metricsRelease });
  const templates = new TemplateStore(metrics, log);
  if (initial !== undefined) templates.set(initial.set, initial.source);
  const state = new ServerState(templates);
  metrics.sources = { staleSeconds: () => state.staleSeconds() ?? 0, certificateNotAfter: () => state.tls?.notAfter };
  return { state, metrics };
}

export function createLogger(level: string): Logger {
  return pino({ level, timestamp: pino.stdTimeFunctions.isoTime, base: { name: 'envoy-injector' } });
}

/** Makes a dev CA and serving certificate in `dir` unless both serving files exist. */
export async function ensureDevCertificates(dir: string, hosts: readonly string[], log: Logger): Promise<TlsFiles> {
  const files = { certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
  if (existsSync(files.certFile) && existsSync(files.keyFile)) return files;
  await writeCertificateFiles(dir, hosts);
  log.info({ dir }, `made a development CA and serving certificate in ${dir}`);
  return files;
}

/** The `certs` command's output: ca.crt, ca.key, tls.crt, tls.key (keys readable by the owner only). */
export async function writeCertificateFiles(dir: string, hosts: readonly string[]): Promise<void> {
  const { ca, serving } = await makeCertificates({ hosts });
  await mkdir(dir, { recursive: true });
  for (const [name, content, secret] of [
    ['ca.crt', ca.cert, false],
    ['ca.key', ca.key, true],
    ['tls.crt', serving.cert, false],
    ['tls.key', serving.key, true],
  ] as const) {
    const path = join(dir, name);
    await writeFile(path, content, { mode: secret ? 0o600 : 0o644 });
    await chmod(path, secret ? 0o600 : 0o644);
  }
}

/** Starts the HTTPS webhook. Signal handling is the caller's (see commands/serve.ts). */
export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const { log, state, metrics } = options;

  const initialTls = 'files' in options.tls ? await readTlsFiles(options.tls.files) : options.tls.material;
  const app = buildApp({
    log,
    state,
    metrics,
    decisionOptions: options.decisionOptions,
    https: { ...secureContextOptions(initialTls), ...(initialTls.clientCa === undefined ? {} : { requestCert: true, rejectUnauthorized: true }) },
    timeouts: options.timeouts ?? DEFAULT_TIMEOUTS,
    maxConnections: options.maxConnections,
    ...(options.namespaceLabels === undefined ? {} : { namespaceLabels: options.namespaceLabels }),
    ...(options.namespaceMetadata === undefined ? {} : { namespaceMetadata: options.namespaceMetadata }),
    workloadEvents: options.workloadEvents,
  });

  const setTls = (material: TlsMaterial): void => {
    (app.server as TlsServer).setSecureContext(secureContextOptions(material));
    state.tls = material.info;
    log.info(
      { serial: material.info.serialNumber, fingerprint256: material.info.fingerprint256, notAfter: material.info.notAfter },
      'serving certificate loaded',
    );
  };
  state.tls = initialTls.info;
  const connections = new ConnectionTracker(app.server, 'secureConnection');

  const watcher =
    'files' in options.tls
      ? new TlsFileWatcher({
          files: options.tls.files,
          initial: initialTls,
          intervalMs: options.tlsReloadIntervalMs,
          onChange: setTls,
          onError: (error) => log.error({ err: error }, `new certificate files rejected, still serving the previous certificate: ${error.message}`),
        })
      : undefined;

  await listen(app, options.host, options.port, log);
  watcher?.start();
  const port = (app.server.address() as AddressInfo).port;
  const metricsServer = options.metricsPort === undefined ? undefined : await startMetricsServer(metrics, options.host, options.metricsPort);
  if (metricsServer !== undefined) log.info({ metricsPort: metricsServer.port }, `metrics over plain HTTP on port ${metricsServer.port}`);
  log.info({ port, host: options.host, serial: initialTls.info.serialNumber }, `envoy-injector serving https on port ${port}`);

  let shutdown: Promise<void> | undefined;
  return {
    port,
    metricsPort: metricsServer?.port,
    app,
    setTls,
    shutdown: () => {
      shutdown ??= (async () => {
        state.draining = true;
        log.info({ delayMs: options.shutdownDelayMs }, 'shutting down: readiness is false, draining');
        watcher?.stop();
        await sleep(options.shutdownDelayMs);
        const force = setTimeout(() => {
          log.warn({ timeoutMs: options.shutdownTimeoutMs }, 'shutdown timed out: closing open connections');
          app.server.closeAllConnections();
          metricsServer?.closeAllConnections();
        }, options.shutdownTimeoutMs);
        force.unref();
        // Endpoints have drained: a connection with no request in flight now would only hold the close up.
        const { closed, finishing } = connections.closeIdle();
        log.info({ closed, finishing }, `closing: ${closed} connections with no request in flight closed, ${finishing} finishing their requests`);
        await Promise.all([app.close(), metricsServer?.close()]);
        clearTimeout(force);
        log.info('shut down');
      })();
      return shutdown;
    },
  };
}

async function listen(app: ReturnType<typeof buildApp>, host: string, port: number, log: Logger): Promise<void> {
  try {
    await app.listen({ host, port });
  } catch (error) {
    // A node without IPv6 cannot bind `::`: all IPv4 addresses then.
    if (host === '::' && (error as NodeJS.ErrnoException).code === 'EAFNOSUPPORT') {
      log.warn('IPv6 is not available, listening on 0.0.0.0');
      await app.listen({ host: '0.0.0.0', port });
      return;
    }
    throw error;
  }
}

function sleep(ms: number): Promise<void> {
  return ms <= 0 ? Promise.resolve() : new Promise((resolve) => setTimeout(resolve, ms));
}
