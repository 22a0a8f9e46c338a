import { X509Certificate } from 'node:crypto';
import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { CertificateError } from '../../errors.js';
import { checkKeyPair, describeCertificate, makeCa, makeServingCertificate, type KeyPair } from '../../tls/certificates.js';
import { splitPem, stillValid } from './ca-bundle.js';
import { kubeErrorStatus } from '../api/index.js';

const SECRET_TYPE = 'kubernetes.io/tls';

/** What the Secret holds: the serving pair, the CA that signs it, and the bundle the API server must trust. */
export interface StoredCertificates {
  readonly serving: KeyPair;
  readonly ca: KeyPair;
  /** PEM: the current CA first, then older CAs still valid (kept through a rotation). */
  readonly caBundle: string;
  readonly resourceVersion: string | undefined;
}

/** What the Secret and its certificates are made of (a part of CertificateSettings). */
export interface CertificateSecretSettings {
  readonly namespace: string;
  readonly secretName: string;
  readonly serviceName: string;
  readonly clusterDomain: string;
  readonly renewBeforeMs: number;
  readonly caValidityDays: number;
  readonly servingValidityDays: number;
}

/** The hosts the serving certificate must name. */
export function certificateHosts({ serviceName, namespace, clusterDomain }: CertificateSecretSettings): string[] {
  return [`${serviceName}.${namespace}.svc`, `${serviceName}.${namespace}.svc.${clusterDomain}`, `${serviceName}.${namespace}`, serviceName];
}

/**
 * The Secret shared by all replicas: read, checked, and made or renewed when
 * it cannot be served. Every write is conditional (create, or replace with
 * the resourceVersion read), so racing replicas end with one Secret; a
 * replica remaking it reuses the CA it already serves, so a deleted Secret
 * does not multiply CAs.
 */
export class CertificateSecret {
  readonly #core: CoreV1Api;
  readonly #settings: CertificateSecretSettings;
  readonly #log: Logger;
  readonly #now: () => Date;

  constructor(options: { core: CoreV1Api; settings: CertificateSecretSettings; log: Logger; now: () => Date }) {
    this.#core = options.core;
    this.#settings = options.settings;
    this.#log = options.log;
    this.#now = options.now;
  }

  /**
   * Reads the Secret and makes or renews what it holds until it is usable (`served`: what this replica serves, whose CA it
   * may reuse); a writer that loses rereads.
   */
  async ensure(served: StoredCertificates | undefined): Promise<StoredCertificates> {
    const { namespace, secretName } = this.#settings;
    for (let attempt = 1; ; attempt++) {
      const secret = await this.#read();
      const existing = secret === undefined ? undefined : parseSecret(secret);
      const problem = secret === undefined ? 'no Secret yet' : existing === undefined ? 'the Secret holds no usable certificate' : this.#problem(existing);
      if (existing !== undefined && problem === undefined) return existing;

      const renewed = await this.#renew(existing, served);
      this.#log.info({ secret: `${namespace}/${secretName}`, reason: problem, attempt }, `making a new serving certificate: ${problem}`);
      try {
        return await this.#write(renewed, secret);
      } catch (error) {
        // Another replica created or renewed it first: use theirs.
        if (kubeErrorStatus(error) === 409 && attempt < 5) continue;
        throw error;
      }
    }
  }

  /** The Secret, or undefined when there is none; one of another type is refused. */
  async #read(): Promise<V1Secret | undefined> {
    const { namespace, secretName } = this.#settings;
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
    return secret;
  }

  /** Creates the Secret, or replaces `secret` (the one read, even unusable) with its resourceVersion. */
  async #write(renewed: Omit<StoredCertificates, 'resourceVersion'>, secret: V1Secret | undefined): Promise<StoredCertificates> {
    const { namespace, secretName } = this.#settings;
    // Create fails if someone created it meanwhile; replace carries the resourceVersion read.
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
      const missing = certificateHosts(this.#settings).filter((host) => !names.has(`DNS:${host}`));
      if (missing.length > 0) return `the serving certificate does not name ${missing.join(', ')}`;
      if (!splitPem(stored.caBundle).includes(stored.ca.cert.trim())) return 'the CA bundle lacks the CA';
    } catch (error) {
      return (error as Error).message;
    }
    return undefined;
  }

  /** A new serving certificate, signed by the stored CA, else the one this replica serves, else a new CA. */
  async #renew(existing: StoredCertificates | undefined, served: StoredCertificates | undefined): Promise<Omit<StoredCertificates, 'resourceVersion'>> {
    const now = this.#now();
    const ca =
      [existing?.ca, served?.ca].find((candidate): candidate is KeyPair => candidate !== undefined && this.#caUsable(candidate, now)) ??
      (await makeCa({ commonName: `envoy-injector CA (${this.#settings.namespace})`, validDays: this.#settings.caValidityDays }));
    const serving = await makeServingCertificate({ ca, hosts: certificateHosts(this.#settings), validDays: this.#settings.servingValidityDays });
    // Keep older CAs that are still valid: replicas may still serve certificates they signed.
    const known = [...splitPem(existing?.caBundle ?? ''), ...splitPem(served?.caBundle ?? '')];
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
}

export function parseSecret(secret: V1Secret): StoredCertificates | undefined {
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
