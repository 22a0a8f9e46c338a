/**
 * A Dockerfile read into stages and instructions: enough to check it and to
 * replay its COPY and RUN steps without a Docker engine. Continuation lines
 * (`\`) are joined; comments and parser directives are dropped.
 */

export interface Instruction {
  readonly op: string;
  /** Everything after the keyword, continuations joined with a space. */
  readonly args: string;
  readonly line: number;
}

export interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: readonly Instruction[];
}

export function parseDockerfile(text: string): Stage[] {
  const instructions: Instruction[] = [];
  const lines = text.split('\n');
  for (let index = 0; index < lines.length; index += 1) {
    const first = index + 1;
    let line = (lines[index] ?? '').trim();
    if (line === '' || line.startsWith('#')) continue;
    while (line.endsWith('\\') && index + 1 < lines.length) {
      index += 1;
      const next = (lines[index] ?? '').trim();
      line = `${line.slice(0, -1).trimEnd()} ${next.startsWith('#') ? '' : next}`.trim();
    }
    const match = /^(\S+)\s*(.*)$/.exec(line);
    if (match === null) continue;
    instructions.push({ op: (match[1] ?? '').toUpperCase(), args: (match[2] ?? '').trim(), line: first });
  }
  const stages: { image: string; name: string | undefined; instructions: Instruction[] }[] = [];
  for (const instruction of instructions) {
    if (instruction.op === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/).filter((word) => !word.startsWith('--'));
      if (image === undefined) throw new Error(`line ${instruction.line}: FROM without an image`);
      stages.push({ image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else if (instruction.op === 'ARG' && stages.length === 0) {
      continue;
    } else {
      const stage = stages.at(-1);
      if (stage === undefined) throw new Error(`line ${instruction.line}: ${instruction.op} before FROM`);
      stage.instructions.push(instruction);
    }
  }
  return stages;
}

export function instructionsOf(stage: Stage, op: string): Instruction[] {
  return stage.instructions.filter((instruction) => instruction.op === op);
}

/** The JSON (exec) form of ENTRYPOINT/CMD; undefined for the shell form. */
export function execForm(instruction: Instruction): string[] | undefined {
  try {
    const parsed: unknown = JSON.parse(instruction.args);
    return Array.isArray(parsed) && parsed.every((word) => typeof word === 'string') ? (parsed as string[]) : undefined;
  } catch {
    return undefined;
  }
}

export interface CopyStep {
  readonly from: string | undefined;
  readonly sources: readonly string[];
  readonly destination: string;
  readonly line: number;
}

export function copySteps(stage: Stage): CopyStep[] {
  return instructionsOf(stage, 'COPY').map((instruction) => {
    const words = instruction.args.split(/\s+/);
    const from = words.find((word) => word.startsWith('--from='))?.slice('--from='.length);
    const paths = words.filter((word) => !word.startsWith('--'));
    const destination = paths.pop();
    if (destination === undefined || paths.length === 0) throw new Error(`line ${instruction.line}: COPY needs a source and a destination`);
    return { from, sources: paths, destination, line: instruction.line };
  });
}

/** The stage's working directory (the last WORKDIR; absolute paths only). */
export function workdirOf(stage: Stage): string {
  const workdir = instructionsOf(stage, 'WORKDIR').at(-1)?.args ?? '/';
  if (!workdir.startsWith('/')) throw new Error(`WORKDIR ${workdir}: only absolute paths are supported`);
  return workdir;
}

/**
 * A .dockerignore matcher for the patterns we use: `name`, `dir/name`, `*`
 * within a segment, and `!` exceptions; a pattern also ignores everything
 * beneath it. The last matching pattern wins, as in Docker.
 */
export function dockerIgnored(patterns: readonly string[], path: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const negate = raw.startsWith('!');
    const pattern = (negate ? raw.slice(1) : raw).replace(/^\/+|\/+$/g, '');
    if (pattern === '') continue;
    const regex = new RegExp(
      `^${pattern
        .split('/')
        .map((segment) => segment.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[^/]*'))
        .join('/')}(/.*)?$`,
    );
    if (regex.test(path.replace(/^\.\/|\/+$/g, ''))) ignored = !negate;
  }
  return ignored;
}

export function readDockerignore(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/**
 * The runtime image's command, split: the node binary, the V8/Node flags it
 * is given, then the script and its arguments. The bench runs ours with these
 * flags and `npm start` must use them too, so that what is measured and
 * tried is what ships.
 */
export function imageEntrypoint(text: string): { node: string; nodeFlags: string[]; script: string[] } {
  const runtime = parseDockerfile(text).at(-1);
  const entrypoint = runtime === undefined ? undefined : instructionsOf(runtime, 'ENTRYPOINT').at(-1);
  const words = entrypoint === undefined ? undefined : execForm(entrypoint);
  if (words === undefined) throw new Error('the runtime stage needs an ENTRYPOINT in exec (JSON) form: the runtime image has no shell');
  const [node, ...rest] = words;
  const firstScriptWord = rest.findIndex((word) => !word.startsWith('--'));
  if (node === undefined || firstScriptWord === -1) throw new Error(`ENTRYPOINT ${JSON.stringify(words)}: no script for node to run`);
  return { node, nodeFlags: rest.slice(0, firstScriptWord), script: rest.slice(firstScriptWord) };
}

/**
 * The runtime image's glibc malloc settings (its `ENV MALLOC_*`), as
 * `NAME=value` words: they shape the process's memory, so the bench runs ours
 * with them and `npm start` sets them, as it uses the ENTRYPOINT's node flags.
 */
export function imageMallocEnvironment(text: string): string[] {
  const runtime = parseDockerfile(text).at(-1);
  if (runtime === undefined) return [];
  return instructionsOf(runtime, 'ENV')
    .flatMap((instruction) => instruction.args.split(/\s+/))
    .filter((word) => /^MALLOC_[A-Z_]+=\S+$/.test(word));
}
