import { createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { SecureContextOptions } from 'node:tls';
import { CertificateError } from '../errors.js';
import { checkKeyPair, type CertificateInfo } from './certificates.js';

export interface TlsFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** When set, clients must present a certificate signed by this CA. */
  readonly clientCaFile?: string | undefined;
}

/** A serving certificate and key, checked to belong together. */
export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  readonly clientCa?: string | undefined;
  readonly info: CertificateInfo;
}

/** Reads and checks the files; throws a CertificateError naming the file on any problem. */
export async function readTlsFiles(files: TlsFiles): Promise<TlsMaterial> {
  const [cert, key, clientCa] = await Promise.all([
    readPem(files.certFile),
    readPem(files.keyFile),
    files.clientCaFile === undefined ? undefined : readPem(files.clientCaFile),
  ]);
  return checkTlsMaterial(files, { cert, key, clientCa });
}

/** A PEM file's text; a CertificateError naming the file when it cannot be read. */
export async function readPem(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new CertificateError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, { cause: error });
  }
}

/** A client CA file's text, checked to hold certificates: an empty CA must never silently replace the one meant. */
export async function readClientCa(path: string): Promise<string> {
  const pem = await readPem(path);
  checkClientCa(path, pem);
  return pem;
}

function checkClientCa(path: string, pem: string): void {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new CertificateError(`${path}: no PEM certificate in it (an empty or wrong file?); expected the CA that signs client certificates`);
  blocks.forEach((block, index) => {
    try {
      new X509Certificate(block);
    } catch (error) {
      throw new CertificateError(`${path}: certificate ${index + 1} is unreadable: ${(error as Error).message}`, { cause: error });
    }
  });
}

function checkTlsMaterial(files: TlsFiles, contents: Omit<TlsMaterial, 'info'>): TlsMaterial {
  if (files.clientCaFile !== undefined) checkClientCa(files.clientCaFile, contents.clientCa ?? '');
  try {
    return { ...contents, info: checkKeyPair(contents) };
  } catch (error) {
    throw new CertificateError(`${files.certFile} and ${files.keyFile}: ${(error as Error).message}`, { cause: error });
  }
}

/** TLS 1.2 is the floor: the API server speaks 1.2 and 1.3. */
export function secureContextOptions(material: Omit<TlsMaterial, 'info'>): SecureContextOptions {
  return {
    cert: material.cert,
    key: material.key,
    minVersion: 'TLSv1.2',
    ...(material.clientCa === undefined ? {} : { ca: material.clientCa }),
  };
}

/**
 * Polls the files and hands each new, valid pair to `onChange`. Polling, not
 * fs.watch: a Kubernetes Secret volume swaps a `..data` symlink, which
 * watches on the old files never see. A broken pair is reported once per
 * content and the old one stays in use.
 */
export class TlsFileWatcher {
  readonly #files: TlsFiles;
  readonly #intervalMs: number;
  readonly #onChange: (material: TlsMaterial) => void;
  readonly #onError: (error: Error) => void;
  #lastSeen: string;
  #timer: NodeJS.Timeout | undefined;
  #polling = false;

  constructor(options: {
    files: TlsFiles;
    initial: TlsMaterial;
    intervalMs: number;
    onChange: (material: TlsMaterial) => void;
    onError: (error: Error) => void;
  }) {
    this.#files = options.files;
    this.#intervalMs = options.intervalMs;
    this.#onChange = options.onChange;
    this.#onError = options.onError;
    this.#lastSeen = fingerprint(options.initial);
  }

  start(): void {
    this.#timer ??= setInterval(() => void this.poll(), this.#intervalMs).unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** One check; public so tests need not wait for the timer. */
  async poll(): Promise<void> {
    if (this.#polling) return;
    this.#polling = true;
    try {
      // A missing file (mid-swap) reads as empty and fails the check below, once.
      const [cert = '', key = '', clientCa] = await Promise.all(
        [this.#files.certFile, this.#files.keyFile, this.#files.clientCaFile].map((path) =>
          path === undefined ? undefined : readFile(path, 'utf8').catch(() => ''),
        ),
      );
      const contents = { cert, key, clientCa };
      const seen = fingerprint(contents);
      if (seen === this.#lastSeen) return;
      this.#lastSeen = seen;
      let material: TlsMaterial;
      try {
        material = checkTlsMaterial(this.#files, contents);
      } catch (error) {
        this.#onError(error as Error);
        return;
      }
      this.#onChange(material);
    } finally {
      this.#polling = false;
    }
  }
}

function fingerprint(material: { cert: string; key: string; clientCa?: string | undefined }): string {
  return createHash('sha256').update(material.cert).update('\0').update(material.key).update('\0').update(material.clientCa ?? '').digest('hex');
}
