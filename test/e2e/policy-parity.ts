import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseTemplateFile, type JsonObject, type OverrideName } from '../../src/injection/index.js';
import { compilePolicy, type CompiledPolicy } from '../../src/policy/compile-policy.js';
import type { PolicyApiVersion } from '../../src/policy/policy-api-version.js';
import { makeCa, makeServingCertificate } from '../../src/tls/certificates.js';
import { ROOT } from '../helpers/fixtures.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { trackChild } from './child-processes.js';
import { parseSelectorsOption } from '../../src/commands/options.js';
import { NAMESPACE_METADATA, NamespaceKind, PARITY_SELECTORS, type ParityCase } from './policy-parity-cases.js';

/**
 * Parity of the two modes on a real API server: each case's Pod is created
 * once in a namespace served by the webhook (a url clientConfig to an
 * injector process on 127.0.0.1) and once in a namespace of the same kind
 * served by the compiled policy; the stored Pods must be equal but for
 * names, uids, resource versions and timestamps.
 */

/** How to reach the API server as an admin (a static token), and a kubeconfig file for the injector. */
export interface ApiAccess {
  readonly server: string;
  readonly ca: string;
  readonly adminToken: string;
  readonly kubeconfigPath: string;
}

export const PARITY_TEMPLATES = 'test/e2e/policy-parity-templates.yaml';
const ALLOWED: readonly OverrideName[] = ['proxy-image', 'proxy-cpu', 'proxy-memory', 'proxy-cpu-limit', 'proxy-memory-limit'];
const PATH_LABEL = 'parity.envoy-injector.io/path';
export const Path = { webhook: 'webhook', policy: 'policy' } as const;
export type Path = (typeof Path)[keyof typeof Path];

export interface ApiResponse {
  readonly status: number;
  readonly body: JsonObject;
  /** The Warning headers (admission warnings among them). */
  readonly warnings: readonly string[];
}

/** The text of a Warning header: they are `299 - "text"` with the text's quotes escaped. */
export function warningText(header: string): string {
  return header.replace(/^299 - "|"$/g, '').replaceAll('\\"', '"');
}

/** One call to the API server with raw JSON: no typed client may drop a field of the stored Pods. */
export function kubeCall(access: ApiAccess, method: string, path: string, body?: unknown): Promise<ApiResponse> {
  const url = new URL(path, access.server);
  const payload = body === undefined ? undefined : JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const call = request(
      url,
      {
        method,
        ca: access.ca,
        headers: {
          authorization: `Bearer ${access.adminToken}`,
          accept: 'application/json',
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
        timeout: 30_000,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            const warning = response.headers['warning'];
            resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) as JsonObject, warnings: warning === undefined ? [] : [warning].flat() });
          } catch {
            reject(new Error(`${method} ${path}: ${response.statusCode} and a body that is not JSON: ${text.slice(0, 200)}`));
          }
        });
      },
    );
    call.on('timeout', () => call.destroy(new Error(`${method} ${path}: no answer within 30 s`)));
    call.on('error', reject);
    call.end(payload);
  });
}

