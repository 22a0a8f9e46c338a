import { execFile } from 'node:child_process';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import {
  chainedFileName,
  chainedResult,
  CNI_PLUGIN_TYPE,
  cniError,
  decideSetUp,
  holdsOurEntry,
  insertChainEntry,
  parseShimRequest,
  podOfRequest,
  primaryConfigFile,
  removeChainEntry,
  shimAnswer,
  sourceFileNames,
  type ChainEdit,
  type ChainEntry,
  type ShimRequest,
} from './cni/index.js';
import type { JsonObject } from '../injection/index.js';
import type { SetUpResult } from './agent-metrics.js';

/**
 * The node agent's I/O around cni/ (docs/design.md §11, CNI mode): the
 * plugin installed into the node's CNI folders and taken out again, and the
 * shim's requests answered, the rules run in the Pod's network namespace.
 * The Pod comes from functions, so that the agent's watch (or a test) gives it.
 */

/** CNI error code 11: "try again later" (the kubelet retries the sandbox). */
const TRY_AGAIN = 11;
/** Bounds the Pod's read and the rule script's run: the shim waits 10 s in all. */
const STEP_TIMEOUT_MS = 4_000;

export interface AgentDeps {
  /** The Pod, or undefined when the API says it does not exist (under UID, when given); throws when the API cannot be asked. */
  readonly readPod: (namespace: string, name: string, uid?: string) => Promise<JsonObject | undefined>;
  /** The Pod from the agent's watch, at once, when it holds it (under UID, when given): what an ADD is judged by first. */
  readonly cachedPod?: (namespace: string, name: string, uid?: string) => JsonObject | undefined;
  /** Whether the injector never captures Pods of this namespace: such a Pod the cache lacks passes at once, the API never asked. */
  readonly neverCaptured?: (namespace: string) => boolean;
  /** Installs the rules in the network namespace at this path (init/capture-rules.sh with these arguments); throws on failure. */
  readonly runRules: (netns: string, args: readonly string[]) => Promise<void>;
  /** Told how each ADD for a Pod was answered (the agent's metrics). */
  readonly countSetUp?: (result: SetUpResult) => void;
}

/** The answer to one shim request: ADD installs the rules for a Pod in CNI mode and passes the previous result on; DEL and CHECK have nothing to undo. */
export async function answerShim(request: ShimRequest, deps: AgentDeps): Promise<string> {
  if (request.env['CNI_COMMAND'] !== 'ADD') return shimAnswer(0, '');
  const { answer, counted } = await answerAdd(request, deps);
  deps.countSetUp?.(counted);
  return answer;
}

async function answerAdd(request: ShimRequest, deps: AgentDeps): Promise<{ answer: string; counted: SetUpResult }> {
  const fail = (message: string): { answer: string; counted: SetUpResult } => ({ answer: shimAnswer(1, cniError(request.config, TRY_AGAIN, message)), counted: 'error' });
  const result = chainedResult(request.config);
  if ('problem' in result) return { answer: shimAnswer(1, cniError(request.config, 1, result.problem)), counted: 'error' };
  const passed = { answer: shimAnswer(0, result.result), counted: 'skipped' as SetUpResult };
  const ref = podOfRequest(request.env);
  // Not a Kubernetes Pod (no K8S_POD_* arguments): nothing of ours.
  if (ref === undefined) return passed;
  let pod = deps.cachedPod?.(ref.namespace, ref.name, ref.uid);
  // Never captured: nothing to wait for (an API outage must not hold CoreDNS).
  if (pod === undefined && deps.neverCaptured?.(ref.namespace) === true) return passed;
  try {
    pod ??= await bounded(deps.readPod(ref.namespace, ref.name, ref.uid), `reading Pod ${ref.namespace}/${ref.name}`);
  } catch (error) {
    return fail(`cannot read Pod ${ref.namespace}/${ref.name} to judge its capture: ${(error as Error).message}`);
  }
  if (pod === undefined) return fail(`Pod ${ref.namespace}/${ref.name} not found (yet): its capture cannot be judged`);
  const decision = decideSetUp(pod);
  if (decision.kind === 'error') return fail(`Pod ${ref.namespace}/${ref.name}: ${decision.message}`);
  if (decision.kind === 'capture') {
    const netns = request.env['CNI_NETNS'] ?? '';
    try {
      await bounded(deps.runRules(netns, decision.args), 'installing the capture rules');
    } catch (error) {
      return fail(`Pod ${ref.namespace}/${ref.name}: the capture rules failed in ${netns}: ${(error as Error).message}`);
    }
    return { ...passed, counted: 'captured' };
  }
  return passed;
}

