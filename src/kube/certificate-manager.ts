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
import type { Backoff } from './backoff.js';
import { ResilientInformer } from './resilient-informer.js';
import { TrackedWatch } from './tracked-watch.js';

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
}

export const DEFAULT_CERTIFICATE_SETTINGS = {
  clusterDomain: 'cluster.local',
  renewBeforeMs: 30 * DAY_MS,
  caValidityDays: 3650,
  servingValidityDays: 365,
  checkIntervalMs: 60 * 60 * 1000,
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
 * Secret shared by all replicas holds a CA and a serving certificate; the
 * first replica makes them (create is atomic, so racing replicas end with one);
 * a renewal is a replace with the resourceVersion read (optimistic concurrency).
 * A new CA enters the webhook's caBundle before any replica serves a
 * certificate it signed, and the old CA stays in the bundle until it expires,
 * so the API server never sees a certificate it does not trust. A caBundle
 * changed by anyone else is put back.
 */
export class CertificateManager {
  readonly #core: CoreV1Api;
  readonly #admission: AdmissionregistrationV1Api;
  readonly #settings: CertificateSettings;
  readonly #log: Logger;
  readonly #now: () => Date;
  readonly #onServing: (material: TlsMaterial) => void;
  readonly #secretInformer: ResilientInformer<V1Secret>;
  readonly #webhookInformer: ResilientInformer<V1MutatingWebhookConfiguration>;
  #current: StoredCertificates | undefined;
  #timer: NodeJS.Timeout | undefined;
  #reconciling: Promise<void> | undefined;

  constructor(options: {
    kubeConfig: KubeConfig;
    settings: CertificateSettings;
    log: Logger;
    backoff: Backoff;
    /** Called with each new serving pair to load (not with the one `start` returns). */
    onServingCertificate: (material: TlsMaterial) => void;
    /** The clock that decides when to renew (tests move it); new certificates always start now. */
    now?: () => Date;
  }) {
    const { kubeConfig, settings, log, backoff } = options;
    this.#core = kubeConfig.makeApiClient(CoreV1Api);
    this.#admission = kubeConfig.makeApiClient(AdmissionregistrationV1Api);
    this.#settings = settings;
    this.#log = log;
    this.#now = options.now ?? (() => new Date());
    this.#onServing = options.onServingCertificate;

    const secretSelector = `metadata.name=${settings.secretName}`;
    let secretInformer: ResilientInformer<V1Secret> | undefined;
    this.#secretInformer = secretInformer = new ResilientInformer<V1Secret>({
      name: `Secret ${settings.namespace}/${settings.secretName}`,
      path: `/api/v1/namespaces/${encodeURIComponent(settings.namespace)}/secrets`,
      watch: new TrackedWatch(kubeConfig, { onConnected: () => secretInformer?.resetBackoff() }),
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
      watch: new TrackedWatch(kubeConfig, { onConnected: () => webhookInformer?.resetBackoff() }),
      list: () => this.#admission.listMutatingWebhookConfiguration({ fieldSelector: webhookSelector }),
      fieldSelector: webhookSelector,
      backoff,
      log,
    });
    this.#secretInformer.on('add', (secret) => this.#onSecret(secret));
    this.#secretInformer.on('update', (secret) => this.#onSecret(secret));
    this.#secretInformer.on('delete', () => this.#scheduleReconcile('the Secret was deleted'));
    this.#webhookInformer.on('add', (config) => void this.#ensureCaBundle(config));
    this.#webhookInformer.on('update', (config) => void this.#ensureCaBundle(config));
  }

  /** The hosts the serving certificate must name. */
  get hosts(): string[] {
    const { serviceName, namespace, clusterDomain } = this.#settings;
    return [`${serviceName}.${namespace}.svc`, `${serviceName}.${namespace}.svc.${clusterDomain}`, `${serviceName}.${namespace}`, serviceName];
  }

  /** Makes sure a usable certificate exists, puts its CA in the webhook, starts following both; returns what to serve. */
  async start(): Promise<TlsMaterial> {
    const stored = await this.#ensureSecret();
    this.#current = stored;
    await this.#ensureCaBundle(undefined);
    this.#secretInformer.start();
    this.#webhookInformer.start();
    this.#timer = setInterval(() => this.#scheduleReconcile('periodic expiry check'), this.#settings.checkIntervalMs);
    this.#timer.unref();
    return toMaterial(stored);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#secretInformer.stop();
    this.#webhookInformer.stop();
  }

  /** Runs one expiry check and caBundle check now (tests, timers and events call this). */
  reconcile(): Promise<void> {
    this.#reconciling ??= (async () => {
      try {
        const stored = await this.#ensureSecret();
        this.#serve(stored);
        await this.#ensureCaBundle(undefined);
      } catch (error) {
        this.#log.error({ err: kubeErrorForLog(error) }, `certificate check failed, will retry: ${describeKubeError(error)}`);
      } finally {
        this.#reconciling = undefined;
      }
    })();
    return this.#reconciling;
  }

  #scheduleReconcile(why: string): void {
    this.#log.debug({ why }, 'checking certificates');
    void this.reconcile();
  }

  #onSecret(secret: V1Secret): void {
    const stored = parseSecret(secret);
    if (stored === undefined || this.#problem(stored) !== undefined) {
      this.#scheduleReconcile('the Secret changed and is not usable');
      return;
    }
    this.#serve(stored);
    void this.#ensureCaBundle(undefined);
  }

  /** Loads `stored` if its serving certificate differs from the one served. */
  #serve(stored: StoredCertificates): void {
    const previous = this.#current;
    this.#current = stored;
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
      if (!new X509Certificate(stored.serving.cert).checkIssued(new X509Certificate(stored.ca.cert))) return 'the serving certificate is not signed by the CA';
      const names = new Set(serving.subjectAltNames);
      const missing = this.hosts.filter((host) => !names.has(`DNS:${host}`));
      if (missing.length > 0) return `the serving certificate does not name ${missing.join(', ')}`;
      if (!splitPem(stored.caBundle).includes(stored.ca.cert.trim())) return 'the CA bundle lacks the CA';
    } catch (error) {
      return (error as Error).message;
    }
    return undefined;
  }

  /** Reads the Secret and makes or renews what it holds until it is usable; concurrent writers lose with 409 and reread. */
  async #ensureSecret(): Promise<StoredCertificates> {
    const { namespace, secretName } = this.#settings;
    for (let attempt = 1; ; attempt++) {
      let existing: StoredCertificates | undefined;
      let secretExists = true;
      try {
        existing = parseSecret(await this.#core.readNamespacedSecret({ name: secretName, namespace }));
      } catch (error) {
        if (kubeErrorStatus(error) !== 404) throw error;
        secretExists = false;
      }
      const problem = existing === undefined ? (secretExists ? 'the Secret holds no usable certificate' : 'no Secret yet') : this.#problem(existing);
      if (existing !== undefined && problem === undefined) return existing;

      const renewed = await this.#renew(existing);
      this.#log.info({ secret: `${namespace}/${secretName}`, reason: problem, attempt }, `making a new serving certificate: ${problem}`);
      if (renewed.ca.cert !== existing?.ca.cert) {
        // The new CA must be trusted before anyone serves a certificate it signed.
        await this.#writeCaBundle(renewed.caBundle);
      }
      const body = toSecret(renewed, secretName, namespace, existing?.resourceVersion);
      try {
        const written = secretExists
          ? await this.#core.replaceNamespacedSecret({ name: secretName, namespace, body })
          : await this.#core.createNamespacedSecret({ namespace, body });
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

  /** A new serving certificate; a new CA too when the old one is missing, broken or expiring. */
  async #renew(existing: StoredCertificates | undefined): Promise<Omit<StoredCertificates, 'resourceVersion'>> {
    const now = this.#now();
    let ca = existing?.ca;
    let caUsable = false;
    if (ca !== undefined) {
      try {
        checkKeyPair(ca);
        caUsable = describeCertificate(ca.cert).notAfter.getTime() - now.getTime() >= this.#settings.renewBeforeMs;
      } catch {
        caUsable = false;
      }
    }
    if (ca === undefined || !caUsable) ca = await makeCa({ commonName: `envoy-injector CA (${this.#settings.namespace})`, validDays: this.#settings.caValidityDays });
    const serving = await makeServingCertificate({ ca, hosts: this.hosts, validDays: this.#settings.servingValidityDays });
    // Keep older CAs that are still valid: replicas may still serve certificates they signed
    // (including the one we serve now, should the Secret have been deleted).
    const known = [...splitPem(existing?.caBundle ?? ''), ...splitPem(this.#current?.caBundle ?? '')];
    const older = [...new Set(known)].filter((pem) => pem !== ca.cert.trim() && stillValid(pem, now));
    return { ca, serving, caBundle: [ca.cert.trim(), ...older].join('\n') + '\n' };
  }

  /** Puts our CA bundle into every webhook that lacks one of our CAs; `config` is a fresh copy when known. */
  async #ensureCaBundle(config: V1MutatingWebhookConfiguration | undefined): Promise<void> {
    const bundle = this.#current?.caBundle;
    if (bundle === undefined) return;
    try {
      const current = config ?? (await this.#readWebhookConfig());
      if (current === undefined) return;
      await this.#patchCaBundle(current, bundle, (existing) => !containsAll(existing, splitPem(bundle)));
    } catch (error) {
      this.#log.error({ err: kubeErrorForLog(error) }, `cannot update the caBundle of ${this.#settings.webhookConfigName}: ${describeKubeError(error)}`);
    }
  }

  /** During a CA rotation: the new bundle goes in before the new certificate is served. */
  async #writeCaBundle(bundle: string): Promise<void> {
    const current = await this.#readWebhookConfig();
    if (current !== undefined) await this.#patchCaBundle(current, bundle, (existing) => existing !== bundle);
  }

  async #readWebhookConfig(): Promise<V1MutatingWebhookConfiguration | undefined> {
    try {
      return await this.#admission.readMutatingWebhookConfiguration({ name: this.#settings.webhookConfigName });
    } catch (error) {
      // Not installed yet (Helm may create it after the Deployment): the watch will see it arrive.
      if (kubeErrorStatus(error) === 404) return undefined;
      throw error;
    }
  }

  async #patchCaBundle(config: V1MutatingWebhookConfiguration, bundle: string, needsPatch: (existing: string) => boolean): Promise<void> {
    const encoded = Buffer.from(bundle).toString('base64');
    const operations = (config.webhooks ?? []).flatMap((webhook, index) => {
      const existing = Buffer.from(String(webhook.clientConfig?.caBundle ?? ''), 'base64').toString('utf8');
      if (!needsPatch(existing)) return [];
      // The test pins the index to the webhook we looked at, should the list change meanwhile.
      return [
        { op: 'test', path: `/webhooks/${index}/name`, value: webhook.name },
        { op: 'add', path: `/webhooks/${index}/clientConfig/caBundle`, value: encoded },
      ];
    });
    if (operations.length === 0) return;
    await this.#admission.patchMutatingWebhookConfiguration(
      { name: this.#settings.webhookConfigName, body: operations },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    this.#log.info({ webhooks: operations.length / 2 }, `caBundle of MutatingWebhookConfiguration ${this.#settings.webhookConfigName} updated`);
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
    type: 'kubernetes.io/tls',
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

function splitPem(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

function containsAll(bundle: string, certificates: readonly string[]): boolean {
  const present = new Set(splitPem(bundle));
  return certificates.every((certificate) => present.has(certificate));
}

function stillValid(pem: string, now: Date): boolean {
  try {
    return describeCertificate(pem).notAfter.getTime() > now.getTime();
  } catch {
    return false;
  }
}