async function mustCall(access: ApiAccess, method: string, path: string, body?: unknown): Promise<JsonObject> {
  const response = await kubeCall(access, method, path, body);
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${String(response.body['message'] ?? '')}`);
  return response.body;
}

export interface ParityDifference {
  readonly title: string;
  readonly webhook: unknown;
  readonly policy: unknown;
}

export interface ParityReport {
  /** Cases compared (each created twice). */
  readonly compared: number;
  /** How many of them the webhook injected, and the policy. */
  readonly injected: number;
  readonly policyInjected: number;
  /** Refused by the API server on the webhook path (the policy path must refuse them alike). */
  readonly refused: number;
  /** Pods that set spec.resources injected (their values padded) by the webhook, compared with the policy's like every other. */
  readonly podResourcesPadded: number;
  readonly differences: readonly ParityDifference[];
}

/** Everything one run created, to remove it whatever happens. */
export class ParityRun {
  readonly id = randomBytes(3).toString('hex');
  readonly injectorNamespace = `parity-system-${this.id}`;
  readonly namespaces: Readonly<Record<Path, Readonly<Record<NamespaceKind, string>>>>;
  readonly policy: CompiledPolicy;
  #injector: ServerProcess | undefined;
  #dir: string | undefined;
  readonly #access: ApiAccess;
  readonly #webhookName: string;

  readonly #collection: string;

  readonly #templateFile: string;

  /**
   * APIVERSION: the MutatingAdmissionPolicy version the cluster serves (the
   * objects are created through it). TEMPLATEFILE: the templates of both
   * paths (default: the parity templates).
   */
  constructor(access: ApiAccess, apiVersion: PolicyApiVersion, templateFile = join(ROOT, PARITY_TEMPLATES)) {
    this.#templateFile = templateFile;
    this.#access = access;
    this.#collection = `/apis/admissionregistration.k8s.io/${apiVersion}`;
    const names = (path: Path): Record<NamespaceKind, string> =>
      Object.fromEntries(Object.values(NamespaceKind).map((kind) => [kind, `${path}-${kind}-${this.id}`])) as Record<NamespaceKind, string>;
    this.namespaces = { webhook: names(Path.webhook), policy: names(Path.policy) };
    this.#webhookName = `parity-${this.id}`;
    const templates = parseTemplateFile(readFileSync(templateFile, 'utf8'));
    this.policy = compilePolicy(templates, {
      name: `parity-${this.id}`,
      injectorNamespace: this.injectorNamespace,
      excludedNamespaces: this.#excluded(),
      nativeSidecar: false,
      allowedOverrides: ALLOWED,
      neverInjectSelectors: parseSelectorsOption('never', JSON.stringify(PARITY_SELECTORS.never)),
      alwaysInjectSelectors: parseSelectorsOption('always', JSON.stringify(PARITY_SELECTORS.always)),
      apiVersion,
    });
  }

  #excluded(): string[] {
    return [this.namespaces.webhook.excluded, this.namespaces.policy.excluded];
  }

  /** Namespaces, the injector, its webhook configuration and the policy; resolves when both paths inject. */
  async start(): Promise<void> {
    for (const path of [Path.webhook, Path.policy]) {
      for (const kind of Object.values(NamespaceKind)) {
        const { labels, annotations } = NAMESPACE_METADATA[kind];
        await this.#createNamespace(this.namespaces[path][kind], { ...labels, [PATH_LABEL]: `${path}-${this.id}` }, annotations);
      }
    }
    await this.#createNamespace(this.injectorNamespace, {});

    this.#dir = await mkdtemp(join(tmpdir(), 'ei-parity-'));
    const ca = await makeCa({ commonName: 'parity-ca', validDays: 1 });
    const serving = await makeServingCertificate({ ca, hosts: ['127.0.0.1'], validDays: 1 });
    const cert = join(this.#dir, 'tls.crt');
    const key = join(this.#dir, 'tls.key');
    await Promise.all([writeFile(cert, serving.cert), writeFile(key, serving.key, { mode: 0o600 })]);
    this.#injector = await spawnServer([
      '--kubeconfig', this.#access.kubeconfigPath,
      '--template-file', this.#templateFile,
      '--namespace', this.injectorNamespace,
      '--excluded-namespaces', this.#excluded().join(','),
      '--native-sidecar', 'off',
      '--allowed-overrides', ALLOWED.join(','),
      '--never-inject-selector', JSON.stringify(PARITY_SELECTORS.never),
      '--always-inject-selector', JSON.stringify(PARITY_SELECTORS.always),
      '--tls-cert', cert,
      '--tls-key', key,
    ]);
    trackChild(this.#injector.child);

    await mustCall(this.#access, 'POST', '/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: this.#webhookName },
      webhooks: [
        {
          name: 'parity.envoy-injector.io',
          admissionReviewVersions: ['v1'],
          sideEffects: 'None',
          reinvocationPolicy: 'IfNeeded',
          failurePolicy: 'Fail',
          timeoutSeconds: 10,
          clientConfig: { url: `https://127.0.0.1:${this.#injector.port}/mutate`, caBundle: Buffer.from(ca.cert).toString('base64') },
          rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
          namespaceSelector: { matchLabels: { [PATH_LABEL]: `${Path.webhook}-${this.id}` } },
        },
      ],
    });

    // The compiled binding as it is, narrowed to this run's policy namespaces.
    const binding = structuredClone(this.policy.binding);
    const selector = ((binding['spec'] as JsonObject)['matchResources'] as JsonObject)['namespaceSelector'] as JsonObject;
    (selector['matchExpressions'] as JsonObject[]).push({ key: PATH_LABEL, operator: 'In', values: [`${Path.policy}-${this.id}`] });
    await mustCall(this.#access, 'POST', `${this.#collection}/mutatingadmissionpolicies`, this.policy.policy);
    await mustCall(this.#access, 'POST', `${this.#collection}/mutatingadmissionpolicybindings`, binding);

    // Both paths act once the webhook knows the namespaces' labels and the API server has the policy.
    for (const path of [Path.webhook, Path.policy]) {
      await this.#until(`the ${path} path to inject a dry-run Pod of ${this.namespaces[path].enabled}`, async () => {
        const response = await kubeCall(this.#access, 'POST', `/api/v1/namespaces/${this.namespaces[path].enabled}/pods?dryRun=All`, probePod());
        const annotations = (response.body['metadata'] as JsonObject | undefined)?.['annotations'] as JsonObject | undefined;
        return response.status === 201 && annotations?.['envoy-injector.io/status'] !== undefined;
      });
    }
  }

  /** Creates every case on both paths and compares the stored Pods. */
  async compare(cases: readonly ParityCase[]): Promise<ParityReport> {
    const differences: ParityDifference[] = [];
    let injected = 0;
    let policyInjected = 0;
    let refused = 0;
    let podResourcesPadded = 0;
    for (const [index, parityCase] of cases.entries()) {
      const name = `case-${index}`;
      const results = await Promise.all(
        [Path.webhook, Path.policy].map(async (path) => {
          const namespace = this.namespaces[path][parityCase.namespace];
          const body = { ...parityCase.pod, metadata: { ...(parityCase.pod['metadata'] as JsonObject), name } };
          const response = await kubeCall(this.#access, 'POST', `/api/v1/namespaces/${namespace}/pods`, body);
          return this.#normalize(response);
        }),
      );
      const [webhook, policy] = results;
      // Pod-level resources: both paths pad them alike (or leave the Pod alike), and the API server takes the Pod.
      if (setsPodResources(parityCase.pod) && isInjected(webhook)) podResourcesPadded += 1;
      if (JSON.stringify(webhook) !== JSON.stringify(policy)) differences.push({ title: `${name}: ${parityCase.title}`, webhook, policy });
      if (isInjected(webhook)) injected += 1;
      if ((webhook as JsonObject)['refused'] !== undefined) refused += 1;
      if (isInjected(policy)) policyInjected += 1;
    }
    return { compared: cases.length, injected, policyInjected, refused, podResourcesPadded, differences };
  }

  /** Creates POD as NAME in this run's namespace of KIND on PATH: the stored Pod (normalized) or the refusal, and the answer's warnings. */
  async createIn(path: Path, kind: NamespaceKind, pod: JsonObject, name: string): Promise<{ stored: unknown; warnings: readonly string[] }> {
    const namespace = this.namespaces[path][kind];
    const body = { ...pod, metadata: { ...((pod['metadata'] ?? {}) as JsonObject), name } };
    const response = await kubeCall(this.#access, 'POST', `/api/v1/namespaces/${namespace}/pods`, body);
    return { stored: this.#normalize(response), warnings: response.warnings };
  }

  /** The stored Pod (or the refusal) without what differs by nature: names, uids, versions, times, the token volume's suffix. */
  #normalize(response: ApiResponse): unknown {
    let text = JSON.stringify(response.status >= 300 ? { refused: response.status, message: response.body['message'] } : sortKeys(strip(response.body)));
    for (const path of [Path.webhook, Path.policy]) {
      for (const kind of Object.values(NamespaceKind)) text = text.replaceAll(this.namespaces[path][kind], `NAMESPACE-${kind}`);
    }
    return JSON.parse(text.replace(/kube-api-access-[a-z0-9]{5}/g, 'kube-api-access-XXXXX')) as unknown;
  }

  async #createNamespace(name: string, labels: Record<string, string>, annotations?: Record<string, string>): Promise<void> {
    await mustCall(this.#access, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels, ...(annotations === undefined ? {} : { annotations }) } });
    // Pods need the namespace's default ServiceAccount; the controller manager may make it first.
    const created = await kubeCall(this.#access, 'POST', `/api/v1/namespaces/${name}/serviceaccounts`, { metadata: { name: 'default' } });
    if (created.status >= 300 && created.status !== 409) throw new Error(`ServiceAccount ${name}/default: ${created.status}`);
  }

  async #until(what: string, probe: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
      await sleep(200);
    }
  }

  /** Removes what start() created, whatever state it reached; never throws. */
  async stop(): Promise<void> {
    const calls = [
      `/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/${this.#webhookName}`,
      `${this.#collection}/mutatingadmissionpolicybindings/parity-${this.id}`,
      `${this.#collection}/mutatingadmissionpolicies/parity-${this.id}`,
      ...[...Object.values(this.namespaces.webhook), ...Object.values(this.namespaces.policy), this.injectorNamespace].map((name) => `/api/v1/namespaces/${name}`),
    ];
    await Promise.all(calls.map((path) => kubeCall(this.#access, 'DELETE', path).catch(() => undefined)));
    const injector = this.#injector;
    if (injector !== undefined && injector.child.exitCode === null && injector.child.signalCode === null) {
      injector.child.kill('SIGTERM');
      const exited = await Promise.race([injector.exited.then(() => true), sleep(15_000, false)]);
      if (!exited) injector.child.kill('SIGKILL');
    }
    if (this.#dir !== undefined) await rm(this.#dir, { recursive: true, force: true });
  }
}

/** Pod-level requests or limits: both paths pad them (compile-resources.ts, pod-resources.ts). */
function setsPodResources(pod: JsonObject): boolean {
  const resources = ((pod['spec'] as JsonObject | undefined)?.['resources'] ?? {}) as JsonObject;
  return ['requests', 'limits'].some((kind) => Object.keys((resources[kind] ?? {}) as JsonObject).length > 0);
}

export function isInjected(stored: unknown): boolean {
  const metadata = (stored as JsonObject)['metadata'] as JsonObject | undefined;
  const annotations = metadata?.['annotations'] as JsonObject | undefined;
  return annotations?.['envoy-injector.io/status'] !== undefined;
}

function probePod(): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'probe' }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }] } };
}

function strip(pod: JsonObject): JsonObject {
  const metadata = { ...(pod['metadata'] as JsonObject) };
  for (const key of ['namespace', 'uid', 'resourceVersion', 'creationTimestamp', 'managedFields']) delete metadata[key];
  return { ...pod, metadata };
}

/** Key order of the API server's answers is stable, but sorted keys make a diff readable. */
function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys((value as Record<string, unknown>)[key])]));
  }
  return value;
}
