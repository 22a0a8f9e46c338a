import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  KubeConfig,
  type V1MutatingWebhookConfiguration,
  type V1Secret,
} from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CertificateError } from '../../errors.js';
import { BACKDATE_MS, checkKeyPair, describeCertificate } from '../../tls/certificates.js';
import type { TlsMaterial } from '../../tls/tls-files.js';
import { describeKubeError, kubeErrorForLog, ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';
import { trustsCa } from './ca-bundle.js';
import { CaBundlePatcher } from './ca-bundle-patcher.js';
import { CertificateSecret, certificateHosts, parseSecret, type StoredCertificates } from './certificate-secret.js';
import { RenewalSchedule } from './renewal-schedule.js';

const DAY_MS = 24 * 60 * 60 * 1000;


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
 *
 * The parts: the Secret (certificate-secret.ts), the caBundle
 * (ca-bundle-patcher.ts), when checks run (renewal-schedule.ts); this class
 * follows both objects, decides what is served and says what is wrong.
 */
export class CertificateManager {
  readonly #settings: CertificateSettings;
  readonly #log: Logger;
  readonly #onServing: (material: TlsMaterial) => void;
  readonly #secret: CertificateSecret;
  readonly #caBundle: CaBundlePatcher;
  readonly #schedule: RenewalSchedule;
  readonly #secretInformer: ResilientInformer<V1Secret>;
  readonly #webhookInformer: ResilientInformer<V1MutatingWebhookConfiguration>;
  /** What is served: only ever a certificate whose CA the caBundle trusted. */
  #served: StoredCertificates | undefined;
  /** Whether every webhook's caBundle holds the served CA (also true while the configuration does not exist). */
  #trusted = false;
  /** Why the last check failed; undefined after a good one. */
  #lastError: string | undefined;

  constructor(options: {
    kubeConfig: KubeConfig;
    settings: CertificateSettings;
    log: Logger;
    backoff: Backoff;
    watchLiveness?: Partial<WatchLiveness> | undefined;
    /** Called with each serving pair to load, once its CA is trusted. */
    onServingCertificate: (material: TlsMaterial) => void;
    /** The clock that decides when to renew (tests move it); new certificates always start now. */
    now?: () => Date;
  }) {
    const { kubeConfig, settings, log, backoff } = options;
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    const now = options.now ?? (() => new Date());
    this.#settings = settings;
    this.#log = log;
    this.#onServing = options.onServingCertificate;
    this.#secret = new CertificateSecret({ core, settings, log, now });
    this.#caBundle = new CaBundlePatcher({ admission, webhookConfigName: settings.webhookConfigName, settleMs: settings.caBundleSettleMs, log, now });
    this.#schedule = new RenewalSchedule({
      check: () => this.#check(),
      intervalMs: settings.checkIntervalMs,
      backoff,
      log,
      onFailure: (error, retryInMs, failures) => {
        this.#lastError = error instanceof CertificateError ? error.message : describeKubeError(error);
        log.error({ err: kubeErrorForLog(error), retryInMs, failures }, `certificate check failed: ${this.#lastError}; retrying in ${retryInMs} ms`);
      },
    });
    this.#secretInformer = this.#followSecret(kubeConfig, core, options.watchLiveness, backoff);
    this.#webhookInformer = this.#followWebhookConfig(kubeConfig, admission, options.watchLiveness, backoff);
  }

  #followSecret(kubeConfig: KubeConfig, core: CoreV1Api, watchLiveness: Partial<WatchLiveness> | undefined, backoff: Backoff): ResilientInformer<V1Secret> {
    const { namespace, secretName } = this.#settings;
    const selector = `metadata.name=${secretName}`;
    const informer: ResilientInformer<V1Secret> = new ResilientInformer<V1Secret>({
      name: `Secret ${namespace}/${secretName}`,
      path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/secrets`,
      watch: new TrackedWatch(kubeConfig, { backoff, liveness: watchLiveness, onConnected: () => informer.resetBackoff() }),
      list: async () => {
        const secrets = await core.listNamespacedSecret({ namespace, fieldSelector: selector });
        // Gone before the first list (or between relists): no delete event will say so.
        if (secrets.items.length === 0) this.#schedule.request('the Secret is missing');
        return secrets;
      },
      fieldSelector: selector,
      backoff,
      log: this.#log,
    });
    informer.on('add', (secret) => this.#onSecret(secret));
    informer.on('update', (secret) => this.#onSecret(secret));
    informer.on('delete', () => this.#schedule.request('the Secret was deleted'));
    return informer;
  }

  #followWebhookConfig(kubeConfig: KubeConfig, admission: AdmissionregistrationV1Api, watchLiveness: Partial<WatchLiveness> | undefined, backoff: Backoff): ResilientInformer<V1MutatingWebhookConfiguration> {
    const selector = `metadata.name=${this.#settings.webhookConfigName}`;
    const informer: ResilientInformer<V1MutatingWebhookConfiguration> = new ResilientInformer<V1MutatingWebhookConfiguration>({
      name: `MutatingWebhookConfiguration ${this.#settings.webhookConfigName}`,
      path: '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations',
      watch: new TrackedWatch(kubeConfig, { backoff, liveness: watchLiveness, onConnected: () => informer.resetBackoff() }),
      list: () => admission.listMutatingWebhookConfiguration({ fieldSelector: selector }),
      fieldSelector: selector,
      backoff,
      log: this.#log,
    });
    informer.on('add', (config) => this.#onWebhookConfig(config));
    informer.on('update', (config) => this.#onWebhookConfig(config));
    return informer;
  }

  /** The hosts the serving certificate must name. */
  get hosts(): string[] {
    return certificateHosts(this.#settings);
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
    this.#schedule.start();
    this.#secretInformer.start();
    this.#webhookInformer.start();
    await this.reconcile();
  }

  stop(): void {
    this.#schedule.stop();
    this.#secretInformer.stop();
    this.#webhookInformer.stop();
  }

  /** One check of the Secret and the caBundle, now; a check asked for while one runs runs again after it. */
  reconcile(): Promise<void> {
    return this.#schedule.run();
  }

  /** Store the Secret, have every webhook's caBundle trust its CA, then serve it. */
  async #check(): Promise<void> {
    const stored = await this.#secret.ensure(this.#served);
    await this.#caBundle.ensureTrusted(stored.caBundle, stored.ca.cert, (config) => {
      if (this.#served !== undefined) this.#trusted = trustsCa(config, this.#served.ca.cert);
    });
    const switchingCa = this.#served !== undefined && this.#served.ca.cert !== stored.ca.cert;
    // Whoever put the new CA in the bundle (this replica or another), the API servers' copies lag behind it.
    if (switchingCa) await this.#caBundle.settle(stored.ca.cert);
    this.#serve(stored);
    this.#trusted = true;
    this.#lastError = undefined;
  }

  #onSecret(secret: V1Secret): void {
    const stored = parseSecret(secret);
    if (stored !== undefined && stored.serving.cert === this.#served?.serving.cert && stored.caBundle === this.#served.caBundle) return;
    this.#schedule.request('the Secret changed');
  }

  #onWebhookConfig(config: V1MutatingWebhookConfiguration): void {
    if (this.#served === undefined) return;
    if (trustsCa(config, this.#served.ca.cert)) return;
    this.#trusted = false;
    this.#schedule.request('the caBundle lacks the serving CA');
  }

  /** Loads `stored` if its serving certificate differs from the one served. */
  #serve(stored: StoredCertificates): void {
    const previous = this.#served;
    this.#served = stored;
    if (previous?.serving.cert === stored.serving.cert && previous.caBundle === stored.caBundle) return;
    this.#onServing(toMaterial(stored));
  }
}

function toMaterial(stored: StoredCertificates): TlsMaterial {
  return { cert: stored.serving.cert, key: stored.serving.key, info: checkKeyPair(stored.serving) };
}
