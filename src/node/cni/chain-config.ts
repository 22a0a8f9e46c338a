/**
 * The node agent's edit of the primary CNI's configuration (docs/design.md
 * §11, CNI mode): our plugin appended to the chain of the first network
 * configuration list, taken out again on stop. Pure: text in, text out; the
 * agent reads and writes the files (atomically).
 */

/** The plugin's `type` (its binary's name in the CNI binary folder). */
export const CNI_PLUGIN_TYPE = 'envoy-injector-cni';

export interface ChainEntry {
  readonly type: typeof CNI_PLUGIN_TYPE;
  /** Where the plugin finds the agent. */
  readonly agentSocket: string;
}

/**
 * The configuration the runtime uses: the first `.conflist`, `.conf` or
 * `.json` file in name order, as libcni's `ConfFiles` and containerd pick it.
 */
export function primaryConfigFile(names: readonly string[]): string | undefined {
  return [...names].filter((name) => /\.(conflist|conf|json)$/.test(name)).sort()[0];
}

/**
 * The file the chained list goes to. A list must be a `.conflist`: containerd
 * (go-cni) and CRI-O read a `.conf` or `.json` file as one network and refuse
 * one that holds a list, so a single network's file is made a `.conflist` of
 * the same name, which the runtime then picks in its place.
 */
export function chainedFileName(file: string): string {
  return file.replace(/\.(conf|json)$/, '.conflist');
}

/** The files the primary CNI may have written that FILE holds now: itself, and for a `.conflist` the single network's `.conf` or `.json` it was made from. */
export function sourceFileNames(file: string): string[] {
  const base = file.replace(/\.conflist$/, '');
  return base === file ? [file] : [file, `${base}.conf`, `${base}.json`];
}

export type ChainEdit = { readonly changed: false; readonly text: string } | { readonly changed: true; readonly text: string } | { readonly problem: string };

/**
 * Appends the entry to the list's plugins (a single `.conf` network becomes a
 * list of it); already last with the same settings: unchanged. Our entry
 * anywhere else, or twice, is moved to the end once.
 */
export function insertChainEntry(text: string, entry: ChainEntry): ChainEdit {
  const parsed = parseConfig(text);
  if (typeof parsed === 'string') return { problem: parsed };
  const others = parsed.plugins.filter((plugin) => plugin['type'] !== CNI_PLUGIN_TYPE);
  const last = parsed.plugins.at(-1);
  if (others.length === parsed.plugins.length - 1 && last !== undefined && last['type'] === CNI_PLUGIN_TYPE && last['agentSocket'] === entry.agentSocket) {
    return { changed: false, text };
  }
  return { changed: true, text: `${JSON.stringify({ ...parsed.list, plugins: [...others, { ...entry }] }, null, 2)}\n` };
}

/** The configuration without our entry; unchanged when it has none. A single network stays a list (in its `.conflist`). */
export function removeChainEntry(text: string): ChainEdit {
  const parsed = parseConfig(text);
  if (typeof parsed === 'string') return { problem: parsed };
  const others = parsed.plugins.filter((plugin) => plugin['type'] !== CNI_PLUGIN_TYPE);
  if (others.length === parsed.plugins.length) return { changed: false, text };
  return { changed: true, text: `${JSON.stringify({ ...parsed.list, plugins: others }, null, 2)}\n` };
}

/** Whether TEXT is a configuration holding our entry (what an insert of ours made); false for one without it, or not a configuration. */
export function holdsOurEntry(text: string): boolean {
  const removed = removeChainEntry(text);
  return 'changed' in removed && removed.changed;
}

type Plugin = Record<string, unknown>;

/** The list's own fields and its plugins; a single network (`.conf`) as a list of one, its name and version lifted. */
function parseConfig(text: string): { list: Record<string, unknown>; plugins: Plugin[] } | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return `not JSON (${(error as Error).message})`;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not a JSON object';
  const object = value as Record<string, unknown>;
  const plugins = object['plugins'];
  if (plugins === undefined) {
    if (typeof object['type'] !== 'string') return 'neither a list (plugins) nor a network (type)';
    const { name, cniVersion, ...plugin } = object;
    return { list: { cniVersion, name }, plugins: [plugin] };
  }
  if (!Array.isArray(plugins) || !plugins.every((plugin) => typeof plugin === 'object' && plugin !== null && !Array.isArray(plugin))) return 'plugins: not a list of objects';
  return { list: object, plugins: plugins as Plugin[] };
}
