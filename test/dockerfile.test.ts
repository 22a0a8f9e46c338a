import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { access, constants, cp, mkdir, mkdtemp, readFile, rm, stat, statfs } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { copySteps, dockerIgnored, execForm, instructionsOf, parseDockerfile, readDockerignore, workdirOf, type Stage } from './helpers/dockerfile.js';
import { ROOT } from './helpers/fixtures.js';
import { only, renderChart } from './helpers/helm.js';
import { httpsCall } from './helpers/https-client.js';
import { withLock } from './helpers/lock.js';

const run = promisify(execFile);

/**
 * There is no Docker engine here, so this replays the Dockerfile: it checks
 * its shape, then runs its production-install steps into a temp dir laid out
 * like the image, and starts the server there exactly as ENTRYPOINT does.
 */

const dockerfile = await readFile(join(ROOT, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const runtime = stages.at(-1) as Stage;
const stageNamed = (name: string | undefined): Stage => {
  const stage = stages.find((candidate) => candidate.name === name);
  if (stage === undefined) throw new Error(`no stage named ${name}`);
  return stage;
};
const runs = (stage: Stage): string[] => instructionsOf(stage, 'RUN').map((instruction) => instruction.args);
const entrypoint = (): string[] => {
  const instruction = instructionsOf(runtime, 'ENTRYPOINT').at(-1);
  assert.ok(instruction !== undefined, 'the runtime stage has no ENTRYPOINT');
  const words = execForm(instruction);
  assert.ok(words !== undefined, 'ENTRYPOINT must be in exec (JSON) form: the runtime image has no shell');
  return words;
};

describe('Dockerfile', () => {
  it('is multi-stage: a build stage, a production-dependencies stage, a distroless runtime', () => {
    assert.ok(stages.length >= 3, `only ${stages.length} stages`);
    assert.match(runtime.image, /^gcr\.io\/distroless\/nodejs20-debian12(:nonroot)?(@sha256:[a-f0-9]{64})?$/);
    // No shell at run time: nothing may RUN in the runtime stage, and there is no shell-form CMD.
    assert.deepEqual(runs(runtime), []);
    for (const cmd of instructionsOf(runtime, 'CMD')) assert.ok(execForm(cmd) !== undefined, 'CMD in shell form');

    const build = stages.find((stage) => runs(stage).includes('npm run build'));
    assert.ok(build !== undefined, 'no stage runs npm run build');
    assert.ok(runs(build).some((command) => /^npm ci\b/.test(command) && !command.includes('--omit=dev')), 'the build stage installs dev dependencies');

    const copies = copySteps(runtime);
    const fromStage = (source: string): Stage => {
      const step = copies.find((copy) => copy.sources.includes(source));
      assert.ok(step?.from !== undefined, `the runtime stage takes ${source} from no stage`);
      return stageNamed(step.from);
    };
    // node_modules comes from a production-only install that skips `prepare` (it needs TypeScript).
    assert.ok(runs(fromStage('/app/node_modules')).includes('npm ci --omit=dev --ignore-scripts'));
    assert.equal(fromStage('/app/dist'), build);
    // Only the install output, the compiled code, the launcher and package.json (for "type": "module").
    assert.deepEqual(
      copies.map((copy) => (copy.from === undefined ? copy.sources.join(' ') : `${copy.from}:${copy.sources.join(' ')}`)).sort(),
      ['bin', `${build.name}:/app/dist`, `${fromStage('/app/node_modules').name}:/app/node_modules`, 'package.json'].sort(),
    );
  });

  it('runs as a numeric non-root user, exposes 8443 and starts the compiled server', () => {
    const user = instructionsOf(runtime, 'USER').at(-1)?.args;
    assert.match(user ?? '', /^[1-9]\d*(:\d+)?$/, 'USER must be numeric (runAsNonRoot can only verify a numeric uid)');
    assert.deepEqual(instructionsOf(runtime, 'EXPOSE').map((expose) => expose.args), ['8443']);
    assert.deepEqual(entrypoint(), ['/nodejs/bin/node', 'bin/envoy-injector.js', 'serve']);
  });

  it('agrees with the chart: user id, port, and a preStop that uses the image\'s node', async () => {
    const deployment = only(await renderChart(), 'Deployment');
    const spec = (deployment['spec'] as { template: { spec: Record<string, unknown> } }).template.spec;
    const container = (spec['containers'] as Record<string, unknown>[])[0] as Record<string, unknown>;
    const [uid, gid] = (instructionsOf(runtime, 'USER').at(-1)?.args ?? '').split(':').map(Number);
    const podSecurity = spec['securityContext'] as Record<string, unknown>;
    assert.equal(podSecurity['runAsUser'], uid);
    assert.equal(podSecurity['runAsGroup'], gid ?? uid);
    assert.equal((container['ports'] as { containerPort: number }[])[0]?.containerPort, Number(instructionsOf(runtime, 'EXPOSE')[0]?.args));
    // The chart passes settings as environment variables and relies on the ENTRYPOINT.
    assert.equal(container['command'], undefined);
    assert.equal(container['args'], undefined);
    const preStop = (container['lifecycle'] as { preStop: { exec: { command: string[] } } }).preStop.exec.command;
    assert.equal(preStop[0], entrypoint()[0], 'preStop must run the node binary the image has');
  });

  it('.dockerignore keeps host builds and dev certificates out, and nothing the Dockerfile copies', async () => {
    const patterns = readDockerignore(await readFile(join(ROOT, '.dockerignore'), 'utf8'));
    for (const path of ['node_modules', 'node_modules/fastify/package.json', 'dist/cli.js', 'certs/ca.key', '.git']) {
      assert.ok(dockerIgnored(patterns, path), `${path} is sent to the build`);
    }
    for (const stage of stages) {
      for (const copy of copySteps(stage).filter((step) => step.from === undefined)) {
        for (const source of copy.sources) assert.ok(!dockerIgnored(patterns, source), `COPY ${source} (line ${copy.line}) is excluded by .dockerignore`);
      }
    }
  });

  describe('replayed without Docker', { timeout: 240_000 }, () => {
    let root = '';
    let image = '';
    before(async () => {
      root = await mkdtemp(join(await scratchDir(), 'ei-image-'));
      image = join(root, 'runtime');
      // npm ci from the registry: one replay at a time on this machine.
      await withLock('dockerfile', () => replay(root));
    });
    after(async () => {
      if (root !== '') await rm(root, { recursive: true, force: true });
    });

    it('lays out the image with production dependencies only', async () => {
      const app = join(image, workdirOf(runtime));
      for (const present of ['package.json', 'bin/envoy-injector.js', 'dist/cli.js', 'node_modules/fastify/package.json', 'node_modules/@kubernetes/client-node/package.json']) {
        assert.ok(await exists(join(app, present)), `${present} missing`);
      }
      for (const absent of ['node_modules/typescript', 'node_modules/tsx', 'node_modules/kubernetes-models', 'src', 'test', 'charts', 'certs']) {
        assert.equal(await exists(join(app, absent)), false, `${absent} should not be in the image`);
      }
    });

    it('starts as ENTRYPOINT does, answers /healthz over HTTPS and stops on SIGTERM', async () => {
      const app = join(image, workdirOf(runtime));
      const certsDir = join(root, 'certs');
      const port = await freePort();
      const [node, ...args] = entrypoint();
      assert.equal(node, '/nodejs/bin/node');
      const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'], HOME: root, ...imageEnv(runtime) };
      const child = spawn(process.execPath, [...args, '--host', '127.0.0.1', '--port', String(port), '--certs-dir', certsDir], {
        cwd: app,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const deadline = Date.now() + 20_000;
        let health: { status: number; body: string } | undefined;
        while (health === undefined) {
          if (child.exitCode !== null) assert.fail(`the server exited with ${child.exitCode}: ${output}`);
          if (Date.now() > deadline) assert.fail(`no answer on /healthz after 20 s: ${output}`);
          try {
            const ca = await readFile(join(certsDir, 'ca.crt'), 'utf8');
            health = await httpsCall(`https://127.0.0.1:${port}/healthz`, { ca });
          } catch {
            await sleep(100);
          }
        }
        assert.equal(health.status, 200, health.body);
        const ready = await httpsCall(`https://127.0.0.1:${port}/readyz`, { ca: await readFile(join(certsDir, 'ca.crt'), 'utf8') });
        assert.equal(ready.status, 200, ready.body);
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0, output);
    });

    it('the chart\'s preStop command works with that node and waits as long as asked', async () => {
      const deployment = only(await renderChart({ shutdown: { preStopDelaySeconds: 1 } }), 'Deployment');
      const container = (deployment['spec'] as { template: { spec: { containers: { lifecycle: { preStop: { exec: { command: string[] } } } }[] } } }).template.spec.containers[0];
      const [node, ...args] = container?.lifecycle.preStop.exec.command ?? [];
      assert.equal(node, entrypoint()[0]);
      // How long it waits is in the command; running it shows that node accepts it and waits at least that.
      assert.deepEqual(args, ['-e', 'setTimeout(() => {}, 1000)']);
      const started = Date.now();
      await run(process.execPath, args, { cwd: join(image, workdirOf(runtime)), timeout: 30_000 });
      const waited = Date.now() - started;
      assert.ok(waited >= 1000, `waited ${waited} ms`);
    });
  });
});

/** Runs the stages the runtime stage copies from, then the runtime stage's COPY steps, under ROOT_DIR. */
async function replay(rootDir: string): Promise<void> {
  const stageRoots = new Map<string, string>();
  for (const copy of copySteps(runtime)) {
    if (copy.from === undefined || stageRoots.has(copy.from)) continue;
    const stage = stageNamed(copy.from);
    if (runs(stage).includes('npm run build')) {
      // The build stage's output is the repository's own `npm run build` (npm test runs it first).
      if (!(await exists(join(ROOT, 'dist', 'cli.js')))) throw new Error('dist/ is missing: run npm run build first');
      stageRoots.set(copy.from, ROOT);
      continue;
    }
    const stageRoot = join(rootDir, copy.from);
    await runStage(stage, stageRoot);
    stageRoots.set(copy.from, join(stageRoot, workdirOf(stage)));
  }
  const image = join(rootDir, 'runtime');
  const workdir = workdirOf(runtime);
  for (const copy of copySteps(runtime)) {
    let sources: string[];
    if (copy.from === undefined) {
      sources = copy.sources.map((source) => join(ROOT, source));
    } else {
      const stage = stageNamed(copy.from);
      const base = stageRoots.get(copy.from) as string;
      sources = copy.sources.map((source) => {
        const inWorkdir = source.startsWith(`${workdirOf(stage)}/`) ? source.slice(workdirOf(stage).length + 1) : undefined;
        if (inWorkdir === undefined) throw new Error(`line ${copy.line}: ${source} is outside the stage's WORKDIR`);
        return join(base, inWorkdir);
      });
    }
    await copyInto(sources, join(image, workdir), copy.destination, copy.sources.length > 1);
  }
}

/** COPY from the build context and RUN (plain npm commands only) of one stage, under STAGE_ROOT. */
async function runStage(stage: Stage, stageRoot: string): Promise<void> {
  const workdir = join(stageRoot, workdirOf(stage));
  await mkdir(workdir, { recursive: true });
  for (const instruction of stage.instructions) {
    if (instruction.op === 'COPY') {
      const [copy] = copySteps({ ...stage, instructions: [instruction] });
      if (copy === undefined || copy.from !== undefined) throw new Error(`line ${instruction.line}: only COPY from the build context is replayed`);
      await copyInto(copy.sources.map((source) => join(ROOT, source)), workdir, copy.destination, copy.sources.length > 1);
    } else if (instruction.op === 'RUN') {
      const words = instruction.args.split(/\s+/);
      if (words[0] !== 'npm' || words.some((word) => !/^[\w@./=:-]+$/.test(word))) {
        throw new Error(`line ${instruction.line}: RUN ${instruction.args}: only plain npm commands can be replayed`);
      }
      await run('npm', words.slice(1), {
        cwd: workdir,
        timeout: 180_000,
        // What gets installed is fixed by the lockfile; these only skip network chatter (the
        // tarballs are in npm's cache after the repository's own npm ci).
        env: { ...process.env, npm_config_prefer_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false' },
      });
    } else if (!['WORKDIR', 'ENV', 'ARG', 'LABEL'].includes(instruction.op)) {
      throw new Error(`line ${instruction.line}: ${instruction.op} cannot be replayed`);
    }
  }
}

/** Docker's COPY: a directory's contents go into the destination; files into it when it ends with `/`. */
async function copyInto(sources: readonly string[], workdir: string, destination: string, many: boolean): Promise<void> {
  const target = join(workdir, destination);
  for (const source of sources) {
    const info = await stat(source);
    if (info.isDirectory()) await cp(source, target, { recursive: true });
    else {
      const file = destination.endsWith('/') || many ? join(target, basename(source)) : target;
      await mkdir(join(file, '..'), { recursive: true });
      await cp(source, file);
    }
  }
}

function imageEnv(stage: Stage): Record<string, string> {
  return Object.fromEntries(
    instructionsOf(stage, 'ENV').map((instruction) => {
      const match = /^([A-Za-z_][A-Za-z0-9_]*)[= ](.*)$/.exec(instruction.args);
      if (match === null) throw new Error(`line ${instruction.line}: ENV ${instruction.args}`);
      return [match[1] as string, match[2] as string];
    }),
  );
}

/**
 * Where the image is laid out: tmpfs when there is one (writing and deleting
 * node_modules' thousands of small files is several times faster there).
 */
async function scratchDir(): Promise<string> {
  const shm = '/dev/shm';
  try {
    await access(shm, constants.W_OK);
    const { bavail, bsize } = await statfs(shm);
    // node_modules takes ~110 MB; container runtimes often give /dev/shm only 64 MB.
    if (bavail * bsize > 512 * 1024 * 1024) return shm;
  } catch {
    // no tmpfs here
  }
  return tmpdir();
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
