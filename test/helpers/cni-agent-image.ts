/**
 * The CNI agent's image (cni/Dockerfile) replayed without a Docker engine:
 * its last stage's packages, files, ENTRYPOINT, USER, ENV and WORKDIR. The
 * build stage's output is the repository's own `npm run build` (that stage
 * must be the injector Dockerfile's own), the node binary is the one given,
 * and the shim stage's `gcc` lines run here (gcc and libc6-dev, as that
 * stage installs), into WORK. test/cni-agent-image.test.ts lays it out and
 * runs it; the node tier (test/node/cni-agent-image.ts) builds it.
 */
import { execFile } from 'node:child_process';
import { mkdir, readFile, readdir, stat } from 'node:fs/promises';
import { basename, join, relative } from 'node:path';
import { promisify } from 'node:util';
import { copySteps, execForm, instructionsOf, parseDockerfile, workdirOf, type Stage } from './dockerfile.js';
import { ROOT } from './fixtures.js';

const run = promisify(execFile);

export const CNI_DOCKERFILE = join(ROOT, 'cni', 'Dockerfile');

export interface LaidOutFile {
  readonly path: string;
  readonly content: Buffer;
  readonly mode?: number;
}

export interface AgentImage {
  readonly base: string;
  /** What the last stage's `apt-get install` lines name. */
  readonly packages: readonly string[];
  readonly files: readonly LaidOutFile[];
  readonly entrypoint: readonly string[];
  readonly env: readonly string[];
  readonly workdir: string;
  readonly user: string | undefined;
}

export function aptPackages(stage: Stage): string[] {
  return instructionsOf(stage, 'RUN').flatMap((instruction) => {
    const match = /apt-get install ((?:-\S+\s+)*)([^&;|]+)/.exec(instruction.args);
    return match === null ? [] : (match[2] ?? '').trim().split(/\s+/);
  });
}

async function filesUnder(source: string, destination: string): Promise<LaidOutFile[]> {
  const info = await stat(source);
  if (!info.isDirectory()) return [{ path: destination, content: await readFile(source), mode: info.mode & 0o777 }];
  const files: LaidOutFile[] = [];
  for (const entry of await readdir(source, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.push({ path: join(destination, relative(source, path)), content: await readFile(path), mode: (await stat(path)).mode & 0o777 });
  }
  return files;
}

/** The shim stage replayed: its COPY of local files and its gcc RUN lines, absolute paths under WORK. */
async function replayShim(stage: Stage, work: string): Promise<void> {
  const inWork = (path: string): string => (path.startsWith('/') ? join(work, path) : path);
  for (const copy of copySteps(stage)) {
    for (const source of copy.sources) {
      await mkdir(join(inWork(copy.destination), '..'), { recursive: true });
      await run('cp', [join(ROOT, source), inWork(copy.destination)]);
    }
  }
  for (const instruction of instructionsOf(stage, 'RUN')) {
    if (/^apt-get update\b/.test(instruction.args)) continue;
    const words = instruction.args.split(/\s+/);
    if (words[0] !== 'gcc') throw new Error(`cni/Dockerfile line ${instruction.line}: the shim stage's RUN ${words[0]} is not replayed`);
    await run('gcc', words.slice(1).map(inWork));
  }
}

export async function agentImage(node: string, work: string): Promise<AgentImage> {
  const stages = parseDockerfile(await readFile(CNI_DOCKERFILE, 'utf8'));
  const runtime = stages.at(-1);
  if (runtime === undefined || stages.length !== 3) throw new Error(`cni/Dockerfile: ${stages.length} stages, the replay knows build, shim and runtime`);
  for (const instruction of runtime.instructions) {
    if (!['RUN', 'WORKDIR', 'ENV', 'COPY', 'USER', 'ENTRYPOINT'].includes(instruction.op)) throw new Error(`cni/Dockerfile line ${instruction.line}: ${instruction.op} is not replayed`);
  }
  const workdir = workdirOf(runtime);
  const files: LaidOutFile[] = [];
  for (const copy of copySteps(runtime)) {
    const from = copy.from === undefined ? undefined : stages.find((stage) => stage.name === copy.from);
    if (copy.from !== undefined && from === undefined) throw new Error(`cni/Dockerfile line ${copy.line}: no stage ${copy.from}`);
    const folder = copy.destination.startsWith('/') ? copy.destination : join(workdir, copy.destination);
    for (const source of copy.sources) {
      const destination = copy.destination.endsWith('/') ? join(folder, basename(source)) : folder;
      if (from === undefined) files.push(...(await filesUnder(join(ROOT, source), destination)));
      else if (source === '/usr/local/bin/node') files.push({ path: destination, content: await readFile(node), mode: 0o755 });
      else if (instructionsOf(from, 'RUN').some((instruction) => instruction.args === 'npm run build')) {
        files.push(...(await filesUnder(join(ROOT, relative(workdirOf(from), source)), destination)));
      } else {
        await replayShim(from, work);
        files.push({ path: destination, content: await readFile(join(work, source)), mode: 0o755 });
      }
    }
  }
  const entrypoint = instructionsOf(runtime, 'ENTRYPOINT').map(execForm).at(-1);
  if (entrypoint === undefined) throw new Error('cni/Dockerfile: no ENTRYPOINT in exec form');
  return {
    base: runtime.image,
    packages: aptPackages(runtime),
    files,
    entrypoint,
    env: instructionsOf(runtime, 'ENV').map((instruction) => instruction.args.replace(/^(\S+?)[= ]/, '$1=')),
    workdir,
    user: instructionsOf(runtime, 'USER').at(-1)?.args,
  };
}
