import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { PolicyLimitError } from '../errors.js';
import type { TemplateSet } from '../injection/index.js';
import {
  compilePolicy,
  POLICY_GENERATION_ANNOTATION,
  POLICY_HASH_ANNOTATION,
  templatesFingerprint,
  type PolicyOwner,
  type PolicySettings,
} from '../policy/compile-policy.js';
import { choosePolicyApiVersion, POLICY_API_GROUP, type PolicyApiPreference, type PolicyApiVersion } from '../policy/policy-api-version.js';
import { backoffDelayMs, describeKubeError, kubeErrorForLog, kubeErrorStatus, kubeJson, type Backoff } from './api/index.js';
import { servedPolicyApiVersions } from './policy-discovery.js';

/** The field manager of every apply: the objects' fields are ours, and a change by hand is overwritten (force). */
export const POLICY_FIELD_MANAGER = 'envoy-injector';
const APPLY = 'application/apply-patch+yaml';

export interface PolicySyncOptions {
  readonly kubeConfig: KubeConfig;
  /** What shapes the objects, but their API version and owner (chosen here); `generation` orders replicas of different releases. */
  readonly settings: Omit<PolicySettings, 'apiVersion' | 'owner'>;
  /** `auto`: v1 where served, else v1beta1; a version: that one while it is served. */
  readonly apiVersion?: PolicyApiPreference;
  /** A ClusterRole whose deletion deletes the policy and binding (the chart's own): they go with the release. */
  readonly ownerClusterRole?: string | undefined;
  readonly backoff: Backoff;
  readonly log: Logger;
  /** How often the served versions and the objects in the cluster are checked again. */
  readonly resyncMs?: number;
}

/** What was last applied, and through which version. */
interface Applied {
  readonly fingerprint: string;
  /** POLICY_HASH_ANNOTATION of what was applied: templates and settings. */
  readonly hash: string;
  readonly version: PolicyApiVersion;
}

interface PolicyMetadata {
  metadata?: { annotations?: Record<string, string> };
}

/**
 * Policy mode's controller: keeps the MutatingAdmissionPolicy and its binding
 * equal to the compilation of the latest valid template set, by server-side
 * apply. Only valid sets reach it (the template store keeps the last good
 * one), so an invalid ConfigMap change leaves the last good policy in place.
 *
 * - Applies run one at a time; a newer set replaces one still waiting; a
 *   failed apply is retried with backoff until it succeeds or a newer set arrives.
 * - The API version is the one the cluster serves (discovery), checked again
 *   every `resyncMs` and after a 404: when an upgrade of the API server
 *   starts serving v1 (or stops serving v1beta1), both objects are applied
 *   again through it. The objects in etcd are the same resource in either
 *   version, so the API server keeps enforcing them meanwhile: no gap.
 * - Every `resyncMs` the objects are read back: one deleted or changed by
 *   someone else is applied again, and until then the controller is not in sync.
 * - A policy of a higher generation (a newer release's replica, during a
 *   rolling upgrade) is never overwritten: this controller stands by until it
 *   is gone; the newer one applies changes meanwhile.
 * - Both carry an ownerReference to `ownerClusterRole`, so that deleting the
 *   release deletes them through the garbage collector, whether this process
 *   runs then or not. They are never applied without that owner when one is
 *   configured: without it, an uninstall would leave them behind.
 */
export class PolicySync {
  readonly #kubeConfig: KubeConfig;
  readonly #settings: PolicySyncOptions['settings'];
  readonly #preference: PolicyApiPreference;
  readonly #ownerClusterRole: string | undefined;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  readonly #resyncMs: number;
  readonly #name: string;
  /** The latest set; undefined until the first. */
  #desired: TemplateSet | undefined;
  /** An apply of #desired is due. */
  #due = false;
  #running = false;
  #stopped = false;
  #wake: (() => void) | undefined;
  #resyncTimer: NodeJS.Timeout | undefined;
  /** The version in use; undefined until discovered, or after a 404. */
  #version: PolicyApiVersion | undefined;
  #applied: Applied | undefined;
  /** The JSON of the binding last applied. */
  #appliedBinding: string | undefined;
  /** The owner as last read (its uid); read again after a failure or a drift. */
  #owner: PolicyOwner | undefined;
  /** Why the policy is not applied, when it is not: for /readyz. */
  #problem: string | undefined;
  /** The latest templates compile to a policy the API server would refuse. */
  #refused = false;
  /** The generation of a newer controller's policy found in the cluster, while there is one. */
  #supersededBy: number | undefined;
  readonly #generation: number;

