import { isUtf8 } from 'node:buffer';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyReply, type FastifySchemaValidationError } from 'fastify';
import type { Logger } from 'pino';
import {
  AdmissionReviewSchema,
  PatchMemo,
  requestProblem,
  reviewAdmission,
  type AdmissionRequest,
  type AdmissionReviewRequest,
  type ReviewOutcome,
} from '../admission/index.js';
import { NamespaceLabelsUnknownError } from '../errors.js';
import type { WorkloadEventSink } from '../events/event-series.js';
import { workloadNotices } from '../events/workload-notices.js';
import { isExcludedNamespace, isJsonObject, type AdmitOptions, type NamespaceMetadata, type TemplateSet } from '../injection/index.js';
import { ErrorReason, type InjectorMetrics } from './metrics.js';
import type { ServerState } from './server-state.js';

/**
 * The largest AdmissionReview we read. etcd caps an object near 1.5 MiB; a
 * review carries `object` (and `oldObject` on UPDATE) plus a small envelope,
 * so 4 MiB admits every Pod the API server can store and refuses floods.
 */
export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

export interface ServerTimeouts {
  /** Whole request, from first byte to handler: below the webhook's timeoutSeconds (chart default 5 s). */
  readonly requestMs: number;
  /** Request headers; also what cuts off a slowloris client, and a connection that never sends a request. */
  readonly headersMs: number;
  /** Idle keep-alive: longer than the API server's 90 s idle timeout, so the client closes first and never writes into a closing socket. */
  readonly keepAliveMs: number;
}

export const DEFAULT_TIMEOUTS: ServerTimeouts = { requestMs: 4_000, headersMs: 3_000, keepAliveMs: 100_000 };

/** Labels of a namespace; rejects with NamespaceLabelsUnknownError when they cannot be known. */
export type NamespaceLabelLookup = (namespace: string) => Promise<Readonly<Record<string, string>>>;
/**
 * Labels and `envoy-injector.io/` annotations of a namespace: the metadata
 * itself when at hand (a watch's cache), else a promise of it, which
 * rejects with NamespaceLabelsUnknownError when they cannot be known (the
 * lookup never throws).
 */
export type NamespaceMetadataLookup = (namespace: string) => NamespaceMetadata | Promise<NamespaceMetadata>;

export interface AppDependencies {
  readonly log: Logger;
  readonly state: ServerState;
  readonly metrics: InjectorMetrics;
  /** Decision settings; the native-sidecar default comes from `state` (it may follow the cluster). */
  readonly decisionOptions: Omit<AdmitOptions, 'nativeSidecar'>;
  /** Labels of a namespace; absent outside a cluster. */
  readonly namespaceLabels?: NamespaceLabelLookup;
  /** Labels and annotations of a namespace (the template label, the proxy defaults); preferred to namespaceLabels when given. */
  readonly namespaceMetadata?: NamespaceMetadataLookup;
  /** TLS and Node server options (the server is HTTPS only). */
  readonly https: HttpsServerOptions;
  readonly timeouts?: ServerTimeouts;
  /** Bound on open connections (a flood must not exhaust memory). */
  readonly maxConnections?: number;
  /** Where Warning Events on workloads are queued (never awaited); absent outside a cluster. */
  readonly workloadEvents?: WorkloadEventSink | undefined;
}

/** Builds the Fastify app; never listens (see serve.ts). */
export function buildApp(deps: AppDependencies) {
  const app = createFastify(deps, deps.timeouts ?? DEFAULT_TIMEOUTS);
  if (deps.maxConnections !== undefined) app.server.maxConnections = deps.maxConnections;
  closeWhileDraining(app, deps.state);
  acceptJsonOnly(app);
  answerErrors(app, deps.metrics);
  deps.metrics.startAdmissionSeriesAtZero();
  addMutateRoute(app, deps);
  addProbeRoutes(app, deps);
  return app;
}

type App = ReturnType<typeof createFastify>;

function createFastify(deps: AppDependencies, timeouts: ServerTimeouts) {
  return Fastify({
    loggerInstance: deps.log,
    // One line per admission is ours to write (at debug); Fastify's two per request would flood info.
    logController: new LogController({ disableRequestLogging: true }),
    // No per-request child logger: our admission line carries the uid, and a child per request costs.
    childLoggerFactory: (logger) => logger,
    bodyLimit: BODY_LIMIT_BYTES,
    requestTimeout: timeouts.requestMs,
    keepAliveTimeout: timeouts.keepAliveMs,
    // Requests already on a connection when shutdown starts are served, not refused.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false } },
    schemaErrorFormatter: (errors) => new Error(`malformed AdmissionReview: ${describeSchemaError(errors[0])}`),
    https: {
      ...deps.https,
      headersTimeout: timeouts.headersMs,
      requestTimeout: timeouts.requestMs,
      // How often Node checks the two timeouts above (its default is 30 s).
      connectionsCheckingInterval: 1_000,
      // A connection that never completes TLS would otherwise hold a connection slot for 120 s.
      handshakeTimeout: timeouts.headersMs,
    },
  });
}

