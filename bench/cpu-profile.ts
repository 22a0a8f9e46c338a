/**
 * What a V8 CPU profile (`.cpuprofile`, the inspector's Profiler.stop) says
 * of a review: self time per function of our code, per package of
 * node_modules, per Node module; and per stage of a review, each sample
 * given to the innermost frame of its stack that belongs to a stage. Pure:
 * where a frame's code comes from is asked of LOCATE (profile-sources.ts
 * reads the bundle's source maps).
 */

/** The parts of the `.cpuprofile` format read here (Chrome DevTools Protocol, Profiler.Profile). */
export interface CpuProfile {
  readonly nodes: readonly CpuProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  /** Microseconds from the previous sample (the first from startTime). */
  readonly timeDeltas?: readonly number[];
}

export interface CpuProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number; readonly columnNumber: number };
  readonly children?: readonly number[];
}

/** Where a frame's code is: a path relative to the repository (`src/…`, `node_modules/…`), and the line (1-based) when known. */
export interface SourceLocation {
  readonly source: string;
  readonly line?: number | undefined;
}

/** URL, 0-based line and column (as the profile gives them) to the original source; undefined when unknown. */
export type Locate = (url: string, line: number, column: number) => SourceLocation | undefined;

/** A frame as the summary sees it. */
export interface Frame {
  /** Our code: `name (src/file.ts:line)`; a package: `fastify`; Node: `node:internal/…`; V8: `(garbage collector)`, `(native) parse`. */
  readonly key: string;
  readonly kind: 'ours' | 'package' | 'node' | 'native' | 'special' | 'other';
  /** The function's name, a rename by the bundler (`answer2`) undone. */
  readonly name: string;
  /** The original source, relative to the repository, when known. */
  readonly source: string;
  readonly packageName?: string | undefined;
}

/** The stages of a review (bench/METHOD.md, the profile), and what is not one. */
export const STAGES = [
  'parse',
  'envelope checks',
  'decision',
  'memo',
  'patch',
  'events',
  'metrics',
  'logging',
  'answer',
  'our handler, other',
  'HTTP, TLS, Fastify (the floor has these too)',
  'GC',
  'V8, other',
] as const;
export type Stage = (typeof STAGES)[number];

/** What marks a frame as a stage's: a function name, a source file (a prefix), a package (with a file prefix inside it). */
interface StageRule {
  readonly stage: Stage;
  readonly names?: readonly string[];
  readonly sources?: readonly string[];
  readonly packages?: readonly string[];
}

/**
 * From a sample's leaf towards the root, the first frame one of these marks
 * names the stage: so a helper called by the decision is the decision's,
 * and the patch computed inside the memo's `answer` is the patch's.
 */
const STAGE_RULES: readonly StageRule[] = [
  { stage: 'parse', sources: ['node_modules/fastify/lib/content-type-parser.js'] },
  { stage: 'envelope checks', names: ['requestProblem'], sources: ['node_modules/fastify/lib/validation.js'] },
  { stage: 'decision', names: ['decideInjection', 'decideCapture', 'namespaceIfNeeded', 'chooseTemplate'], sources: ['src/injection/decision/decide-injection.ts', 'src/injection/decision/label-selector.ts', 'src/injection/traffic/capture.ts'] },
  { stage: 'memo', names: ['namespaceDefaultsKey', 'shape'], sources: ['src/admission/patch-memo.ts'] },
  { stage: 'patch', names: ['injectDecided', 'encodePatchPieces', 'encodePatch', 'fillPatch', 'serviceAccountTokenVolume'], sources: ['src/injection/merge/inject-pod.ts', 'src/injection/admit-pod.ts'] },
  { stage: 'events', names: ['recordWorkloadEvents', 'workloadNotices'], sources: ['src/events/'] },
  { stage: 'metrics', names: ['recordAdmission'], sources: ['src/server/metrics.ts'], packages: ['prom-client'] },
  { stage: 'logging', names: ['logAdmission'], packages: ['pino', 'pino-std-serializers', 'sonic-boom'] },
  { stage: 'answer', names: ['toReview', 'allowed', 'patched'], sources: ['node_modules/fastify/lib/reply.js'] },
];

