/**
 * The node tier's four shared images: the sandbox (pause), envoy-init from
 * init/Dockerfile's own recipe, the app, and the stand-in for Envoy tagged as
 * the chart's default Envoy image, so that the chart's template runs unchanged.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseYaml } from '../../src/injection/index.js';
import { copySteps, execForm, instructionsOf, parseDockerfile } from '../helpers/dockerfile.js';
import { CHART_DIR } from '../helpers/helm.js';
import { ROOT } from '../helpers/fixtures.js';
import type { ImageFile, ImageRecipe } from './images.js';
import { RECORDER_ADDRESS } from './network.js';

const IMAGES_DIR = join(ROOT, 'test', 'node', 'images');

/** A Docker Hub short name as containerd stores it (what the kubelet asks for). */
export function fullReference(image: string): string {
  const first = image.split('/')[0] ?? '';
  const qualified = image.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost') ? image : `docker.io/${image.includes('/') ? image : `library/${image}`}`;
  return qualified;
}

export const PAUSE_IMAGE = 'docker.io/library/node-tier-pause:1';
export const APP_IMAGE = 'node-tier-app:1';

const passwd: ImageFile[] = [
  { path: '/etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\nenvoy:x:101:101:envoy:/nonexistent:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' },
  { path: '/etc/group', content: 'root:x:0:\nenvoy:x:101:\nnogroup:x:65534:\n' },
];

/** The sandbox image containerd pins: a process that sleeps (busybox-static). */
export function pauseRecipe(): ImageRecipe {
  return { reference: PAUSE_IMAGE, packages: ['busybox-static'], files: [], entrypoint: ['/bin/busybox', 'sleep', '2147483647'] };
}

/** What a Dockerfile's `apt-get install` lines install: the package names, flags left out. */
export function aptInstalled(runArgs: string): string[] {
  const packages: string[] = [];
  const words = runArgs.split(/\s+/);
  for (let index = 0; index < words.length; index += 1) {
    if (words[index] !== 'apt-get' || words[index + 1] !== 'install') continue;
    for (index += 2; index < words.length; index += 1) {
      const word = words[index] ?? '';
      if (['&&', '||', ';', '|'].includes(word)) break;
      const name = word.replace(/;$/, '');
      if (name !== '' && !name.startsWith('-')) packages.push(name);
      if (name !== word) break;
    }
  }
  return packages;
}

/**
 * envoy-init, read from init/Dockerfile: its base (debian:bookworm-slim, of
 * which the image needs the shell its ENTRYPOINT runs: dash as /bin/sh), the
 * packages its RUN installs, the files its COPY copies, its USER and
 * ENTRYPOINT. An instruction it does not know fails the build, so that the
 * Dockerfile cannot grow a step the node tier leaves out.
 */