function closeWhileDraining(app: App, state: ServerState): void {
  // While draining, every answer asks the client to close its connection, so that
  // keep-alive connections are gone before the listener closes and none is reset mid-request.
  // A callback hook, not an async one: no promise per request.
  app.addHook('onSend', (_request, reply, payload, done) => {
    if (state.draining) reply.header('connection', 'close');
    done(null, payload);
  });
}

function acceptJsonOnly(app: App): void {
  // JSON only (anything else is 415), with our own parser: invalid UTF-8 is an error, not silently replaced.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
    const buffer = body as Buffer;
    if (buffer.length === 0) return done(httpError(400, 'body is empty: expected an AdmissionReview'), undefined);
    if (!isUtf8(buffer)) return done(httpError(400, 'body is not valid UTF-8'), undefined);
    try {
      // JSON.parse makes `__proto__` an own data property, never a prototype.
      done(null, JSON.parse(buffer.toString('utf8')));
    } catch (error) {
      done(httpError(400, `body is not JSON: ${(error as Error).message}`), undefined);
    }
  });
}

function answerErrors(app: App, metrics: InjectorMetrics): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const status = error.validation !== undefined ? 400 : (error.statusCode ?? 500);
    const reason =
      status === 413 ? ErrorReason.bodyTooLarge
      : status === 415 ? ErrorReason.unsupportedMediaType
      : status >= 500 ? ErrorReason.internalError
      : ErrorReason.malformedReview;
    // The route, not the URL: the API server calls `/mutate?timeout=5s`.
    if (request.routeOptions.url === '/mutate') metrics.recordAdmission('error', reason, 0);
    if (status >= 500) {
      request.log.error({ err: error, url: request.url }, 'request failed');
      return reply.code(status).send({ statusCode: status, error: 'Internal Server Error', message: 'internal error (logged by envoy-injector)' });
    }
    const message = oneLine(
      status === 413 ? `body larger than ${BODY_LIMIT_BYTES} bytes`
      : status === 415 ? `content type ${JSON.stringify(request.headers['content-type'] ?? '')} is not application/json`
      : error.message,
    );
    request.log.warn({ status, reason, url: request.url }, message);
    return reply.code(status).send({ statusCode: status, error: reasonPhrase(status), message });
  });
}

/** `POST /mutate`: decode, read the live state once, decide, record, answer. */
function addMutateRoute(app: App, deps: AppDependencies): void {
  // Pods of one shape get one patch: computed once per template set (see patch-memo.ts).
  const memo = new PatchMemo();
  // The decision settings with the live native-sidecar default: one object until that default changes.
  let options: AdmitOptions = { ...deps.decisionOptions, nativeSidecar: deps.state.nativeSidecar };
  const respond = (reply: FastifyReply, admission: AdmissionRequest, templates: TemplateSet | undefined, namespace: NamespaceMetadata | undefined, started: bigint): void => {
    if (options.nativeSidecar !== deps.state.nativeSidecar) options = { ...deps.decisionOptions, nativeSidecar: deps.state.nativeSidecar };
    const outcome = reviewAdmission(admission, { templates, namespaceLabels: namespace?.labels, namespaceAnnotations: namespace?.annotations, options, memo });
    recordWorkloadEvents(deps.workloadEvents, admission, outcome);
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    deps.metrics.recordAdmission(outcome.result, outcome.reason, seconds, outcome.warnings.length > 0);
    if (outcome.result === 'injected' && outcome.capture?.capture === true) deps.metrics.capturedPods.labels(outcome.capture.mode).inc();
    // The server's logger is every request's (no child per request, see createFastify).
    if (deps.log.isLevelEnabled('debug')) logAdmission(deps.log, admission, outcome, seconds);
    reply.send(outcome.review);
  };
  // Not an async handler: a review that needs no namespace lookup, or finds the namespace in the
  // watch's cache, is answered in the turn that parsed it, with no promise and no microtask.
  app.post('/mutate', { schema: { body: AdmissionReviewSchema } }, (request, reply) => {
    const started = process.hrtime.bigint();
    const { request: admission } = request.body as AdmissionReviewRequest;
    const problem = requestProblem(admission);
    if (problem !== undefined) throw httpError(400, `malformed AdmissionReview: ${problem}`);
    // Read the live state once: this request finishes on the set it started with.
    const templates = deps.state.templates.current;
    const namespace = namespaceIfNeeded(admission, deps);
    if (!(namespace instanceof Promise)) return respond(reply, admission, templates, namespace, started);
    return namespace.then(
      (metadata) => respond(reply, admission, templates, metadata, started),
      (error: unknown) => {
        if (!(error instanceof NamespaceLabelsUnknownError)) throw error;
        recordWorkloadEvents(deps.workloadEvents, admission, undefined);
        // Not an AdmissionResponse: an HTTP error is what lets the webhook's failurePolicy decide.
        deps.metrics.recordAdmission('error', ErrorReason.namespaceLabelsUnknown, Number(process.hrtime.bigint() - started) / 1e9);
        reply.code(503).send({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'ServiceUnavailable', code: 503, message: error.message });
      },
    );
  });
}