  constructor(options: PolicySyncOptions) {
    this.#kubeConfig = options.kubeConfig;
    this.#settings = options.settings;
    this.#preference = options.apiVersion ?? 'auto';
    this.#ownerClusterRole = options.ownerClusterRole;
    this.#backoff = options.backoff;
    this.#log = options.log;
    this.#resyncMs = options.resyncMs ?? 10_000;
    this.#name = options.settings.name ?? 'envoy-injector';
    this.#generation = options.settings.generation ?? 0;
  }

  /** Compiles and applies `templates` (soon, in order, the latest wins). */
  apply(templates: TemplateSet): void {
    this.#desired = templates;
    this.#schedule();
  }

  /** True when the objects in the cluster were compiled from `templates`, through the version in use. */
  isInSync(templates: TemplateSet | undefined): boolean {
    return templates !== undefined && this.#applied !== undefined && this.#applied.fingerprint === templatesFingerprint(templates) && this.#applied.version === this.#version;
  }

  /** The API version in use (undefined until known). */
  get apiVersion(): PolicyApiVersion | undefined {
    return this.#version;
  }

  /** While a controller of a higher generation owns the policy: its generation (this one stands by). */
  get supersededBy(): number | undefined {
    return this.#supersededBy;
  }

  /** True while the latest templates compile to a policy the API server would refuse (a CEL limit). */
  get refused(): boolean {
    return this.#refused;
  }

  /** Why the objects are not in sync, when the controller knows (a version not served, an owner missing, a failed apply, a template past a CEL limit). */
  get problem(): string | undefined {
    return this.#problem;
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#resyncTimer);
    this.#wake?.();
  }

  #schedule(): void {
    this.#due = true;
    this.#wake?.();
    if (!this.#running && !this.#stopped) void this.#run();
  }

