import { X509Certificate } from 'node:crypto';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1MutatingWebhookConfiguration,
  type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CertificateError } from '../errors.js';
import { BACKDATE_MS, checkKeyPair, describeCertificate, makeCa, makeServingCertificate, type KeyPair } from '../tls/certificates.js';
import type { TlsMaterial } from '../tls/tls-files.js';
import { describeKubeError, kubeErrorForLog, kubeErrorStatus } from './kube-errors.js';
import { backoffDelayMs, type Backoff } from './backoff.js';
import { caBundleApply, CA_BUNDLE_FIELD_MANAGER, splitPem, stillValid, trustsCa } from './ca-bundle.js';
import { ResilientInformer } from './resilient-informer.js';
import { TrackedWatch } from './tracked-watch.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const SECRET_TYPE = 'kubernetes.io/tls';

export interface CertificateSettings {
  readonly namespace: string;
  readonly secretName: string;
  readonly serviceName: string;
  /** The MutatingWebhookConfiguration whose webhooks get our caBundle. */
  readonly webhookConfigName: string;
  readonly clusterDomain: string;
  /** Renew a certificate (serving or CA) this long before it expires. */
  readonly renewBeforeMs: number;
  readonly caValidityDays: number;
  readonly servingValidityDays: number;
  /** How often expiry is checked (events also trigger a check). */
  readonly checkIntervalMs: number;
  /**
   * Once a CA is in the caBundle (added by this replica or found there), wait this long before serving a certificate it signed in
   * place of another: the API servers' copies of the configuration lag.
   */
  readonly caBundleSettleMs: number;
}

export const DEFAULT_CERTIFICATE_SETTINGS = {
  clusterDomain: 'cluster.local',
  renewBeforeMs: 30 * DAY_MS,
  caValidityDays: 3650,
  servingValidityDays: 365,
  checkIntervalMs: 60 * 60 * 1000,
  caBundleSettleMs: 2_000,
} as const;

/**
 * For tests only (TEST_CERT_VALIDITY): serving certificates valid VALIDITYMS
 * from now, renewed when half of that is left and checked ten times per
 * validity, so that a test sees rotations in seconds. Validity is counted
 * from notBefore, an hour early (see BACKDATE_MS), hence the addition.
 */
export function shortLivedCertificateSettings(validityMs: number): Pick<CertificateSettings, 'servingValidityDays' | 'renewBeforeMs' | 'checkIntervalMs'> {
  return { servingValidityDays: (BACKDATE_MS + validityMs) / DAY_MS, renewBeforeMs: validityMs / 2, checkIntervalMs: Math.max(100, validityMs / 10) };
}

/** What the Secret holds: the serving pair, the CA that signs it, and the bundle the API server must trust. */
interface StoredCertificates {
  readonly serving: KeyPair;
  readonly ca: KeyPair;
  /** PEM: the current CA first, then older CAs still valid (kept through a rotation). */
  readonly caBundle: string;
  readonly resourceVersion: string | undefined;
}

/**
 * `certificates.mode: auto`: the injector is its own small cert-manager. The
 * Secret shared by all replicas holds a CA and a serving certificate. Every
 * write is conditional (create, or replace with the resourceVersion read), so
 * racing replicas end with one Secret and each serves what it holds. A
 * replica that must remake the Secret reuses the CA it already serves, so a
 * deleted Secret does not multiply CAs. The order is always: store the
 * Secret, add its CA to every webhook's caBundle (additively: a CA is never
 * removed while it is valid, as another replica may still serve it), then
 * serve. A failure anywhere is retried with capped backoff, and readiness
 * says what is wrong until it is fixed.
 */
export class CertificateManager {
  readonly #core: CoreV1Api;
  readonly #admission: AdmissionregistrationV1Api;
  readonly #settings: CertificateSettings;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #now: () => Date;
  readonly #onServing: (material: TlsMaterial) => void;
  readonly #secretInformer: ResilientInformer<V1Secret>;
  readonly #webhookInformer: ResilientInformer<V1MutatingWebhookConfiguration>;
  /** What is served: only ever a certificate whose CA the caBundle trusted. */
  #served: StoredCertificates | undefined;
  /** Whether every webhook's caBundle holds the served CA (also true while the configuration does not exist). */
  #trusted = false;
  /** Why the last check failed; undefined after a good one. */
  #lastError: string | undefined;
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #reconciling: Promise<void> | undefined;
  #again = false;
  /** When each CA was first seen trusted by every webhook (Date.now()): the settle wait counts from there. */
  readonly #caSeenAt = new Map<string, number>();
  #stopped = false;

