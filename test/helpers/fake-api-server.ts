import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { applyPatch, type Operation } from 'rfc6902';
import { makeCertificates } from '../../src/tls/certificates.js';

/**
 * A small Kubernetes API server for tests: HTTPS with its own CA, bearer
 * token auth, LIST (paged with limit/continue, label selectors) and WATCH
 * (newline-delimited events, BOOKMARKs, 410 for an expired resourceVersion,
 * field selectors on metadata.name and spec.nodeName, metadata-only responses), GET/POST/PUT/PATCH/DELETE with optimistic concurrency, /version,
 * and faults on demand (500s, dropped watches, compacted history).
 */

type KubeObject = { apiVersion?: string; kind?: string; metadata: Record<string, unknown> & { name: string; namespace?: string | undefined; resourceVersion?: string } } & Record<string, unknown>;

interface Resource {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
  readonly namespaced: boolean;
}

const RESOURCES: Readonly<Record<string, Resource>> = {
  namespaces: { group: '', version: 'v1', kind: 'Namespace', namespaced: false },
  nodes: { group: '', version: 'v1', kind: 'Node', namespaced: false },
  configmaps: { group: '', version: 'v1', kind: 'ConfigMap', namespaced: true },
  secrets: { group: '', version: 'v1', kind: 'Secret', namespaced: true },
  mutatingwebhookconfigurations: { group: 'admissionregistration.k8s.io', version: 'v1', kind: 'MutatingWebhookConfiguration', namespaced: false },
  pods: { group: '', version: 'v1', kind: 'Pod', namespaced: true },
  replicasets: { group: 'apps', version: 'v1', kind: 'ReplicaSet', namespaced: true },
  deployments: { group: 'apps', version: 'v1', kind: 'Deployment', namespaced: true },
  statefulsets: { group: 'apps', version: 'v1', kind: 'StatefulSet', namespaced: true },
  daemonsets: { group: 'apps', version: 'v1', kind: 'DaemonSet', namespaced: true },
  jobs: { group: 'batch', version: 'v1', kind: 'Job', namespaced: true },
  cronjobs: { group: 'batch', version: 'v1', kind: 'CronJob', namespaced: true },
  mutatingadmissionpolicies: { group: 'admissionregistration.k8s.io', version: 'v1', kind: 'MutatingAdmissionPolicy', namespaced: false },
  mutatingadmissionpolicybindings: { group: 'admissionregistration.k8s.io', version: 'v1', kind: 'MutatingAdmissionPolicyBinding', namespaced: false },
  clusterroles: { group: 'rbac.authorization.k8s.io', version: 'v1', kind: 'ClusterRole', namespaced: false },
  events: { group: 'events.k8s.io', version: 'v1', kind: 'Event', namespaced: true },
  leases: { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', namespaced: true },
};

/** Served in whichever admissionregistration.k8s.io versions `servedPolicyVersions` names (one store for all, as in a real API server). */
const POLICY_RESOURCES = new Set(['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings']);

interface StoredEvent {
  readonly resourceVersion: number;
  readonly resource: string;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: KubeObject;
}

interface OpenWatch {
  readonly resource: string;
  readonly namespace: string | undefined;
  readonly fields: FieldFilter;
  readonly metadataOnly: boolean;
  readonly bookmarks: boolean;
  readonly response: ServerResponse;
  /** A half-open stream: the connection stays, nothing more arrives on it. */
  frozen: boolean;
}

export interface RequestRecord {
  readonly method: string;
  readonly path: string;
  readonly query: Record<string, string>;
  readonly accept: string;
  /** 0: not answered (stalled). */
  readonly status: number;
  /** Date.now() when it arrived. */
  readonly at: number;
  /** The client's port: which of its sockets carried the request. */
  readonly clientPort: number;
}

export class FakeApiServer {
  readonly token = 'test-token-' + randomUUID();
  readonly requests: RequestRecord[] = [];
  /** Watches answered with 410 Gone (an expired resourceVersion). */
  expiredWatches = 0;
  /** Every watch ends at once, cleanly (200, no events), as a misbehaving proxy might. */
  closeWatchesAtOnce = false;
  /** Stalled requests (see stall) whose client gave up and closed the connection. */
  abandonedStalls = 0;
  /** What GET /version answers. */
  version = { major: '1', minor: '30', gitVersion: 'v1.30.2' };
  /** The admissionregistration.k8s.io versions that serve MutatingAdmissionPolicy (discovery and requests alike). */
  servedPolicyVersions: readonly string[] = ['v1'];

  readonly #server: Server;
  readonly #ca: string;
  readonly #objects = new Map<string, KubeObject>();
  readonly #events: StoredEvent[] = [];
  readonly #watches = new Set<OpenWatch>();
  readonly #sockets: Set<Socket>;
  #resourceVersion = 100;
  /** resourceVersions at or below this are compacted: watching from them gets 410. */
  #compactedThrough = 0;
  #failures: { remaining: number; status: number; match: (path: string) => boolean } | undefined;
  #stall: ((path: string) => boolean) | undefined;
  readonly #stalled = new Set<ServerResponse>();
  #expiredContinues = 0;
  #expiredContinuesPath: string | undefined;

  private constructor(server: Server, ca: string, sockets: Set<Socket>) {
    this.#server = server;
    this.#ca = ca;
    this.#sockets = sockets;
  }

  static async start(): Promise<FakeApiServer> {
    const { ca, serving } = await makeCertificates({ hosts: [] });
    const sockets = new Set<Socket>();
    let fake: FakeApiServer | undefined;
    const server = createServer({ cert: serving.cert, key: serving.key }, (request, response) => fake?.handle(request, response));
    fake = new FakeApiServer(server, ca.cert, sockets);
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get url(): string {
    return `https://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  /**
   * A kubeconfig file for this server (the client verifies our CA, as it
   * would a real one). With `execCredentialFile`, the token comes from an
   * exec plugin that prints that file, and fails while it is missing.
   */
  writeKubeconfig(dir = mkdtempSync(join(tmpdir(), 'ei-kubeconfig-')), options: { execCredentialFile?: string } = {}): string {
    const user =
      options.execCredentialFile === undefined
        ? [`    token: ${this.token}`]
        : ['    exec:', '      apiVersion: client.authentication.k8s.io/v1', '      command: cat', `      args: [${JSON.stringify(options.execCredentialFile)}]`, '      interactiveMode: Never'];
    const path = join(dir, 'kubeconfig');
    writeFileSync(
      path,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters:',
        '- name: fake',
        '  cluster:',
        `    server: ${this.url}`,
        `    certificate-authority-data: ${Buffer.from(this.#ca).toString('base64')}`,
        'users:',
        '- name: tester',
        '  user:',
        ...user,
        'contexts:',
        '- name: fake',
        '  context: {cluster: fake, user: tester, namespace: envoy-injector}',
        'current-context: fake',
        '',
      ].join('\n'),
    );
    return path;
  }

  async close(): Promise<void> {
    this.stall(undefined);
    for (const watch of this.#watches) watch.response.destroy();
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  // ---- the store, as a test drives it ----

  /** Creates or replaces an object, as `kubectl apply` would; returns the stored copy. */
  apply(resource: string, object: { metadata: { name: string; namespace?: string | undefined } & Record<string, unknown> } & Record<string, unknown>): KubeObject {
    const info = this.#resource(resource);
    const key = this.#key(resource, object.metadata.namespace, object.metadata.name);
    const existing = this.#objects.get(key);
    const stored: KubeObject = {
      apiVersion: info.group === '' ? info.version : `${info.group}/${info.version}`,
      kind: info.kind,
      ...structuredClone(object),
      metadata: {
        ...structuredClone(object.metadata),
        uid: existing?.metadata['uid'] ?? randomUUID(),
        creationTimestamp: existing?.metadata['creationTimestamp'] ?? new Date().toISOString(),
        resourceVersion: String(++this.#resourceVersion),
      },
    };
    this.#objects.set(key, stored);
    this.#emit(resource, existing === undefined ? 'ADDED' : 'MODIFIED', stored);
    return structuredClone(stored);
  }

  remove(resource: string, namespace: string | undefined, name: string): void {
    const key = this.#key(resource, namespace, name);
    const existing = this.#objects.get(key);
    if (existing === undefined) return;
    this.#objects.delete(key);
    const deleted = { ...existing, metadata: { ...existing.metadata, resourceVersion: String(++this.#resourceVersion) } };
    this.#emit(resource, 'DELETED', deleted);
  }

  get(resource: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const found = this.#objects.get(this.#key(resource, namespace, name));
    return found === undefined ? undefined : structuredClone(found);
  }

  /** Every stored object of RESOURCE, in key order. */
  list(resource: string): KubeObject[] {
    return [...this.#objects.entries()].filter(([key]) => key.startsWith(`${resource}/`)).sort(([a], [b]) => (a < b ? -1 : 1)).map(([, object]) => structuredClone(object));
  }

  // ---- faults ----

  /** The next `count` requests whose path matches answer `status` (a Status body). */
  failNext(count: number, status = 500, match: (path: string) => boolean = () => true): void {
    this.#failures = { remaining: count, status, match };
  }

  /** Requests whose path matches are never answered (a hung API server) until stall(undefined). */
  stall(match: ((path: string) => boolean) | undefined): void {
    this.#stall = match;
    if (match === undefined) {
      for (const response of this.#stalled) response.destroy();
      this.#stalled.clear();
    }
  }

  /**
   * The next `count` list requests that carry a `continue` token (of the
   * collection at `path` only, when given) answer 410 Gone, as after an etcd
   * compaction, with a token in the Status that resumes where the expired
   * one stopped (what a real API server offers).
   */
  expireContinueTokens(count: number, path?: string): void {
    this.#expiredContinues = count;
    this.#expiredContinuesPath = path;
  }

  /** Closes every open watch stream, as an API server restart or a load balancer would. */
  dropWatches(): void {
    for (const watch of this.#watches) watch.response.destroy();
    this.#watches.clear();
  }

  /** Open watch streams go silent without closing (a half-open connection); later watches are not affected. */
  freezeWatches(): void {
    for (const watch of this.#watches) watch.frozen = true;
  }

  /** Forgets all history: a watch from any current resourceVersion now gets 410 Gone. */
  compactHistory(): void {
    this.#compactedThrough = this.#resourceVersion;
    this.#events.length = 0;
  }

  /** Sends a BOOKMARK with the current resourceVersion to watches that asked for them. */
  bookmark(): void {
    for (const watch of this.#watches) {
      if (!watch.bookmarks) continue;
      const info = this.#resource(watch.resource);
      this.#write(watch, {
        type: 'BOOKMARK',
        object: { kind: watch.metadataOnly ? 'PartialObjectMetadata' : info.kind, apiVersion: 'v1', metadata: { resourceVersion: String(this.#resourceVersion) } },
      });
    }
  }

  openWatches(resource?: string): number {
    return [...this.#watches].filter((watch) => resource === undefined || watch.resource === resource).length;
  }

  // ---- HTTP ----

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const url = new URL(request.url ?? '/', this.url);
    const query = Object.fromEntries(url.searchParams);
    const record = (status: number): void => {
      this.requests.push({ method: request.method ?? 'GET', path: url.pathname, query, accept: request.headers.accept ?? '', status, at: Date.now(), clientPort: request.socket.remotePort ?? 0 });
    };
    const send = (status: number, body: unknown): void => {
      record(status);
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    if (request.headers.authorization !== `Bearer ${this.token}`) return send(401, status(401, 'Unauthorized', 'Unauthorized'));
    if (this.#failures !== undefined && this.#failures.remaining > 0 && this.#failures.match(url.pathname)) {
      this.#failures.remaining -= 1;
      return send(this.#failures.status, status(this.#failures.status, 'InternalError', 'injected failure'));
    }
    if (this.#stall?.(url.pathname) === true) {
      record(0);
      this.#stalled.add(response);
      response.on('close', () => {
        if (this.#stalled.delete(response)) this.abandonedStalls += 1;
      });
      return;
    }
    if (url.pathname === '/version') return send(200, { ...this.version, platform: 'linux/amd64' });
    const discovery = /^\/apis\/admissionregistration\.k8s\.io\/([^/]+)$/.exec(url.pathname);
    if (discovery !== null) {
      const version = discovery[1] ?? '';
      const resources = [...(version === 'v1' ? ['mutatingwebhookconfigurations'] : []), ...(this.servedPolicyVersions.includes(version) ? POLICY_RESOURCES : [])];
      if (resources.length === 0) return send(404, status(404, 'NotFound', 'the server could not find the requested resource'));
      return send(200, { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `admissionregistration.k8s.io/${version}`, resources: resources.map((name) => ({ name, namespaced: false, kind: '', verbs: [] })) });
    }

    const route = parsePath(url.pathname);
    if (route === undefined || !Object.hasOwn(RESOURCES, route.resource)) return send(404, status(404, 'NotFound', `no route for ${url.pathname}`));
    if (POLICY_RESOURCES.has(route.resource) && !this.servedPolicyVersions.includes(url.pathname.split('/')[3] ?? '')) return send(404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const metadataOnly = (request.headers.accept ?? '').includes('as=PartialObjectMetadata');
    const bodyChunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => bodyChunks.push(chunk));
    request.on('end', () => {
      const body = bodyChunks.length === 0 ? undefined : (JSON.parse(Buffer.concat(bodyChunks).toString('utf8')) as KubeObject);
      const method = request.method ?? 'GET';
      if (method === 'GET' && route.name === undefined) {
        if (query['watch'] === 'true') {
          record(200);
          return this.#watch(route.resource, route.namespace, fieldFilter(query['fieldSelector']), query, metadataOnly, response);
        }
        if (query['continue'] !== undefined && query['continue'] !== '' && this.#expiredContinues > 0 && (this.#expiredContinuesPath ?? url.pathname) === url.pathname) {
          this.#expiredContinues -= 1;
          const resume = encodeContinue(decodeContinue(query['continue']), true);
          return send(410, { ...(status(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.') as object), metadata: { continue: resume } });
        }
        const listed = this.#list(route.resource, route.namespace, fieldFilter(query['fieldSelector']), query, metadataOnly);
        return typeof listed === 'string' ? send(400, status(400, 'BadRequest', listed)) : send(200, listed);
      }
      if (method === 'GET') {
        const found = this.#objects.get(this.#key(route.resource, route.namespace, route.name ?? ''));
        if (found === undefined) return send(404, status(404, 'NotFound', `${route.resource} "${route.name}" not found`));
        return send(200, metadataOnly ? partial(found) : found);
      }
      if (method === 'POST' && body !== undefined) {
        if (this.#objects.has(this.#key(route.resource, route.namespace, body.metadata.name))) {
          return send(409, status(409, 'AlreadyExists', `${route.resource} "${body.metadata.name}" already exists`));
        }
        return send(201, this.apply(route.resource, { ...body, metadata: { ...body.metadata, namespace: route.namespace } }));
      }
      const key = this.#key(route.resource, route.namespace, route.name ?? '');
      const existing = this.#objects.get(key);
      // Server-side apply, simplified: the applied fields merged into what was there (lists of named entries by name), or created;
      // a resourceVersion in the applied object is a precondition. No field ownership: a field left out is kept.
      if (method === 'PATCH' && body !== undefined && (request.headers['content-type'] ?? '').startsWith('application/apply-patch')) {
        const expected = body.metadata.resourceVersion;
        if (existing !== undefined && expected !== undefined && expected !== existing.metadata.resourceVersion) {
          return send(409, status(409, 'Conflict', `Operation cannot be fulfilled on ${route.resource} "${route.name}": the object has been modified; please apply your changes to the latest version and try again`));
        }
        const merged = existing === undefined ? body : (applyMerge(structuredClone(existing), body) as typeof body);
        const metadata = { ...merged.metadata, name: route.name ?? '', namespace: route.namespace, resourceVersion: existing?.metadata.resourceVersion };
        return send(existing === undefined ? 201 : 200, this.apply(route.resource, { ...merged, metadata }));
      }
      if (existing === undefined) return send(404, status(404, 'NotFound', `${route.resource} "${route.name}" not found`));
      if (method === 'PUT' && body !== undefined) {
        // As the real API server: a Secret's type cannot change.
        if (route.resource === 'secrets' && (body['type'] ?? 'Opaque') !== (existing['type'] ?? 'Opaque')) {
          return send(422, status(422, 'Invalid', `Secret "${route.name}" is invalid: type: Invalid value: "${String(body['type'])}": field is immutable`));
        }
        if (body.metadata.resourceVersion !== undefined && body.metadata.resourceVersion !== existing.metadata.resourceVersion) {
          return send(409, status(409, 'Conflict', `Operation cannot be fulfilled on ${route.resource} "${route.name}": the object has been modified; please apply your changes to the latest version and try again`));
        }
        return send(200, this.apply(route.resource, { ...body, metadata: { ...body.metadata, namespace: route.namespace } }));
      }
      if (method === 'PATCH' && body !== undefined) {
        const patched = structuredClone(existing);
        const type = request.headers['content-type'] ?? '';
        if (type.startsWith('application/json-patch+json')) {
          const results = applyPatch(patched, body as unknown as Operation[]);
          if (results.some((result) => result !== null)) return send(422, status(422, 'Invalid', 'the JSON patch does not apply'));
        } else mergePatch(patched, body);
        const expected = (body as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion;
        if (expected !== undefined && expected !== existing.metadata.resourceVersion) return send(409, status(409, 'Conflict', 'the object has been modified'));
        return send(200, this.apply(route.resource, patched));
      }
      if (method === 'DELETE') {
        // DeleteOptions' uid precondition, as the real API server checks it.
        const uid = (body as { preconditions?: { uid?: unknown } } | undefined)?.preconditions?.uid;
        if (typeof uid === 'string' && uid !== existing.metadata['uid']) {
          return send(409, status(409, 'Conflict', `Operation cannot be fulfilled on ${route.resource} "${route.name}": Precondition failed: UID in precondition: ${uid}, UID in object meta: ${String(existing.metadata['uid'])}`));
        }
        this.remove(route.resource, route.namespace, route.name ?? '');
        return send(200, status(200, 'Success', 'deleted'));
      }
      return send(405, status(405, 'MethodNotAllowed', `${method} not supported`));
    });
  }

  /** A list, or the message of a 400. Pages follow key order; `continue` is the last key served. */
  #list(resource: string, namespace: string | undefined, fields: FieldFilter, query: Record<string, string>, metadataOnly: boolean): unknown {
    const info = this.#resource(resource);
    const selector = parseLabelSelector(query['labelSelector'] ?? '');
    if (typeof selector === 'string') return selector;
    const after = query['continue'] === undefined || query['continue'] === '' ? undefined : decodeContinue(query['continue']);
    const limit = query['limit'] === undefined ? 0 : Number(query['limit']);
    const matching = [...this.#objects.entries()]
      .filter(([key]) => key.startsWith(`${resource}/`) && (after === undefined || key > after))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .filter(([, object]) => matches(object, namespace, fields) && selector(labelsOf(object)));
    const page = limit > 0 ? matching.slice(0, limit) : matching;
    const lastKey = page.at(-1)?.[0];
    const more = limit > 0 && matching.length > limit && lastKey !== undefined;
    return {
      kind: metadataOnly ? 'PartialObjectMetadataList' : `${info.kind}List`,
      apiVersion: metadataOnly ? 'meta.k8s.io/v1' : info.group === '' ? info.version : `${info.group}/${info.version}`,
      metadata: { resourceVersion: String(this.#resourceVersion), ...(more ? { continue: encodeContinue(lastKey, false) } : {}) },
      items: page.map(([, item]) => (metadataOnly ? partial(item) : item)),
    };
  }

  #watch(
    resource: string,
    namespace: string | undefined,
    fields: FieldFilter,
    query: Record<string, string>,
    metadataOnly: boolean,
    response: ServerResponse,
  ): void {
    response.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    response.flushHeaders();
    const watch: OpenWatch = { resource, namespace, fields, metadataOnly, bookmarks: query['allowWatchBookmarks'] === 'true', response, frozen: false };
    if (this.closeWatchesAtOnce) {
      response.end();
      return;
    }
    const from = Number(query['resourceVersion'] ?? '0');
    if (from > 0 && from < this.#compactedThrough) {
      this.expiredWatches += 1;
      this.#write(watch, {
        type: 'ERROR',
        object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${this.#compactedThrough})`, reason: 'Expired', code: 410 },
      });
      response.end();
      return;
    }
    this.#watches.add(watch);
    response.on('close', () => this.#watches.delete(watch));
    for (const event of this.#events) {
      if (event.resource === resource && event.resourceVersion > from && matches(event.object, namespace, fields)) {
        this.#write(watch, { type: event.type, object: metadataOnly ? partial(event.object) : event.object });
      }
    }
  }

  #emit(resource: string, type: StoredEvent['type'], object: KubeObject): void {
    const event = { resourceVersion: this.#resourceVersion, resource, type, object: structuredClone(object) };
    this.#events.push(event);
    for (const watch of this.#watches) {
      if (watch.resource === resource && matches(object, watch.namespace, watch.fields)) {
        this.#write(watch, { type, object: watch.metadataOnly ? partial(event.object) : event.object });
      }
    }
  }

  #write(watch: OpenWatch, event: unknown): void {
    if (watch.frozen) return;
    watch.response.write(JSON.stringify(event) + '\n');
  }

  #resource(resource: string): Resource {
    const info = RESOURCES[resource];
    if (info === undefined) throw new Error(`unknown resource ${resource}`);
    return info;
  }

  #key(resource: string, namespace: string | undefined, name: string): string {
    return this.#resource(resource).namespaced ? `${resource}/${namespace ?? ''}/${name}` : `${resource}//${name}`;
  }
}

/** `/api/v1/namespaces/ns/configmaps/name`, `/apis/g/v/resource/name`, `/api/v1/namespaces/name`. */
function parsePath(path: string): { resource: string; namespace: string | undefined; name: string | undefined } | undefined {
  const parts = path.split('/').filter((part) => part !== '');
  const rest = parts[0] === 'api' ? parts.slice(2) : parts[0] === 'apis' ? parts.slice(3) : undefined;
  if (rest === undefined || rest.length === 0) return undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) return { resource: rest[2] ?? '', namespace: rest[1], name: rest[3] };
  return { resource: rest[0] ?? '', namespace: undefined, name: rest[1] };
}

/** What a field selector asks for: `metadata.name=x`, `spec.nodeName=y`, or both, comma-separated. */
interface FieldFilter {
  readonly name?: string;
  readonly nodeName?: string;
}

function fieldFilter(selector: string | undefined): FieldFilter {
  if (selector === undefined || selector === '') return {};
  const filter: { name?: string; nodeName?: string } = {};
  for (const term of selector.split(',')) {
    const match = /^(metadata\.name|spec\.nodeName)=(.+)$/.exec(term);
    if (match === null) throw new Error(`the fake API server only supports metadata.name and spec.nodeName field selectors, got ${selector}`);
    if (match[1] === 'metadata.name') filter.name = match[2] ?? '';
    else filter.nodeName = match[2] ?? '';
  }
  return filter;
}

function matches(object: KubeObject, namespace: string | undefined, fields: FieldFilter): boolean {
  const spec = object['spec'];
  const nodeName = typeof spec === 'object' && spec !== null ? (spec as Record<string, unknown>)['nodeName'] : undefined;
  return (namespace === undefined || object.metadata.namespace === namespace) && (fields.name === undefined || object.metadata.name === fields.name) && (fields.nodeName === undefined || nodeName === fields.nodeName);
}

/** A continue token: the last key served (and, after a 410, a mark, so the token differs as a real one does). */
function encodeContinue(after: string, inconsistent: boolean): string {
  return Buffer.from(JSON.stringify({ after, inconsistent })).toString('base64');
}

function decodeContinue(token: string): string {
  return (JSON.parse(Buffer.from(token, 'base64').toString('utf8')) as { after: string }).after;
}

function labelsOf(object: KubeObject): Record<string, string> {
  const labels = object.metadata['labels'];
  return typeof labels === 'object' && labels !== null ? (labels as Record<string, string>) : {};
}

/** Equality-based selectors (`a=b`, `a==b`, `a!=b`, `a`, `!a`, comma-separated); a message for anything else. */
function parseLabelSelector(text: string): ((labels: Record<string, string>) => boolean) | string {
  const tests: ((labels: Record<string, string>) => boolean)[] = [];
  for (const term of text.split(',').map((part) => part.trim()).filter((part) => part !== '')) {
    const match = /^(!?)([\w./-]+)(?:\s*(==|=|!=)\s*([\w.-]*))?$/.exec(term);
    if (match === null) return `unable to parse requirement: ${term}`;
    const [, not, key = '', op, value = ''] = match;
    if (op === undefined) tests.push((labels) => Object.hasOwn(labels, key) !== (not === '!'));
    else if (not === '!') return `unable to parse requirement: ${term}`;
    else if (op === '!=') tests.push((labels) => labels[key] !== value);
    else tests.push((labels) => labels[key] === value);
  }
  return (labels) => tests.every((test) => test(labels));
}

function partial(object: KubeObject): unknown {
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata };
}

function status(code: number, reason: string, message: string): unknown {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: code < 400 ? 'Success' : 'Failure', message, reason, code };
}

/** RFC 7386 merge patch, enough for the strategic-merge patches our code sends. */
function mergePatch(target: Record<string, unknown>, patch: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete target[key];
    else if (typeof value === 'object' && !Array.isArray(value) && typeof target[key] === 'object' && target[key] !== null && !Array.isArray(target[key])) {
      mergePatch(target[key] as Record<string, unknown>, value as Record<string, unknown>);
    } else target[key] = value;
  }
}

/** Server-side apply's merge, roughly: maps merged, lists whose entries all have a `name` merged by name, other lists and values replaced. */
function applyMerge(target: unknown, applied: unknown): unknown {
  const named = (list: unknown[]): list is { name: unknown }[] => list.every((entry) => entry !== null && typeof entry === 'object' && 'name' in entry);
  if (Array.isArray(target) && Array.isArray(applied) && named(target) && named(applied)) {
    const result = [...target];
    for (const entry of applied) {
      const index = result.findIndex((candidate) => candidate.name === entry.name);
      if (index === -1) result.push(entry);
      else result[index] = applyMerge(result[index], entry) as { name: unknown };
    }
    return result;
  }
  if (target === null || applied === null || typeof target !== 'object' || typeof applied !== 'object' || Array.isArray(target) || Array.isArray(applied)) return applied;
  const result: Record<string, unknown> = { ...(target as Record<string, unknown>) };
  for (const [key, value] of Object.entries(applied)) result[key] = key in result ? applyMerge(result[key], value) : value;
  return result;
}
