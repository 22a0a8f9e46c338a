import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { copySteps, dockerIgnored, execForm, imageEntrypoint, imageMallocEnvironment, instructionsOf, parseDockerfile, readDockerignore, workdirOf, type Stage } from './helpers/dockerfile.js';
import { BUNDLED_TEMPLATE_DATA } from '../src/injection/index.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { ROOT } from './helpers/fixtures.js';
import { only, renderChart } from './helpers/helm.js';
import { httpsCall } from './helpers/https-client.js';
import { LTS_NODE, LTS_NODE_LINE } from './helpers/lts-node.js';

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
  const { node, nodeFlags, script } = imageEntrypoint(dockerfile);
  return [node, ...nodeFlags, ...script];
};

describe('Dockerfile', () => {
  it('is multi-stage: a build stage, then a distroless runtime with the bundle only', () => {
    assert.ok(stages.length >= 2, `only ${stages.length} stages`);
    assert.match(runtime.image, /^gcr\.io\/distroless\/nodejs\d+-debian12(:nonroot)?(@sha256:[a-f0-9]{64})?$/);
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
    assert.equal(fromStage('/app/dist/bundle'), build);
    // Only the bundle (every runtime dependency is in it), the launcher and package.json (for "type": "module").
    assert.deepEqual(
      copies.map((copy) => (copy.from === undefined ? copy.sources.join(' ') : `${copy.from}:${copy.sources.join(' ')}`)).sort(),
      ['bin', `${build.name}:/app/dist/bundle`, 'package.json'].sort(),
    );
  });

  it('runs the Node.js LTS line that CI tests, not past its end of life, in both stages', (t) => {
    const line = (image: string, pattern: RegExp): number => Number(pattern.exec(image)?.[1]);
    const build = stages.find((stage) => runs(stage).includes('npm run build'));
    assert.equal(line(runtime.image, /^gcr\.io\/distroless\/nodejs(\d+)-/), LTS_NODE_LINE, `${runtime.image}: the runtime is not on the line CI runs the unit tier on (Node ${LTS_NODE.version}, test/helpers/lts-node.ts)`);
    assert.equal(line(build?.image ?? '', /^node:(\d+)-/), LTS_NODE_LINE, `${build?.image}: the build stage is not on the runtime's line`);
    // The schedule's date (github.com/nodejs/Release): on that day this fails, to say it is time to move on.
    assert.ok(Date.now() < Date.parse(`${LTS_NODE.endOfLife}T00:00:00Z`), `Node ${LTS_NODE_LINE} is past its end of life (${LTS_NODE.endOfLife}): move the Dockerfile, test/helpers/lts-node.ts and the docs to a maintained LTS line`);
    if (Number(process.versions.node.split('.')[0]) !== LTS_NODE_LINE) t.diagnostic(`these tests run on Node ${process.versions.node}; the image runs Node ${LTS_NODE_LINE} (.ci/run runs them on it too)`);
  });

  it('runs as a numeric non-root user, exposes 8443 and starts the compiled server with the flags npm start uses', async () => {
    const user = instructionsOf(runtime, 'USER').at(-1)?.args;
    assert.match(user ?? '', /^[1-9]\d*(:\d+)?$/, 'USER must be numeric (runAsNonRoot can only verify a numeric uid)');
    assert.deepEqual(instructionsOf(runtime, 'EXPOSE').map((expose) => expose.args), ['8443']);
    const { node, nodeFlags, script } = imageEntrypoint(dockerfile);
    assert.equal(node, '/nodejs/bin/node');
    assert.deepEqual(script, ['bin/envoy-injector.js', 'serve']);
    // What `npm start` runs locally is what the image runs (the bench reads the same flags).
    const { scripts } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    assert.equal(scripts['start'], [...imageMallocEnvironment(dockerfile), 'node', ...nodeFlags, ...script].join(' '));
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
      root = await mkdtemp(join(tmpdir(), 'ei-image-'));
      image = join(root, 'runtime');
      await replay(root);
    });
    after(async () => {
      if (root !== '') await rm(root, { recursive: true, force: true });
    });

    it('lays out the image with the bundle and no node_modules', async () => {
      const app = join(image, workdirOf(runtime));
      for (const present of ['package.json', 'bin/envoy-injector.js', 'dist/bundle/main.js']) {
        assert.ok(await exists(join(app, present)), `${present} missing`);
      }
      // No node_modules anywhere up the tree either: a module the bundle left out cannot be found by accident.
      for (const absent of ['node_modules', '../node_modules', 'dist/cli.js', 'scripts', 'src', 'test', 'charts', 'certs']) {
        assert.equal(await exists(join(app, absent)), false, `${absent} should not be in the image`);
      }
    });

    /** Starts the image's ENTRYPOINT with ARGS, waits for /healthz and /readyz 200, then SIGTERM: the exit code must be 0. */
    async function runUntilReady(certsDir: string, extraArgs: readonly string[]): Promise<void> {
      const port = await freePort();
      const [node, ...args] = entrypoint();
      assert.equal(node, '/nodejs/bin/node');
      const env: NodeJS.ProcessEnv = { PATH: process.env['PATH'], HOME: root, ...imageEnv(runtime) };
      const child = spawn(process.execPath, [...args, '--host', '127.0.0.1', '--port', String(port), '--certs-dir', certsDir, ...extraArgs], {
        cwd: join(image, workdirOf(runtime)),
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const deadline = Date.now() + 20_000;
        let ready: { status: number; body: string } | undefined;
        while (ready?.status !== 200) {
          if (child.exitCode !== null) assert.fail(`the server exited with ${child.exitCode}: ${output}`);
          if (Date.now() > deadline) assert.fail(`not ready after 20 s (last /readyz: ${ready?.status} ${ready?.body}): ${output}`);
          try {
            const ca = await readFile(join(certsDir, 'ca.crt'), 'utf8');
            const health = await httpsCall(`https://127.0.0.1:${port}/healthz`, { ca });
            assert.equal(health.status, 200, health.body);
            ready = await httpsCall(`https://127.0.0.1:${port}/readyz`, { ca });
          } catch (error) {
            if (error instanceof assert.AssertionError) throw error;
          }
          if (ready?.status !== 200) await sleep(100);
        }
      } finally {
        child.kill('SIGTERM');
      }
      assert.equal(await exited, 0, output);
    }

    it('starts as ENTRYPOINT does, answers /healthz and /readyz over HTTPS and stops on SIGTERM', async () => {
      await runUntilReady(join(root, 'certs'), []);
    });

    it('follows a cluster from the image: the bundled Kubernetes client loads without node_modules', async () => {
      const fake = await FakeApiServer.start();
      try {
        fake.apply('namespaces', { metadata: { name: 'envoy-injector' } });
        fake.apply('configmaps', { metadata: { name: 'envoy-initializer', namespace: 'envoy-injector' }, data: { ...BUNDLED_TEMPLATE_DATA } });
        await runUntilReady(join(root, 'cluster-certs'), ['--kubeconfig', fake.writeKubeconfig(), '--namespace', 'envoy-injector']);
        // Ready means both watches answered: the ConfigMap was read through the bundled client.
        assert.ok(fake.requests.some((request) => request.path.includes('/configmaps')), 'the injector never asked for its ConfigMap');
      } finally {
        await fake.close();
      }
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

/**
 * The runtime stage's COPY steps, under ROOT_DIR. The build stage's output is
 * the repository's own `npm run build` (npm test runs it first); the runtime
 * copies from no other stage.
 */
async function replay(rootDir: string): Promise<void> {
  if (!(await exists(join(ROOT, 'dist', 'bundle', 'main.js')))) throw new Error('dist/bundle/ is missing: run npm run build first');
  const image = join(rootDir, 'runtime');
  for (const copy of copySteps(runtime)) {
    let sources = copy.sources.map((source) => join(ROOT, source));
    if (copy.from !== undefined) {
      const stage = stageNamed(copy.from);
      if (!runs(stage).includes('npm run build')) throw new Error(`line ${copy.line}: copies from ${copy.from}, which is not the build stage`);
      sources = copy.sources.map((source) => {
        const inWorkdir = source.startsWith(`${workdirOf(stage)}/`) ? source.slice(workdirOf(stage).length + 1) : undefined;
        if (inWorkdir === undefined) throw new Error(`line ${copy.line}: ${source} is outside the stage's WORKDIR`);
        return join(ROOT, inWorkdir);
      });
    }
    await copyInto(sources, join(image, workdirOf(runtime)), copy.destination, copy.sources.length > 1);
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
