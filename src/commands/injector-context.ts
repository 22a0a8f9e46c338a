import type { Logger } from 'pino';
import type { Backoff } from '../kube/api/index.js';
import type { CertificateSettings, ClusterConnection, WatchLiveness } from '../kube/index.js';
import type { CommandIo } from './io.js';

/** What the steps of startInjector share besides the settings. */
export interface InjectorContext {
  io: CommandIo;
  env: NodeJS.ProcessEnv;
  log: Logger;
  /** Tests shorten these; production uses the defaults. */
  backoff?: Backoff;
  watchLiveness?: Partial<WatchLiveness>;
  certificateSettings?: Partial<CertificateSettings>;
  now?: () => Date;
  /** How long a direct read of a namespace the watch has not seen may take (1000 ms); tests lengthen it. */
  namespaceLookupTimeoutMs?: number;
}

/** The cluster the injector follows: client-node's side of kube/, loaded only then, and how to reach it. */
export interface Cluster {
  readonly kube: typeof import('../kube/index.js');
  readonly connection: ClusterConnection;
  /** The injector's own namespace: the flag, the context's, else `default`. */
  readonly namespace: string;
}