/**
 * The namespace (labels, and annotations when the lookup gives them) is only
 * worth a lookup when the decision can reach the namespace rules. Undefined
 * without one; the metadata itself when the lookup has it at hand (the watch's
 * cache), else its promise.
 */
function namespaceIfNeeded(admission: AdmissionReviewRequest['request'], deps: AppDependencies): NamespaceMetadata | Promise<NamespaceMetadata> | undefined {
  const { namespace } = admission;
  const { namespaceMetadata, namespaceLabels } = deps;
  if ((namespaceMetadata === undefined && namespaceLabels === undefined) || namespace === undefined) return undefined;
  if (admission.operation !== 'CREATE' || admission.kind.kind !== 'Pod' || isExcludedNamespace(namespace, deps.decisionOptions)) return undefined;
  if (namespaceMetadata !== undefined) return namespaceMetadata(namespace);
  return namespaceLabels?.(namespace).then((labels) => ({ labels, annotations: undefined }));
}

/** The admission's one line, at debug (never the Pod spec). */
function logAdmission(log: FastifyBaseLogger, admission: AdmissionReviewRequest['request'], outcome: ReturnType<typeof reviewAdmission>, seconds: number): void {
  const metadata = (admission.object?.['metadata'] ?? {}) as Record<string, unknown>;
  log.debug(
    {
      uid: admission.uid,
      namespace: admission.namespace,
      pod: admission.name || metadata['name'] || metadata['generateName'],
      operation: admission.operation,
      decision: outcome.result,
      reason: outcome.reason,
      dryRun: admission.dryRun ?? false,
      durationMs: seconds * 1000,
    },
    outcome.decision.message,
  );
}

/** Liveness, readiness and the metrics. */
function addProbeRoutes(app: App, deps: AppDependencies): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_request, reply) => {
    const readiness = deps.state.readiness();
    return reply.code(readiness.ready ? 200 : 503).send(readiness);
  });

  app.get('/metrics', async (_request, reply) => {
    const { contentType, body } = await deps.metrics.render();
    return reply.type(contentType).send(body);
  });
}

/** Hands the review's workload Events to the sink: a few lookups, no I/O, never awaited. */
function recordWorkloadEvents(sink: WorkloadEventSink | undefined, admission: AdmissionRequest, outcome: ReviewOutcome | undefined): void {
  if (sink === undefined || admission.namespace === undefined || !isJsonObject(admission.object)) return;
  for (const notice of workloadNotices({ namespace: admission.namespace, pod: admission.object, dryRun: admission.dryRun === true, admission: outcome })) sink.record(notice);
}

/** Messages may quote the body (JSON.parse does): escape line breaks and control characters, keep it short. */
function oneLine(message: string): string {
  const escaped = message.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return escaped.length > 300 ? `${escaped.slice(0, 300)}...` : escaped;
}

function httpError(statusCode: number, message: string): Error & { statusCode: number } {
  return Object.assign(new Error(message), { statusCode });
}

function reasonPhrase(status: number): string {
  return status === 413 ? 'Payload Too Large' : status === 415 ? 'Unsupported Media Type' : status === 404 ? 'Not Found' : 'Bad Request';
}

/** One schema error as `request.uid: required`, `apiVersion: must be "admission.k8s.io/v1"`. */
function describeSchemaError(error: FastifySchemaValidationError | undefined): string {
  if (error === undefined) return 'invalid';
  const parts = error.instancePath.split('/').filter((part) => part !== '');
  const { params } = error;
  let problem = error.message ?? 'invalid';
  if (error.keyword === 'required' && typeof params['missingProperty'] === 'string') {
    parts.push(params['missingProperty']);
    problem = 'required';
  } else if (error.keyword === 'const') problem = `must be ${JSON.stringify(params['allowedValue'])}`;
  else if (error.keyword === 'enum' && Array.isArray(params['allowedValues'])) problem = `must be one of ${params['allowedValues'].join(', ')}`;
  else if (error.keyword === 'type') problem = `must be ${[params['type']].flat().join(' or ')}`;
  return `${parts.length === 0 ? 'the body' : parts.join('.')}: ${problem}`;
}