export async function initRecipe(): Promise<ImageRecipe> {
  const dockerfile = await readFile(join(ROOT, 'init', 'Dockerfile'), 'utf8');
  const stages = parseDockerfile(dockerfile);
  const [stage] = stages;
  if (stages.length !== 1 || stage === undefined) throw new Error(`init/Dockerfile: ${stages.length} stages, the node tier builds one`);
  if (!/^debian:bookworm-slim(@sha256:[a-f0-9]{64})?$/.test(stage.image)) throw new Error(`init/Dockerfile: FROM ${stage.image}, the node tier knows debian:bookworm-slim`);
  for (const instruction of stage.instructions) {
    if (!['RUN', 'COPY', 'USER', 'ENTRYPOINT'].includes(instruction.op)) throw new Error(`init/Dockerfile line ${instruction.line}: ${instruction.op} is not replayed by the node tier's image builder`);
  }
  const packages = instructionsOf(stage, 'RUN').flatMap((instruction) => aptInstalled(instruction.args));
  const files: ImageFile[] = [];
  for (const copy of copySteps(stage)) {
    for (const source of copy.sources) {
      const destination = copy.destination.endsWith('/') ? `${copy.destination}${source}` : copy.destination;
      files.push({ path: destination, content: brokenRules(await readFile(join(ROOT, 'init', source), 'utf8')), mode: 0o755 });
    }
  }
  const entrypoint = instructionsOf(stage, 'ENTRYPOINT').map(execForm).at(-1);
  if (entrypoint === undefined) throw new Error('init/Dockerfile: no ENTRYPOINT in exec form');
  const user = instructionsOf(stage, 'USER').at(-1)?.args;
  const chart = parseYaml(await readFile(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion?: string };
  const values = parseYaml(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as { proxy: { capture: { image: { repository: string } } } };
  return {
    reference: fullReference(`${values.proxy.capture.image.repository}:${String(chart.appVersion)}`),
    packages: ['dash', ...packages],
    files: [...files, ...passwd],
    symlinks: [{ path: '/bin/sh', target: 'dash' }],
    entrypoint,
    ...(user === undefined ? {} : { user }),
  };
}

/**
 * NODE_TIER_BREAK=capture-rules: the rule script without its OUTPUT jump (a rule
 * left out), to see the capture scenarios fail; tproxy-restore: without TPROXY's
 * mangle OUTPUT restore of the mark (the app's replies to the client's address
 * leave the Pod instead of reaching the proxy's transparent socket).
 */
const BROKEN_RULES: Readonly<Record<string, { line: string; what: string }>> = {
  'capture-rules': { line: '  jump_once "$ipt" OUTPUT "$OUTBOUND_CHAIN"\n', what: 'the OUTPUT jump' },
  'tproxy-restore': { line: '  add_once "$ipt" mangle OUTPUT -p tcp -m connmark --mark "$TPROXY_MARK" -j CONNMARK --restore-mark\n', what: "TPROXY's OUTPUT restore" },
};
function brokenRules(script: string): string {
  const name = process.env['NODE_TIER_BREAK'] ?? '';
  const rule = BROKEN_RULES[name];
  if (rule === undefined) return script;
  const broken = script.replace(rule.line, '');
  if (broken === script) throw new Error(`NODE_TIER_BREAK=${name}: ${rule.what} is not in init/capture-rules.sh any more`);
  return broken;
}

/** The chart's default Envoy image (values.yaml proxy.image), which the stand-in is tagged as. */
export async function chartEnvoyImage(): Promise<string> {
  const values = parseYaml(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as { proxy: { image: { repository: string; tag: string } } };
  return `${values.proxy.image.repository}:${values.proxy.image.tag}`;
}

/** bash and coreutils for the hooks (`/bin/bash -c`, `sleep`), Python for the stand-in and the app. */
const PYTHON_PACKAGES = ['bash', 'coreutils', 'python3-yaml'];

async function pythonFiles(main: string, mainPath: string): Promise<ImageFile[]> {
  const directory = mainPath.slice(0, mainPath.lastIndexOf('/'));
  return [
    { path: mainPath, content: `#!/usr/bin/python3\n${await readFile(join(IMAGES_DIR, main), 'utf8')}`, mode: 0o755 },
    { path: `${directory}/record.py`, content: await readFile(join(IMAGES_DIR, 'record.py')) },
    { path: '/etc/node-tier/recorder', content: `${RECORDER_ADDRESS}\n` },
    ...passwd,
  ];
}

/** The stand-in for Envoy (images/envoy-stand-in.py) as /usr/local/bin/envoy, tagged as the chart's Envoy image. */
export async function standInRecipe(): Promise<ImageRecipe> {
  return {
    reference: fullReference(await chartEnvoyImage()),
    packages: PYTHON_PACKAGES,
    files: await pythonFiles('envoy-stand-in.py', '/usr/local/bin/envoy'),
    entrypoint: ['/usr/local/bin/envoy'],
    user: '101:101',
    env: ['PYTHONDONTWRITEBYTECODE=1'],
  };
}

/** The app (images/app.py). */
export async function appRecipe(): Promise<ImageRecipe> {
  return {
    reference: fullReference(APP_IMAGE),
    packages: PYTHON_PACKAGES,
    files: await pythonFiles('app.py', '/app/app.py'),
    entrypoint: ['/app/app.py'],
    env: ['PYTHONDONTWRITEBYTECODE=1'],
  };
}