  async #run(): Promise<void> {
    this.#running = true;
    clearTimeout(this.#resyncTimer);
    let failures = 0;
    while (this.#due && this.#desired !== undefined && !this.#stopped) {
      this.#due = false;
      const templates = this.#desired;
      try {
        await this.#applyOnce(templates);
        failures = 0;
        this.#problem = undefined;
        this.#refused = false;
      } catch (error) {
        if (error instanceof Superseded) {
          if (this.#supersededBy !== error.generation) {
            this.#log.info({ policy: this.#name, generation: this.#generation, newer: error.generation }, `MutatingAdmissionPolicy ${this.#name} was made by a newer release (generation ${error.generation}, this one is ${this.#generation}): standing by`);
          }
          this.#supersededBy = error.generation;
          this.#problem = undefined;
          continue;
        }
        if (error instanceof PolicyLimitError) {
          // Retrying cannot help: wait for other templates. The policy in the cluster stays the last good one.
          this.#refused = true;
          this.#problem = `the templates compile to a MutatingAdmissionPolicy the API server would refuse, so the last good policy stays: ${error.message}`;
          this.#log.error({ err: error, policy: this.#name }, this.#problem);
          continue;
        }
        // A 404: the version in use is no longer served (an upgraded API server); discover again.
        if (kubeErrorStatus(error) === 404) this.#version = undefined;
        this.#forget();
        const delayMs = backoffDelayMs(this.#backoff, failures++);
        this.#problem = error instanceof PolicyNotAppliable ? error.message : `applying MutatingAdmissionPolicy ${this.#name} failed (${describeKubeError(error)})`;
        this.#log.error({ err: kubeErrorForLog(error), policy: this.#name, retryInMs: delayMs }, `${this.#problem}; the objects in the cluster stay as they were; retrying in ${delayMs} ms`);
        // Retry this set unless a newer one arrives meanwhile (which sets #due itself).
        this.#due = true;
        await this.#sleep(delayMs);
      }
    }
    this.#running = false;
    if (!this.#stopped) {
      this.#resyncTimer = setTimeout(() => void this.#resync(), this.#resyncMs);
      this.#resyncTimer.unref();
    }
  }

  async #applyOnce(templates: TemplateSet): Promise<void> {
    const version = this.#version ?? (await this.#discover());
    this.#owner ??= await this.#readOwner();
    const { policy, binding } = compilePolicy(templates, { ...this.#settings, apiVersion: version, ...(this.#owner === undefined ? {} : { owner: this.#owner }) });
    const newer = generationOf(await this.#read(version, 'mutatingadmissionpolicies'));
    if (newer > this.#generation) throw new Superseded(newer);
    this.#supersededBy = undefined;
    await this.#serverSideApply(version, 'mutatingadmissionpolicies', policy);
    // The binding changes with the settings, the version and the owner, not with the templates: a template change is one call.
    const bindingJson = JSON.stringify(binding);
    if (bindingJson !== this.#appliedBinding) {
      await this.#serverSideApply(version, 'mutatingadmissionpolicybindings', binding);
      this.#appliedBinding = bindingJson;
    }
    const moved = this.#applied !== undefined && this.#applied.version !== version;
    const applied = { fingerprint: templatesFingerprint(templates), hash: hashOf(policy) ?? '', version };
    this.#applied = applied;
    this.#log.info(
      { policy: this.#name, templates: applied.fingerprint, hash: applied.hash, apiVersion: `${POLICY_API_GROUP}/${version}` },
      `MutatingAdmissionPolicy ${this.#name} and its binding applied (${POLICY_API_GROUP}/${version}${moved ? ', moved from the version served before' : ''})`,
    );
  }

  async #serverSideApply(version: PolicyApiVersion, resource: string, object: unknown): Promise<void> {
    await kubeJson(this.#kubeConfig, {
      method: 'PATCH',
      path: `${this.#collection(version, resource)}/${this.#name}?fieldManager=${POLICY_FIELD_MANAGER}&force=true`,
      body: object,
      contentType: APPLY,
    });
  }

  /** The version to use, from discovery; throws when the cluster serves none. */
  async #discover(): Promise<PolicyApiVersion> {
    const served = await servedPolicyApiVersions(this.#kubeConfig);
    const version = choosePolicyApiVersion(served, this.#preference);
    if (version === undefined) {
      throw new PolicyNotAppliable(
        `the API server serves no MutatingAdmissionPolicy API: Kubernetes 1.36+ serves ${POLICY_API_GROUP}/v1 by default; 1.34-1.35 serve v1beta1 only with --feature-gates=MutatingAdmissionPolicy=true --runtime-config=${POLICY_API_GROUP}/v1beta1=true; older clusters need the webhook (mode: webhook)`,
      );
    }
    if (version !== this.#version) {
      const note = this.#preference !== 'auto' && version !== this.#preference ? ` (${this.#preference} was asked for, but is not served)` : '';
      this.#log.info({ served, apiVersion: `${POLICY_API_GROUP}/${version}` }, `MutatingAdmissionPolicy API: using ${POLICY_API_GROUP}/${version}${note}`);
    }
    this.#version = version;
    return version;
  }

  async #readOwner(): Promise<PolicyOwner | undefined> {
    const name = this.#ownerClusterRole;
    if (name === undefined) return undefined;
    try {
      const role = (await kubeJson(this.#kubeConfig, { method: 'GET', path: `/apis/rbac.authorization.k8s.io/v1/clusterroles/${encodeURIComponent(name)}` })) as { metadata?: { uid?: unknown } };
      const uid = role.metadata?.uid;
      if (typeof uid !== 'string' || uid === '') throw new Error(`ClusterRole ${name} has no uid`);
      return { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name, uid };
    } catch (error) {
      if (kubeErrorStatus(error) === 404) {
        throw new PolicyNotAppliable(`ClusterRole ${name}, the owner of the policy and its binding, does not exist (the release is being uninstalled, or --policy-owner names the wrong one); nothing is applied without it`);
      }
      throw error;
    }
  }

  /**
   * The periodic check: the version the cluster serves now, and the objects
   * as they are. Anything off makes the next apply due.
   */
  async #resync(): Promise<void> {
    if (this.#stopped || this.#running || this.#desired === undefined) return;
    const drift = await this.#drift().catch((error: unknown) => {
      this.#log.warn({ err: kubeErrorForLog(error), policy: this.#name }, `checking MutatingAdmissionPolicy ${this.#name} failed (${describeKubeError(error)}); checking again in ${this.#resyncMs} ms`);
      return undefined;
    });
    if (this.#stopped) return;
    if (drift === undefined) {
      this.#resyncTimer = setTimeout(() => void this.#resync(), this.#resyncMs);
      this.#resyncTimer.unref();
      return;
    }
    this.#log.warn({ policy: this.#name }, `${drift}: applying again`);
    this.#applied = undefined;
    this.#forget();
    this.#schedule();
  }

  /** What differs from what was applied, in words; undefined when nothing does. */
  async #drift(): Promise<string | undefined> {
    const before = this.#version;
    const version = await this.#discover();
    if (before !== version || this.#applied?.version !== version) return `the API server now serves ${POLICY_API_GROUP}/${version}`;
    const [policy, binding] = await Promise.all([this.#read(version, 'mutatingadmissionpolicies'), this.#read(version, 'mutatingadmissionpolicybindings')]);
    const generation = generationOf(policy);
    if (generation > this.#generation) {
      // A newer release's controller owns it now: nothing to put back.
      this.#supersededBy = generation;
      return undefined;
    }
    if (this.#supersededBy !== undefined) return `the newer release's controller (generation ${this.#supersededBy}) is gone`;
    if (policy === undefined) return `MutatingAdmissionPolicy ${this.#name} is gone`;
    if (binding === undefined) return `MutatingAdmissionPolicyBinding ${this.#name} is gone`;
    if (hashOf(policy) !== this.#applied?.hash) return `MutatingAdmissionPolicy ${this.#name} differs from what this controller applied (changed by hand, or by a replica with other settings)`;
    return undefined;
  }

  /** The object as the API server has it; undefined when absent. */
  async #read(version: PolicyApiVersion, resource: string): Promise<PolicyMetadata | undefined> {
    try {
      return (await kubeJson(this.#kubeConfig, { method: 'GET', path: `${this.#collection(version, resource)}/${this.#name}` })) as PolicyMetadata;
    } catch (error) {
      if (kubeErrorStatus(error) === 404) return undefined;
      throw error;
    }
  }

  /** After a failure or a drift, nothing applied before is taken for granted. */
  #forget(): void {
    this.#appliedBinding = undefined;
    this.#owner = undefined;
  }

  #collection(version: PolicyApiVersion, resource: string): string {
    return `/apis/${POLICY_API_GROUP}/${version}/${resource}`;
  }

  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    this.#wake = undefined;
  }
}

/** A reason the objects cannot be applied now, already in words for the log and /readyz. */
class PolicyNotAppliable extends Error {}

/** The policy in the cluster is of a higher generation than this controller's. */
class Superseded extends Error {
  readonly generation: number;
  constructor(generation: number) {
    super(`superseded by generation ${generation}`);
    this.generation = generation;
  }
}

function generationOf(object: PolicyMetadata | undefined): number {
  const value = Number(object?.metadata?.annotations?.[POLICY_GENERATION_ANNOTATION] ?? 0);
  return Number.isSafeInteger(value) ? value : 0;
}

function hashOf(object: unknown): string | undefined {
  return (object as PolicyMetadata | undefined)?.metadata?.annotations?.[POLICY_HASH_ANNOTATION];
}