  constructor(options: {
    kubeConfig: KubeConfig;
    settings: CertificateSettings;
    log: Logger;
    backoff: Backoff;
    watchStaleAfterMs?: number | undefined;
    /** Called with each serving pair to load, once its CA is trusted. */
    onServingCertificate: (material: TlsMaterial) => void;
    /** The clock that decides when to renew (tests move it); new certificates always start now. */
    now?: () => Date;
  }) {
    const { kubeConfig, settings, log, backoff } = options;
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    this.#settings = settings;
    this.#log = log;
    this.#backoff = backoff;
    this.#now = options.now ?? (() => new Date());
    this.#onServing = options.onServingCertificate;

    const secretSelector = `metadata.name=${settings.secretName}`;
    let secretInformer: ResilientInformer<V1Secret> | undefined;
    this.#secretInformer = secretInformer = new ResilientInformer<V1Secret>({
      name: `Secret ${settings.namespace}/${settings.secretName}`,
      path: `/api/v1/namespaces/${encodeURIComponent(settings.namespace)}/secrets`,
      watch: new TrackedWatch(kubeConfig, { backoff, staleAfterMs: options.watchStaleAfterMs, onConnected: () => secretInformer?.resetBackoff() }),
      list: async () => {
        const secrets = await this.#core.listNamespacedSecret({ namespace: settings.namespace, fieldSelector: secretSelector });
        // Gone before the first list (or between relists): no delete event will say so.
        if (secrets.items.length === 0) this.#scheduleReconcile('the Secret is missing');
        return secrets;
      },
      fieldSelector: secretSelector,
      backoff,
      log,
    });
    const webhookSelector = `metadata.name=${settings.webhookConfigName}`;
    let webhookInformer: ResilientInformer<V1MutatingWebhookConfiguration> | undefined;
    this.#webhookInformer = webhookInformer = new ResilientInformer<V1MutatingWebhookConfiguration>({
      name: `MutatingWebhookConfiguration ${settings.webhookConfigName}`,
      path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      watch: new TrackedWatch(kubeConfig, { backoff, staleAfterMs: options.watchStaleAfterMs, onConnected: () => webhookInformer?.resetBackoff() }),
      list: () => this.#admission.listMutatingWebhookConfiguration({ fieldSelector: webhookSelector }),
      fieldSelector: webhookSelector,
      backoff,
      log,
    });
    this.#secretInformer.on('add', (secret) => this.#onSecret(secret));
    this.#secretInformer.on('update', (secret) => this.#onSecret(secret));
    this.#secretInformer.on('delete', () => this.#scheduleReconcile('the Secret was deleted'));
    this.#webhookInformer.on('add', (config) => this.#onWebhookConfig(config));
    this.#webhookInformer.on('update', (config) => this.#onWebhookConfig(config));
  }

  /** The hosts the serving certificate must name. */
  get hosts(): string[] {
    const { serviceName, namespace, clusterDomain } = this.#settings;
    return [`${serviceName}.${namespace}.svc`, `${serviceName}.${namespace}.svc.${clusterDomain}`, `${serviceName}.${namespace}`, serviceName];
  }

  /** For the metric: the served CA is in every webhook's caBundle. */
  get caBundleTrusted(): boolean {
    return this.#served !== undefined && this.#trusted;
  }

  /** For the metric: when the CA that signed the served certificate expires. */
  get caNotAfter(): Date | undefined {
    return this.#served === undefined ? undefined : describeCertificate(this.#served.ca.cert).notAfter;
  }

  /** Readiness: undefined while a trusted certificate is served, else what is wrong. */
  problem(): string | undefined {
    const retrying = this.#lastError === undefined ? '' : ` (last attempt: ${this.#lastError}; retrying)`;
    if (this.#served === undefined) return this.#lastError ?? 'the serving certificate is not ready yet';
    if (!this.#trusted) return `the caBundle of MutatingWebhookConfiguration ${this.#settings.webhookConfigName} does not trust the serving CA${retrying}`;
    return undefined;
  }

  /** Starts following the Secret and the webhook configuration; resolves after the first check, failed or not (failures are retried). */
  async start(): Promise<void> {
    this.#stopped = false;
    this.#secretInformer.start();
    this.#webhookInformer.start();
    this.#timer = setInterval(() => this.#scheduleReconcile('periodic expiry check'), this.#settings.checkIntervalMs);
    this.#timer.unref();
    await this.reconcile();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#retryTimer);
    this.#secretInformer.stop();
    this.#webhookInformer.stop();
  }

  /** One check of the Secret and the caBundle, now; a check asked for while one runs runs again after it. */
  reconcile(): Promise<void> {
    if (this.#reconciling !== undefined) {
      this.#again = true;
      return this.#reconciling;
    }
    this.#reconciling = (async () => {
      do {
        this.#again = false;
        await this.#reconcileOnce();
      } while (this.#again && !this.#stopped);
    })().finally(() => {
      this.#reconciling = undefined;
    });
    return this.#reconciling;
  }

  async #reconcileOnce(): Promise<void> {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    try {
      const stored = await this.#ensureSecret();
      await this.#ensureTrusted(stored);
      const switchingCa = this.#served !== undefined && this.#served.ca.cert !== stored.ca.cert;
      // Whoever put the new CA in the bundle (this replica or another), the API servers' copies lag behind it.
      if (switchingCa) await this.#settle(stored.ca.cert);
      this.#serve(stored);
      this.#trusted = true;
      this.#lastError = undefined;
      this.#failures = 0;
    } catch (error) {
      if (this.#stopped) return;
      this.#lastError = error instanceof CertificateError ? error.message : describeKubeError(error);
      const delayMs = backoffDelayMs(this.#backoff, this.#failures);
      this.#failures += 1;
      this.#log.error({ err: kubeErrorForLog(error), retryInMs: delayMs, failures: this.#failures }, `certificate check failed: ${this.#lastError}; retrying in ${delayMs} ms`);
      this.#retryTimer = setTimeout(() => void this.reconcile(), delayMs);
      this.#retryTimer.unref();
    }
  }

  /** Waits until CAPEM has been in the caBundle for caBundleSettleMs, counted from when this replica first saw it there. */
  async #settle(caPem: string): Promise<void> {
    const since = this.#caSeenAt.get(caPem.trim()) ?? Date.now();
    const waitMs = since + this.#settings.caBundleSettleMs - Date.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }

  /** Notes when CAPEM was first seen in every webhook's caBundle (written by us, or found there). */
  #sawTrusted(caPem: string): void {
    const ca = caPem.trim();
    if (!this.#caSeenAt.has(ca)) this.#caSeenAt.set(ca, Date.now());
  }

  #scheduleReconcile(why: string): void {
    if (this.#stopped) return;
    this.#log.debug({ why }, 'checking certificates');
    void this.reconcile();
  }

  #onSecret(secret: V1Secret): void {
    const stored = parseSecret(secret);
    if (stored !== undefined && stored.serving.cert === this.#served?.serving.cert && stored.caBundle === this.#served.caBundle) return;
    this.#scheduleReconcile('the Secret changed');
  }

  #onWebhookConfig(config: V1MutatingWebhookConfiguration): void {
    if (this.#served === undefined) return;
    if (trustsCa(config, this.#served.ca.cert)) return;
    this.#trusted = false;
    this.#scheduleReconcile('the caBundle lacks the serving CA');
  }

  /** Loads `stored` if its serving certificate differs from the one served. */
  #serve(stored: StoredCertificates): void {
    const previous = this.#served;
    this.#served = stored;
    if (previous?.serving.cert === stored.serving.cert && previous.caBundle === stored.caBundle) return;
    this.#onServing(toMaterial(stored));
  }

  /** Why `stored` cannot be served as it is, or undefined when it can. */
  #problem(stored: StoredCertificates): string | undefined {
    const now = this.#now().getTime();
    try {
      const serving = checkKeyPair(stored.serving);
      checkKeyPair(stored.ca);
      const ca = describeCertificate(stored.ca.cert);
      if (ca.notAfter.getTime() - now < this.#settings.renewBeforeMs) return `the CA expires on ${ca.notAfter.toISOString()}`;
      if (serving.notAfter.getTime() - now < this.#settings.renewBeforeMs) return `the serving certificate expires on ${serving.notAfter.toISOString()}`;
      // Every CA we make has the same name: only the signature tells which one signed the certificate.
      const caCertificate = new X509Certificate(stored.ca.cert);
      const leaf = new X509Certificate(stored.serving.cert);
      if (!leaf.checkIssued(caCertificate) || !leaf.verify(caCertificate.publicKey)) return 'the serving certificate is not signed by the CA';
      const names = new Set(serving.subjectAltNames);
      const missing = this.hosts.filter((host) => !names.has(`DNS:${host}`));
      if (missing.length > 0) return `the serving certificate does not name ${missing.join(', ')}`;
      if (!splitPem(stored.caBundle).includes(stored.ca.cert.trim())) return 'the CA bundle lacks the CA';
    } catch (error) {
      return (error as Error).message;
    }
    return undefined;
  }

  /** Reads the Secret and makes or renews what it holds until it is usable; every write is conditional, and a writer that loses rereads. */
  async #ensureSecret(): Promise<StoredCertificates> {
    const { namespace, secretName } = this.#settings;
    for (let attempt = 1; ; attempt++) {
      let secret: V1Secret | undefined;
      try {
        secret = await this.#core.readNamespacedSecret({ name: secretName, namespace });
      } catch (error) {
        if (kubeErrorStatus(error) !== 404) throw error;
      }
      const type = secret?.type ?? 'Opaque';
      if (secret !== undefined && type !== SECRET_TYPE) {
        // The API server refuses to change a Secret's type, and the Secret is not ours to delete.
        throw new CertificateError(
          `Secret ${namespace}/${secretName} has type ${type}, not ${SECRET_TYPE} (made by hand or by another tool?): ` +
            `the injector does not overwrite it; delete it (kubectl -n ${namespace} delete secret ${secretName}) and the injector makes a new one`,
        );
      }
      const existing = secret === undefined ? undefined : parseSecret(secret);
      const problem = secret === undefined ? 'no Secret yet' : existing === undefined ? 'the Secret holds no usable certificate' : this.#problem(existing);
      if (existing !== undefined && problem === undefined) return existing;

      const renewed = await this.#renew(existing);
      this.#log.info({ secret: `${namespace}/${secretName}`, reason: problem, attempt }, `making a new serving certificate: ${problem}`);
      try {
        // Create fails if someone created it meanwhile; replace carries the resourceVersion read (even of an unusable Secret).
        const written =
          secret === undefined
            ? await this.#core.createNamespacedSecret({ namespace, body: toSecret(renewed, secretName, namespace, undefined) })
            : await this.#core.replaceNamespacedSecret({ name: secretName, namespace, body: toSecret(renewed, secretName, namespace, secret.metadata?.resourceVersion ?? '0') });
        const stored = parseSecret(written);
        if (stored === undefined) throw new CertificateError('the API server returned a Secret without our certificate');
        this.#log.info(
          { secret: `${namespace}/${secretName}`, notAfter: describeCertificate(stored.serving.cert).notAfter },
          `serving certificate written to Secret ${namespace}/${secretName}`,
        );
        return stored;
      } catch (error) {
        // Another replica created or renewed it first: use theirs.
        if (kubeErrorStatus(error) === 409 && attempt < 5) continue;
        throw error;
      }
    }
  }

  /** A new serving certificate, signed by the stored CA, else the one this replica serves, else a new CA. */
  async #renew(existing: StoredCertificates | undefined): Promise<Omit<StoredCertificates, 'resourceVersion'>> {
    const now = this.#now();
    const ca =
      [existing?.ca, this.#served?.ca].find((candidate): candidate is KeyPair => candidate !== undefined && this.#caUsable(candidate, now)) ??
      (await makeCa({ commonName: `envoy-injector CA (${this.#settings.namespace})`, validDays: this.#settings.caValidityDays }));
    const serving = await makeServingCertificate({ ca, hosts: this.hosts, validDays: this.#settings.servingValidityDays });
    // Keep older CAs that are still valid: replicas may still serve certificates they signed.
    const known = [...splitPem(existing?.caBundle ?? ''), ...splitPem(this.#served?.caBundle ?? '')];
    const older = [...new Set(known)].filter((pem) => pem !== ca.cert.trim() && stillValid(pem, now));
    return { ca, serving, caBundle: [ca.cert.trim(), ...older].join('\n') + '\n' };
  }

  #caUsable(ca: KeyPair, now: Date): boolean {
    try {
      checkKeyPair(ca);
      return describeCertificate(ca.cert).notAfter.getTime() - now.getTime() >= this.#settings.renewBeforeMs;
    } catch {
      return false;
    }
  }

  /**
   * Adds the CAs of `stored` to every webhook's caBundle that lacks one, keeping the CAs already there that are valid.
   * The write is a server-side apply of the caBundles alone, under our field manager: the caBundle is ours, every other field the
   * chart's, so a GitOps tool applying the chart (which renders no caBundle) neither conflicts with nor removes it.
   */
  async #ensureTrusted(stored: StoredCertificates): Promise<void> {
    const wanted = splitPem(stored.caBundle);
    for (let attempt = 1; ; attempt++) {
      const config = await this.#readWebhookConfig();
      // Not installed yet (Helm may create it after the Deployment): nothing calls us, and the watch will see it arrive.
      if (config === undefined) return;
      if (this.#served !== undefined) this.#trusted = trustsCa(config, this.#served.ca.cert);
      const apply = caBundleApply(config, wanted, this.#now());
      if (apply === undefined) {
        this.#sawTrusted(stored.ca.cert);
        return;
      }
      try {
        await this.#admission.patchMutatingWebhookConfiguration(
          { name: this.#settings.webhookConfigName, body: apply.body, fieldManager: CA_BUNDLE_FIELD_MANAGER, force: true },
          setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
        );
      } catch (error) {
        // 409: the configuration changed since we read it (the resourceVersion precondition); read again.
        if (kubeErrorStatus(error) === 409 && attempt < 5) continue;
        throw error;
      }
      this.#log.info({ webhooks: apply.changed }, `caBundle of MutatingWebhookConfiguration ${this.#settings.webhookConfigName} updated`);
      this.#sawTrusted(stored.ca.cert);
      return;
    }
  }

  async #readWebhookConfig(): Promise<V1MutatingWebhookConfiguration | undefined> {
    try {
      return await this.#admission.readMutatingWebhookConfiguration({ name: this.#settings.webhookConfigName });
    } catch (error) {
      if (kubeErrorStatus(error) === 404) return undefined;
      throw error;
    }
  }
}

function parseSecret(secret: V1Secret): StoredCertificates | undefined {
  const data = secret.data ?? {};
  const text = (key: string): string | undefined => (data[key] === undefined ? undefined : Buffer.from(data[key], 'base64').toString('utf8'));
  const [cert, key, caCert, caKey, caBundle] = [text('tls.crt'), text('tls.key'), text('ca.crt'), text('ca.key'), text('ca-bundle.crt')];
  if (cert === undefined || key === undefined || caCert === undefined || caKey === undefined) return undefined;
  return { serving: { cert, key }, ca: { cert: caCert, key: caKey }, caBundle: caBundle ?? caCert, resourceVersion: secret.metadata?.resourceVersion };
}

function toSecret(stored: Omit<StoredCertificates, 'resourceVersion'>, name: string, namespace: string, resourceVersion: string | undefined): V1Secret {
  const encode = (value: string): string => Buffer.from(value).toString('base64');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    type: SECRET_TYPE,
    metadata: {
      name,
      namespace,
      labels: { 'app.kubernetes.io/managed-by': 'envoy-injector', 'app.kubernetes.io/component': 'webhook-certificate' },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    data: {
      'tls.crt': encode(stored.serving.cert),
      'tls.key': encode(stored.serving.key),
      'ca.crt': encode(stored.ca.cert),
      'ca.key': encode(stored.ca.key),
      'ca-bundle.crt': encode(stored.caBundle),
    },
  };
}

function toMaterial(stored: StoredCertificates): TlsMaterial {
  return { cert: stored.serving.cert, key: stored.serving.key, info: checkKeyPair(stored.serving) };
}
