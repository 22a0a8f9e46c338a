import { KubeConfig, VersionApi, type VersionInfo } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { backoffDelayMs, describeKubeError, kubeErrorForLog, type Backoff } from '../api/index.js';

/** Native sidecars (init containers with restartPolicy Always) are on by default from Kubernetes 1.29. */
const NATIVE_SIDECAR_MINOR = 29;

/** `{major: "1", minor: "29+"}` (as EKS and GKE write it) or `gitVersion: v1.29.3-gke.1` → [1, 29]. */
export function parseKubernetesVersion(info: Pick<VersionInfo, 'major' | 'minor' | 'gitVersion'>): [number, number] | undefined {
  const major = Number.parseInt(info.major, 10);
  const minor = Number.parseInt(info.minor, 10);
  if (Number.isInteger(major) && Number.isInteger(minor)) return [major, minor];
  const match = /^v?(\d+)\.(\d+)/.exec(info.gitVersion);
  return match === null ? undefined : [Number(match[1]), Number(match[2])];
}

export function supportsNativeSidecars(version: [number, number]): boolean {
  const [major, minor] = version;
  return major > 1 || (major === 1 && minor >= NATIVE_SIDECAR_MINOR);
}

/**
 * `--native-sidecar auto`: asks the API server its version at start and again
 * whenever a watch reconnects (the control plane may have been upgraded
 * meanwhile), at most once a minute. Until the first answer, classic sidecars.
 */
export class ClusterVersionCheck {
  readonly #api: VersionApi;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #onNativeSidecar: (native: boolean) => void;
  #lastCheckAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #known: string | undefined;
  #stopped = false;
  readonly #minRecheckMs: number;

  constructor(options: {
    kubeConfig: KubeConfig;
    log: Logger;
    backoff: Backoff;
    onNativeSidecar: (native: boolean) => void;
    /** Reconnects closer together than this do not ask again. */
    minRecheckMs?: number;
  }) {
    this.#api = options.kubeConfig.makeApiClient(VersionApi);
    this.#log = options.log;
    this.#backoff = options.backoff;
    this.#onNativeSidecar = options.onNativeSidecar;
    this.#minRecheckMs = options.minRecheckMs ?? 60_000;
  }

  start(): void {
    void this.#check(0);
  }

  /** Called on watch reconnects; resolves when the answer (if asked) is in. */
  recheck(): Promise<void> {
    return Date.now() - this.#lastCheckAt >= this.#minRecheckMs ? this.#check(0) : Promise.resolve();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  async #check(failures: number): Promise<void> {
    this.#lastCheckAt = Date.now();
    try {
      const info = await this.#api.getCode();
      const version = parseKubernetesVersion(info);
      if (version === undefined) throw new Error(`unreadable version ${JSON.stringify(info)}`);
      const native = supportsNativeSidecars(version);
      if (this.#known !== info.gitVersion) {
        this.#known = info.gitVersion;
        this.#log.info({ version: info.gitVersion, nativeSidecar: native }, `Kubernetes ${info.gitVersion}: ${native ? 'native' : 'classic'} sidecars (--native-sidecar auto)`);
      }
      this.#onNativeSidecar(native);
    } catch (error) {
      if (this.#stopped) return;
      const delayMs = backoffDelayMs(this.#backoff, failures);
      this.#log.warn({ err: kubeErrorForLog(error), retryInMs: delayMs }, `cannot read the Kubernetes version (${describeKubeError(error)}); retrying in ${delayMs} ms`);
      this.#timer = setTimeout(() => void this.#check(failures + 1), delayMs);
      this.#timer.unref();
    }
  }
}