/**
 * Fastify calls the route handler from inside the content-type parser's
 * callback (the body's last chunk): walking out of the handler, this frame
 * ends the search, so that the handler's own work is never the parse's.
 */
const HANDLER_CALL = 'node_modules/fastify/lib/handle-request.js';

const SPECIAL = new Set(['(root)', '(program)', '(idle)', '(garbage collector)']);

/** `answer2` → `answer`: esbuild renames a top-level name two modules share. */
function unrenamed(name: string): string {
  return name.replace(/(?<=[A-Za-z_$])\d+$/, '');
}

/** `node_modules/@scope/name/…` → `@scope/name`. */
export function packageOf(source: string): string | undefined {
  const at = source.lastIndexOf('node_modules/');
  if (at === -1) return undefined;
  const parts = source.slice(at + 'node_modules/'.length).split('/');
  const [first = '', second = ''] = parts;
  return first.startsWith('@') ? `${first}/${second}` : first;
}

export function classifyFrame(callFrame: CpuProfileNode['callFrame'], locate: Locate): Frame {
  const { functionName, url } = callFrame;
  const name = unrenamed(functionName);
  if (url === '') {
    if (SPECIAL.has(functionName)) return { key: functionName, kind: 'special', name, source: '' };
    return { key: `(native) ${functionName || '(anonymous)'}`, kind: 'native', name, source: '' };
  }
  if (url.startsWith('node:')) return { key: url, kind: 'node', name, source: url };
  const location = locate(url, callFrame.lineNumber, callFrame.columnNumber);
  const source = location?.source ?? url;
  const packageName = packageOf(source);
  if (packageName !== undefined) return { key: packageName, kind: 'package', name, source: source.slice(source.lastIndexOf('node_modules/')), packageName };
  if (source.startsWith('src/')) return { key: `${name || '(anonymous)'} (${source}${location?.line === undefined ? '' : `:${location.line}`})`, kind: 'ours', name, source };
  return { key: `${name || '(anonymous)'} (${source})`, kind: 'other', name, source };
}

function ruleMatches(rule: StageRule, frame: Frame): boolean {
  if (frame.kind === 'ours' || frame.kind === 'package' || frame.kind === 'other') {
    if (rule.names?.includes(frame.name) === true && frame.kind !== 'package') return true;
    if (rule.sources?.some((prefix) => frame.source.startsWith(prefix)) === true) return true;
    if (frame.packageName !== undefined && rule.packages?.includes(frame.packageName) === true) return true;
  }
  return false;
}

/** The stage of one sample, from its stack (leaf first): the first frame a rule marks, up to the handler's call. */
export function stageOf(stack: readonly Frame[]): Stage | 'idle' {
  const leaf = stack[0];
  if (leaf?.kind === 'special') {
    if (leaf.key === '(idle)') return 'idle';
    if (leaf.key === '(garbage collector)') return 'GC';
    return 'V8, other';
  }
  let ours = false;
  for (const frame of stack) {
    if (frame.source.startsWith(HANDLER_CALL)) break;
    const rule = STAGE_RULES.find((candidate) => ruleMatches(candidate, frame));
    if (rule !== undefined) return rule.stage;
    ours ||= frame.kind === 'ours';
  }
  return ours ? 'our handler, other' : 'HTTP, TLS, Fastify (the floor has these too)';
}

export interface TimeShare {
  readonly key: string;
  readonly microseconds: number;
  /** Of the busy time (all but idle). */
  readonly share: number;
}

