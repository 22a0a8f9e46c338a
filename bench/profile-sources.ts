/**
 * Where a profiled frame's code comes from: the bundle (dist/bundle/, or
 * any script with a linked `.map`) mapped back through its source map to
 * `src/…` or `node_modules/…`, relative to the repository.
 */
import { existsSync, readFileSync } from 'node:fs';
import { SourceMap, type SourceMapPayload } from 'node:module';
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Locate, SourceLocation } from './cpu-profile.js';

/** A Locate over the source maps next to the profiled scripts; a script without one is named by its own path. */
export function sourceMapLocator(root: string): Locate {
  const maps = new Map<string, SourceMap | undefined>();
  const mapOf = (file: string): SourceMap | undefined => {
    if (!maps.has(file)) {
      const mapFile = `${file}.map`;
      maps.set(file, existsSync(mapFile) ? new SourceMap(JSON.parse(readFileSync(mapFile, 'utf8')) as SourceMapPayload) : undefined);
    }
    return maps.get(file);
  };
  const fromRoot = (file: string): string => relative(root, file).split('\\').join('/');
  return (url: string, line: number, column: number): SourceLocation | undefined => {
    if (!url.startsWith('file://')) return undefined;
    const file = fileURLToPath(url);
    const map = mapOf(file);
    if (map === undefined) return { source: fromRoot(file), line: line + 1 };
    const entry = map.findEntry(line, column) as Partial<{ originalSource: string; originalLine: number }>;
    if (entry.originalSource === undefined) return { source: fromRoot(file), line: line + 1 };
    // Node 20 gives the map's own (relative) source; later versions a file URL.
    const original = entry.originalSource.startsWith('file://') ? fileURLToPath(entry.originalSource) : isAbsolute(entry.originalSource) ? entry.originalSource : resolve(dirname(file), entry.originalSource);
    return { source: fromRoot(original), line: entry.originalLine === undefined ? undefined : entry.originalLine + 1 };
  };
}
