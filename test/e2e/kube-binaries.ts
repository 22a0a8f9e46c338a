import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync } from 'node:fs';
import { chmod, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { ROOT } from '../helpers/fixtures.js';
import { withLock } from '../helpers/lock.js';
import { isExecutable } from '../helpers/packed-binary.js';

/** The Kubernetes versions tested for real, newest first. */
export const KUBE_VERSIONS = ['1.36', '1.34', '1.28'] as const;
export type KubeVersion = (typeof KUBE_VERSIONS)[number];
export type KubeBinary = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kubelet' | 'crictl';

/**
 * Where the control-plane binaries come from: KUBE_ASSETS (relative to the
 * repository), set by .ci/run; no default, as no path outside the
 * repository is named here. Undefined when unset.
 */
export function kubeAssetsDir(): string | undefined {
  const given = process.env['KUBE_ASSETS'];
  return given !== undefined && given !== '' ? resolve(ROOT, given) : undefined;
}

/** Why the assets cannot be used, in one line naming KUBE_ASSETS; undefined when they can. */
export function missingAssets(dir = kubeAssetsDir()): string | undefined {
  if (dir === undefined) return 'KUBE_ASSETS is not set: no Kubernetes binaries for the real API server tests';
  for (const file of ['SHA256SUMS', 'etcd.xz', ...KUBE_VERSIONS.flatMap((version) => [`${version}/kube-apiserver.xz`, `${version}/kube-controller-manager.xz`])]) {
    if (!existsSync(join(dir, file))) return `KUBE_ASSETS=${dir}: ${file} is missing (expected a folder laid out like kube-assets: SHA256SUMS, etcd.xz, <version>/kube-apiserver.xz ...)`;
  }
  return undefined;
}

/** For a diagnostic script: exits 2 with missingAssets' reason when the assets cannot be used. */
export function exitWithoutAssets(): void {
  const missing = missingAssets();
  if (missing === undefined) return;
  process.stderr.write(`${missing}\n`);
  process.exit(2);
}

const CACHE = join(ROOT, 'node_modules', '.cache', 'envoy-injector-kube');

/**
 * The path of an uncompressed, executable BINARY, decompressed once per
 * machine into a cache the tests own (the assets folder is read-only in CI)
 * and checked against SHA256SUMS. The cache is keyed by the checksum, so new
 * assets never meet stale binaries.
 */
export async function kubeBinary(binary: KubeBinary, version: KubeVersion): Promise<string> {
  const assets = kubeAssetsDir();
  const problem = missingAssets(assets);
  if (problem !== undefined || assets === undefined) throw new Error(problem);
  const relative = binary === 'etcd' || binary === 'crictl' ? binary : `${version}/${binary}`;
  const sums = await readFile(join(assets, 'SHA256SUMS'), 'utf8');
  const sha = sums.split('\n').map((line) => line.trim().split(/\s+/)).find(([, name]) => name === relative)?.[0];
  if (sha === undefined) throw new Error(`KUBE_ASSETS=${assets}: SHA256SUMS has no line for ${relative}`);
  const target = join(CACHE, `${binary}-${sha.slice(0, 16)}`);
  if (await isExecutable(target)) return target;
  await withLock('kube-binaries', async () => {
    if (await isExecutable(target)) return; // made by another process while we waited
    await mkdir(CACHE, { recursive: true });
    const staged = `${target}.${process.pid}.tmp`;
    try {
      await decompress(join(assets, `${relative}.xz`), staged);
      const actual = await sha256(staged);
      if (actual !== sha) throw new Error(`${relative}: SHA-256 ${actual} does not match SHA256SUMS (${sha})`);
      await chmod(staged, 0o755);
      await rename(staged, target); // atomic: a concurrent reader sees all of it or nothing
    } finally {
      await rm(staged, { force: true });
    }
  });
  return target;
}

async function decompress(source: string, destination: string): Promise<void> {
  const xz = spawn('xz', ['-dc', source], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  xz.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve, reject) => {
    xz.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new Error('xz is not installed: it is needed to decompress the Kubernetes binaries (apt-get install xz-utils)') : error),
    );
    xz.once('close', resolve);
  });
  await Promise.all([pipeline(xz.stdout, createWriteStream(destination)), exited]);
  const code = await exited;
  if (code !== 0) throw new Error(`xz -dc ${source} exited with ${code}: ${stderr.trim()}`);
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}
