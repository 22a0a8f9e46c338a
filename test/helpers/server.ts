import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import { parseTemplateData, BUNDLED_TEMPLATE_DATA, type DecisionOptions, type TemplateSet } from '../../src/injection/index.js';
import type { InjectorMetrics } from '../../src/server/metrics.js';
import { createServerState, writeCertificateFiles, startServer, type RunningServer, type ServeOptions } from '../../src/server/serve.js';
import type { ServerState } from '../../src/server/server-state.js';
import type { TemplateStore } from '../../src/state/template-store.js';
import type { TlsFiles } from '../../src/tls/tls-files.js';

export interface CapturedLog {
  readonly logger: Logger;
  readonly lines: Record<string, unknown>[];
}

/** A pino logger whose JSON lines are kept for assertions. */
export function captureLog(level = 'debug'): CapturedLog {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level }, stream), lines };
}

export interface TestCertificates extends TlsFiles {
  readonly dir: string;
  readonly ca: string;
}

/** A fresh CA and serving certificate (localhost, 127.0.0.1, ::1) in a temp dir. */
export async function makeTestCertificates(): Promise<TestCertificates> {
  const dir = mkdtempSync(join(tmpdir(), 'ei-certs-'));
  await writeCertificateFiles(dir, []);
  return { dir, certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), ca: readFileSync(join(dir, 'ca.crt'), 'utf8') };
}

export interface TestServer extends RunningServer {
  readonly state: ServerState;
  readonly metrics: InjectorMetrics;
  readonly templates: TemplateStore;
  readonly url: string;
  readonly ca: string;
  readonly log: CapturedLog;
  readonly certs: TestCertificates;
}

/** The real server on 127.0.0.1 and an ephemeral port, with the bundled template unless told otherwise. */
export async function startTestServer(
  overrides: Partial<Omit<ServeOptions, 'state' | 'metrics'>> & { templates?: TemplateSet | null; decisionOptions?: DecisionOptions; certs?: TestCertificates } = {},
): Promise<TestServer> {
  const { templates: templateOverride, certs: certOverride, ...options } = overrides;
  const certs = certOverride ?? (await makeTestCertificates());
  const log = captureLog();
  const templates = templateOverride === undefined ? parseTemplateData(BUNDLED_TEMPLATE_DATA) : templateOverride;
  const { state, metrics } = createServerState(log.logger, templates === null ? undefined : { set: templates, source: 'test' });
  const server = await startServer({
    port: 0,
    host: '127.0.0.1',
    tls: { files: { certFile: certs.certFile, keyFile: certs.keyFile } },
    tlsReloadIntervalMs: 50,
    maxConnections: 1024,
    shutdownDelayMs: 0,
    shutdownTimeoutMs: 5000,
    decisionOptions: { injectorNamespace: 'envoy-injector' },
    log: log.logger,
    ...options,
    state,
    metrics,
  });
  return Object.assign(server, { state, metrics, templates: state.templates, url: `https://127.0.0.1:${server.port}`, ca: certs.ca, log, certs });
}
