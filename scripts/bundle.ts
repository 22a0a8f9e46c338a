/**
 * `npm run build`, second step: bundles tsc's output (dist/main.js) and every
 * runtime dependency into dist/bundle/, the only code the image ships.
 *
 * Why a bundle: @kubernetes/client-node's entry point loads all of its
 * generated API classes (21 MB of JavaScript) whatever one uses; tree-shaken
 * and minified, what the injector uses is about 3 MB. Measured with
 * `npm run bench` on one machine: RSS at rest in a cluster 107 → 77 MiB,
 * cold start with watches 550 → 236 ms, local 270 → 163 ms.
 *
 * Identifiers are not minified, so stack traces keep function names (esbuild
 * only renames a top-level name that two modules share, e.g. `DiagAPI2`; our
 * errors are told apart by `code`, never by name). The linked source maps
 * give file and line with `NODE_OPTIONS=--enable-source-maps`.
 *
 * Not `keepNames`: it wraps every function created at run time in an
 * `Object.defineProperty` of its name, closures made per request included,
 * which cost 12 µs of CPU per seed review (54 → 42 µs, the floor 34).
 *
 * Code splitting keeps what local mode never needs (client-node, the
 * certificate maker) in chunks loaded on first use, and each command's code
 * in its own (src/cli.ts): `serve` loads no CLI renderer nor, in webhook
 * mode, the policy compiler.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT_DIR = join(ROOT, 'dist', 'bundle');

/**
 * node-fetch's `url` is scripts/node-fetch-url.cjs: its `parse` from the
 * WHATWG parser, so that no request calls the legacy `url.parse()`, which
 * Node 24 warns about (DEP0169) once the call is in the bundle rather than
 * in node_modules. Only node-fetch's import: every other module keeps Node's.
 */
const nodeFetchUrl: Plugin = {
  name: 'node-fetch-url',
  setup(plugins) {
    plugins.onResolve({ filter: /^url$/ }, (args) => (/[\\/]node_modules[\\/]node-fetch[\\/]/.test(args.importer) ? { path: join(ROOT, 'scripts', 'node-fetch-url.cjs') } : undefined));
  },
};

await rm(OUT_DIR, { recursive: true, force: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: ['dist/main.js'],
  outdir: OUT_DIR,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'chunks/[name]-[hash]',
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  sourcesContent: false,
  // CommonJS dependencies call require() for Node's built-in modules; an ES module has none of its own.
  banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
  // Never used on Node (scripts/whatwg-url-stub.cjs): tr46's tables cost every cluster-mode process ~300 KB of source and its parsed table at rest.
  alias: { 'whatwg-url': './scripts/whatwg-url-stub.cjs' },
  plugins: [nodeFetchUrl],
  logLevel: 'warning',
});
// A warning (a require() esbuild cannot follow, an import it cannot resolve) would be a module missing at run time.
if (result.warnings.length > 0) {
  process.stderr.write(`bundle: ${result.warnings.length} warning(s): the bundle is not self-contained\n`);
  process.exitCode = 1;
}
