import { X509Certificate, createPrivateKey } from 'node:crypto';
import { isIP } from 'node:net';
import { CertificateError } from '../errors.js';

export interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

export interface CertificateSet {
  readonly ca: KeyPair;
  readonly serving: KeyPair;
}

export interface CertificateInfo {
  readonly subject: string;
  readonly serialNumber: string;
  readonly fingerprint256: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
  readonly subjectAltNames: readonly string[];
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** selfsigned (and the X.509 library under it) loads only when a certificate is made: not on every start. */
async function generate(...args: Parameters<typeof import('selfsigned').generate>): ReturnType<typeof import('selfsigned').generate> {
  // The default export is this CommonJS package's module.exports, under Node and in the bundle alike.
  const { default: selfsigned } = await import('selfsigned');
  return selfsigned.generate(...args);
}
/** Certificates start an hour early so that a node whose clock lags still accepts a new one. */
export const BACKDATE_MS = 60 * 60 * 1000;

/** The hosts every serving certificate answers for, whatever else is asked. */
export const DEFAULT_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '::1'];

/**
 * A CA and a serving certificate signed by it. EC P-256 keys (fast to make,
 * accepted by the API server's Go TLS) and SHA-256 signatures (selfsigned
 * defaults to SHA-1, which no client should accept).
 */
export async function makeCertificates(options: {
  hosts: readonly string[];
  caName?: string;
  caValidDays?: number;
  servingValidDays?: number;
  now?: Date;
}): Promise<CertificateSet> {
  const ca = await makeCa({ commonName: options.caName ?? 'envoy-injector CA', validDays: options.caValidDays ?? 3650, now: options.now });
  const serving = await makeServingCertificate({ ca, hosts: options.hosts, validDays: options.servingValidDays ?? 365, now: options.now });
  return { ca, serving };
}

export async function makeCa(options: { commonName: string; validDays: number; now?: Date | undefined }): Promise<KeyPair> {
  const notBeforeDate = new Date((options.now ?? new Date()).getTime() - BACKDATE_MS);
  const pems = await generate([{ name: 'commonName', value: options.commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate: new Date(notBeforeDate.getTime() + options.validDays * DAY_MS),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** A serving certificate for `hosts` plus localhost, 127.0.0.1 and ::1, signed by `ca`. */
export async function makeServingCertificate(options: {
  ca: KeyPair;
  hosts: readonly string[];
  validDays: number;
  now?: Date | undefined;
}): Promise<KeyPair> {
  const hosts = [...new Set([...options.hosts, ...DEFAULT_HOSTS])];
  const [commonName = 'localhost'] = hosts;
  const notBeforeDate = new Date((options.now ?? new Date()).getTime() - BACKDATE_MS);
  const pems = await generate([{ name: 'commonName', value: commonName }], {
    keyType: 'ec',
    algorithm: 'sha256',
    notBeforeDate,
    notAfterDate: new Date(notBeforeDate.getTime() + options.validDays * DAY_MS),
    ca: { cert: options.ca.cert, key: options.ca.key },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: hosts.map((host) => (isIP(host) ? { type: 7 as const, ip: host } : { type: 2 as const, value: host })) },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

/** Parses a PEM certificate (the first of a chain). */
export function describeCertificate(pem: string): CertificateInfo {
  let certificate: X509Certificate;
  try {
    certificate = new X509Certificate(pem);
  } catch (error) {
    throw new CertificateError(`not a PEM certificate: ${(error as Error).message}`, { cause: error });
  }
  return {
    subject: certificate.subject,
    serialNumber: certificate.serialNumber,
    fingerprint256: certificate.fingerprint256,
    notBefore: new Date(certificate.validFrom),
    notAfter: new Date(certificate.validTo),
    subjectAltNames: (certificate.subjectAltName ?? '').split(', ').filter((name) => name !== ''),
  };
}

/** Throws a CertificateError unless `pair.key` is the private key of `pair.cert`. */
export function checkKeyPair(pair: KeyPair): CertificateInfo {
  const info = describeCertificate(pair.cert);
  let matches: boolean;
  try {
    matches = new X509Certificate(pair.cert).checkPrivateKey(createPrivateKey(pair.key));
  } catch (error) {
    throw new CertificateError(`not a PEM private key: ${(error as Error).message}`, { cause: error });
  }
  if (!matches) throw new CertificateError(`the private key does not belong to the certificate ${info.subject} (serial ${info.serialNumber})`);
  return info;
}