function bounded<T>(promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${STEP_TIMEOUT_MS / 1000} s`)), STEP_TIMEOUT_MS)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** The rule script run in the namespace at `netns` with nsenter (the agent's own iptables; only the network namespace changes). */
export function rulesRunner(script: string): AgentDeps['runRules'] {
  return (netns, args) =>
    new Promise((resolve, reject) => {
      execFile('nsenter', [`--net=${netns}`, 'sh', script, ...args], { timeout: STEP_TIMEOUT_MS }, (error, _stdout, stderr) =>
        error === null ? resolve() : reject(new Error(stderr.trim().split('\n').at(-1) ?? error.message)),
      );
    });
}

/** Serves the shim on a Unix socket: one request per connection, answered when the shim has sent it all. */
export async function serveShim(socketPath: string, deps: AgentDeps): Promise<Server> {
  await rm(socketPath, { force: true });
  const server = createServer({ allowHalfOpen: true }, (connection) => {
    const chunks: Buffer[] = [];
    connection.on('data', (chunk: Buffer) => chunks.push(chunk));
    connection.on('error', () => connection.destroy());
    connection.on('end', () => {
      void answerShim(parseShimRequest(Buffer.concat(chunks).toString('utf8')), deps).then((answer) => connection.end(answer));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => resolve());
  });
  return server;
}

export interface PluginPlaces {
  /** The shim binary to copy (in the agent's image). */
  readonly plugin: string;
  readonly binDir: string;
  readonly confDir: string;
  readonly agentSocket: string;
}

/**
 * Copies the shim into the CNI binary folder and puts our entry last in the
 * primary configuration; both atomically (a file beside, then a rename). A
 * single network (`.conf`, `.json`) becomes a `.conflist` of the same name,
 * the `.conf` removed (`chainedFileName`).
 */
export async function installPlugin(places: PluginPlaces): Promise<ChainEdit & { file?: string }> {
  const target = join(places.binDir, CNI_PLUGIN_TYPE);
  // Copied when absent or different (a new agent's): the runtime may exec it at any moment, hence the rename.
  const [source, present] = await Promise.all([readFile(places.plugin), readFile(target).catch(() => undefined)]);
  if (present === undefined || !source.equals(present)) {
    await writeFile(`${target}.tmp`, source, { mode: 0o755 });
    await rename(`${target}.tmp`, target);
  }
  const names = await readdir(places.confDir);
  const file = primaryConfigFile(names);
  if (file === undefined) return { problem: `no CNI configuration in ${places.confDir}` };
  const before = await readFile(join(places.confDir, file), 'utf8');
  const edit = insertChainEntry(before, entryOf(places));
  if (!('changed' in edit) || !edit.changed) return { ...edit, file };
  const chained = chainedFileName(file);
  if (chained !== file && names.includes(chained)) {
    // Ours from an earlier insert (the primary CNI wrote its .conf again): replaced; another's: left alone.
    if (!holdsOurEntry(await readFile(join(places.confDir, chained), 'utf8'))) return { problem: `${file} is a single network and ${chained} beside it is not ours: cannot chain into it` };
  }
  // What the primary CNI wrote (no entry of ours in it): kept for the uninstall, byte for byte.
  if (!holdsOurEntry(before)) await writeAtomically(places.confDir, originalName(file), before, 0o600);
  await writeAtomically(places.confDir, chained, edit.text, 0o644);
  if (chained !== file) await rm(join(places.confDir, file), { force: true });
  return { ...edit, file: chained };
}

/**
 * Takes our entry out of the primary configuration and the shim out of the
 * binary folder. The configuration is given back as the primary CNI last
 * wrote it (a `.conf` made a `.conflist` back under its own name) when it is
 * still what our insert made of that; edited since by another hand, only our
 * entry is taken out.
 */
export async function uninstallPlugin(places: PluginPlaces): Promise<ChainEdit & { file?: string }> {
  const file = primaryConfigFile(await readdir(places.confDir));
  if (file === undefined) return { problem: `no CNI configuration in ${places.confDir}` };
  const path = join(places.confDir, file);
  const text = await readFile(path, 'utf8');
  const sources = sourceFileNames(file);
  let restored: { name: string; text: string } | undefined;
  for (const name of sources) {
    const original = await readFile(join(places.confDir, originalName(name)), 'utf8').catch(() => undefined);
    if (original !== undefined && unchangedSince(original, text, places)) {
      restored = { name, text: original };
      break;
    }
  }
  let result: ChainEdit & { file?: string };
  if (restored !== undefined) {
    await writeAtomically(places.confDir, restored.name, restored.text, 0o644);
    if (restored.name !== file) await rm(path, { force: true });
    result = { changed: restored.name !== file || restored.text !== text, text: restored.text, file: restored.name };
  } else {
    const edit = removeChainEntry(text);
    if ('changed' in edit && edit.changed) await writeAtomically(places.confDir, file, edit.text, 0o644);
    result = { ...edit, file };
  }
  for (const name of sources) await rm(join(places.confDir, originalName(name)), { force: true });
  // The primary CNI wrote its .conf again and no round chained it since: our .conflist of it, left beside, goes too.
  const stale = chainedFileName(file);
  if (stale !== file) {
    const beside = await readFile(join(places.confDir, stale), 'utf8').catch(() => undefined);
    if (beside !== undefined && holdsOurEntry(beside)) await rm(join(places.confDir, stale), { force: true });
  }
  await rm(join(places.binDir, CNI_PLUGIN_TYPE), { force: true });
  return result;
}

const entryOf = (places: PluginPlaces): ChainEntry => ({ type: CNI_PLUGIN_TYPE, agentSocket: places.agentSocket });

/** Whether TEXT is what inserting our entry into ORIGINAL gives. */
function unchangedSince(original: string, text: string, places: PluginPlaces): boolean {
  const inserted = insertChainEntry(original, entryOf(places));
  return 'text' in inserted && inserted.text === text;
}

/** Beside the configuration; the runtime reads every file of the folder: ours must not look like a configuration. */
const originalName = (file: string): string => `.${file}.envoy-injector-original`;

/** Written beside under a name the runtime never reads (a dot first), then renamed: the runtime reads every file of the folder. */
async function writeAtomically(confDir: string, name: string, text: string, mode: number): Promise<void> {
  const temporary = join(confDir, `.${name}.envoy-injector`);
  await writeFile(temporary, text, { mode });
  await rename(temporary, join(confDir, name));
}
