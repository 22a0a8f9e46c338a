// The process entry point. `npm run build` bundles it (scripts/bundle.ts) into
// dist/bundle/main.js, which bin/envoy-injector.js and the image run.
import { runCli } from './cli.js';

process.exitCode = await runCli(process.argv.slice(2), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
