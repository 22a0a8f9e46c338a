import { UsageError } from '../errors.js';
import { DEFAULT_BACKOFF } from '../kube/api/index.js';
import type { CertificateManager } from '../kube/index.js';
import type { InjectorMetrics } from '../server/metrics.js';
import { ensureDevCertificates, type RunningServer, type ServeOptions } from '../server/serve.js';
import type { ServerState } from '../server/server-state.js';
import { checkKeyPair, makeCertificates } from '../tls/certificates.js';
import { readClientCa } from '../tls/tls-files.js';
import type { Cluster, InjectorContext } from './injector-context.js';
import type { ServeSettings } from './serve-settings.js';

/** Where the serving certificate comes from: files (polled by the server), or the certificate manager. */
export interface TlsSource {
  /** What the server starts with. */
  readonly tls: ServeOptions['tls'];
  /** Present in `--cert-mode auto`. */
  readonly certificates: CertificateManager | undefined;
  /** Hands the listening server over (the manager puts each new certificate in) and starts renewing. */
  serveOn(server: RunningServer): Promise<void>;
  stop(): void;
}

/** Files (or dev certificates made in --certs-dir), or a Secret the certificate manager keeps fresh. */
export async function startTlsSource(settings: ServeSettings, cluster: Cluster | undefined, state: ServerState, metrics: InjectorMetrics, context: InjectorContext): Promise<TlsSource> {
  if (settings.certificates.mode === 'auto') {
    if (cluster === undefined) throw new UsageError('--cert-mode auto needs a cluster (--kubeconfig, or running in a Pod)');
    return startManagedCertificates(settings, settings.certificates, cluster, state, metrics, context);
  }
  const files = settings.tls ?? (await ensureDevCertificates(settings.certsDir, [], context.log));
  return {
    tls: { files: { ...files, clientCaFile: settings.clientCaFile } },
    certificates: undefined,
    serveOn: async () => undefined,
    stop: () => undefined,
  };
}

async function startManagedCertificates(
  settings: ServeSettings,
  certificateFlags: Extract<ServeSettings['certificates'], { mode: 'auto' }>,
  { kube, connection, namespace }: Cluster,
  state: ServerState,
  metrics: InjectorMetrics,
  context: InjectorContext,
): Promise<TlsSource> {
  const clientCa = settings.clientCaFile === undefined ? undefined : await readClientCa(settings.clientCaFile);
  let server: RunningServer | undefined;
  const manager = new kube.CertificateManager({
    kubeConfig: connection.kubeConfig,
    settings: {
      ...kube.DEFAULT_CERTIFICATE_SETTINGS,
      ...(settings.testCertValidityMs === undefined ? {} : kube.shortLivedCertificateSettings(settings.testCertValidityMs)),
      ...certificateFlags,
      namespace,
      ...context.certificateSettings,
    },
    log: context.log,
    backoff: context.backoff ?? DEFAULT_BACKOFF,
    watchLiveness: context.watchLiveness,
    onServingCertificate: (material) => server?.setTls({ ...material, clientCa }),
    ...(context.now === undefined ? {} : { now: context.now }),
  });
  state.addCheck('certificate', () => manager.problem());
  metrics.trackCaBundle(() => manager.caBundleTrusted);
  metrics.trackCaExpiry(() => manager.caNotAfter);
  // Listen at once, unready, on a throwaway certificate: probes and /readyz must answer while the real one is being made.
  const { serving } = await makeCertificates({ hosts: [] });
  return {
    tls: { material: { ...serving, clientCa, info: checkKeyPair(serving) } },
    certificates: manager,
    serveOn: async (listening) => {
      server = listening;
      // Resolves after the first attempt; failures are retried in the background and shown by /readyz.
      await manager.start();
    },
    stop: () => manager.stop(),
  };
}