export interface ProfileSummary {
  /** Sampled time (samples × their median interval), idle excluded, microseconds. */
  readonly busyMicroseconds: number;
  readonly idleMicroseconds: number;
  readonly samples: number;
  /** Self time of our functions (src/), highest first. */
  readonly ours: readonly TimeShare[];
  /** Self time grouped: by package (node_modules), Node module, V8 builtin; our code as one line. Highest first. */
  readonly groups: readonly TimeShare[];
  /** Every stage, in STAGES order (those with no sample at 0). */
  readonly stages: readonly TimeShare[];
}

/**
 * The weight of a sample: the median interval between samples, the same for
 * all. V8 takes its samples on wall-clock time, so on a busy machine the
 * time to the next sample includes time the process waited for a core:
 * weighing each sample by it would blame whatever ran before a wait.
 */
function sampleWeight(profile: CpuProfile): number {
  const deltas = [...(profile.timeDeltas ?? [])].filter((delta) => delta > 0).sort((a, b) => a - b);
  if (deltas.length === 0) return (profile.endTime - profile.startTime) / Math.max(1, profile.samples?.length ?? 0);
  const middle = Math.floor(deltas.length / 2);
  return deltas.length % 2 === 1 ? (deltas[middle] ?? 0) : ((deltas[middle - 1] ?? 0) + (deltas[middle] ?? 0)) / 2;
}

function ranked(times: ReadonlyMap<string, number>, busy: number): TimeShare[] {
  return [...times.entries()].map(([key, microseconds]) => ({ key, microseconds, share: busy === 0 ? 0 : microseconds / busy })).sort((a, b) => b.microseconds - a.microseconds);
}

function add(into: Map<string, number>, key: string, value: number): void {
  into.set(key, (into.get(key) ?? 0) + value);
}

export function summariseProfile(profile: CpuProfile, locate: Locate): ProfileSummary {
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const frames = new Map(profile.nodes.map((node) => [node.id, classifyFrame(node.callFrame, locate)]));
  const stackOf = new Map<number, Frame[]>();
  const stack = (id: number): Frame[] => {
    const known = stackOf.get(id);
    if (known !== undefined) return known;
    const chain: Frame[] = [];
    for (let current: number | undefined = id; current !== undefined; current = parents.get(current)) {
      const frame = frames.get(current);
      if (frame !== undefined) chain.push(frame);
    }
    stackOf.set(id, chain);
    return chain;
  };
  const self = new Map<number, number>();
  const stages = new Map<string, number>();
  let idle = 0;
  const duration = sampleWeight(profile);
  (profile.samples ?? []).forEach((id) => {
    const stage = stageOf(stack(id));
    if (stage === 'idle') {
      idle += duration;
      return;
    }
    add(stages, stage, duration);
    self.set(id, (self.get(id) ?? 0) + duration);
  });
  const ours = new Map<string, number>();
  const groups = new Map<string, number>();
  let busy = 0;
  for (const [id, microseconds] of self) {
    busy += microseconds;
    const frame = frames.get(id);
    if (frame === undefined) continue;
    if (frame.kind === 'ours') {
      add(ours, frame.key, microseconds);
      add(groups, 'our code (src/)', microseconds);
    } else add(groups, frame.kind === 'node' ? nodeModuleGroup(frame.key) : frame.key, microseconds);
  }
  return {
    busyMicroseconds: busy,
    idleMicroseconds: idle,
    samples: profile.samples?.length ?? 0,
    ours: ranked(ours, busy),
    groups: ranked(groups, busy),
    stages: STAGES.map((stage) => ({ key: stage, microseconds: stages.get(stage) ?? 0, share: busy === 0 ? 0 : (stages.get(stage) ?? 0) / busy })),
  };
}

/** `node:internal/tls/wrap` stays; `node:internal/streams/writable` → `node:internal/streams`: a few lines, not dozens. */
function nodeModuleGroup(url: string): string {
  const parts = url.split('/');
  return parts[0] === 'node:internal' && parts.length > 2 ? parts.slice(0, 2).join('/') : url;
}
