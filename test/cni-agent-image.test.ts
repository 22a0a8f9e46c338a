import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { CNI_AGENT_HELP } from '../src/commands/cni-agent.js';
import { agentImage, CNI_DOCKERFILE, type AgentImage } from './helpers/cni-agent-image.js';
import { dockerIgnored, instructionsOf, parseDockerfile, readDockerignore, copySteps } from './helpers/dockerfile.js';
import { ROOT } from './helpers/fixtures.js';
import { only, renderChart } from './helpers/helm.js';

const run = promisify(execFile);

/**
 * The CNI agent's image (cni/Dockerfile): its shape, then its steps replayed
 * here (no Docker engine): the bundle of `npm run build`, the shim built by
 * the shim stage's own gcc line, laid out as the image, and the ENTRYPOINT run.
 */

const text = await readFile(CNI_DOCKERFILE, 'utf8');
const stages = parseDockerfile(text);
const gcc = await run('sh', ['-c', 'command -v gcc']).then(() => true, () => false);

describe('cni/Dockerfile', () => {
  it('builds the bundle exactly as the injector\'s Dockerfile does, the shim static, on Debian slim with iptables and nsenter', async () => {
    const injector = parseDockerfile(await readFile(join(ROOT, 'Dockerfile'), 'utf8'));
    const [build, shim, runtime] = stages;
    assert.ok(build !== undefined && shim !== undefined && runtime !== undefined);
    assert.equal(build.image, injector[0]?.image);
    assert.deepEqual(build.instructions.map(({ op, args }) => [op, args]), injector[0]?.instructions.map(({ op, args }) => [op, args]));
    assert.ok(instructionsOf(shim, 'RUN').some((instruction) => /^gcc -static /.test(instruction.args)), 'the shim is not built with gcc -static');
    assert.match(runtime.image, /^debian:bookworm-slim(@sha256:[a-f0-9]{64})?$/);
    const installs = instructionsOf(runtime, 'RUN').map((instruction) => instruction.args).join(' ');
    assert.match(installs, /apt-get install -y --no-install-recommends iptables util-linux/);
  });

  it('agrees with the command and the chart: the plugin and the script where cni-agent looks, root, the chart\'s image name', async () => {
    const runtime = stages.at(-1);
    assert.ok(runtime !== undefined);
    const destinations = copySteps(runtime).map((copy) => copy.destination);
    for (const flag of ['--plugin', '--rules']) {
      const fallback = new RegExp(`${flag} PATH\\s+.*\\(default (\\S+)\\)`).exec(CNI_AGENT_HELP)?.[1];
      assert.ok(fallback !== undefined && destinations.includes(fallback), `${flag}'s default ${fallback} is not in the image`);
    }
    assert.equal(instructionsOf(runtime, 'USER').at(-1)?.args, '0:0');
    const daemonSet = only(await renderChart({ proxy: { capture: { mode: 'cni' } } }), 'DaemonSet');
    const image = (((daemonSet['spec'] as { template: { spec: { containers: { image: string }[] } } }).template.spec.containers[0]?.image) ?? '');
    assert.match(text, new RegExp(`docker build -f cni/Dockerfile -t ${image.replace('.', '\\.')} \\.`));
    const patterns = readDockerignore(await readFile(join(ROOT, '.dockerignore'), 'utf8'));
    for (const stage of stages) {
      for (const copy of copySteps(stage).filter((step) => step.from === undefined)) {
        for (const source of copy.sources) assert.ok(!dockerIgnored(patterns, source), `COPY ${source} (line ${copy.line}) is excluded by .dockerignore`);
      }
    }
  });

  describe('replayed without Docker', { skip: gcc ? false : 'no gcc (.ci/run installs gcc and libc6-dev)', timeout: 120_000 }, () => {
    let root = '';
    let image: AgentImage | undefined;
    before(async () => {
      root = await mkdtemp(join(tmpdir(), 'ei-cni-agent-image-'));
      image = await agentImage(process.execPath, join(root, 'work'));
      for (const file of image.files) {
        const path = join(root, 'image', file.path);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, file.content);
        if (file.mode !== undefined) await chmod(path, file.mode);
      }
    });
    after(async () => {
      if (root !== '') await rm(root, { recursive: true, force: true });
    });

    it('lays out the bundle, the script, a static plugin that answers VERSION', async () => {
      assert.ok(image !== undefined);
      const paths = image.files.map((file) => file.path);
      for (const path of ['/usr/local/bin/node', '/app/bin/envoy-injector.js', '/app/dist/bundle/main.js', '/app/package.json', '/usr/local/bin/capture-rules.sh', '/usr/local/lib/envoy-injector-cni']) {
        assert.ok(paths.includes(path), `${path} missing`);
      }
      const plugin = join(root, 'image', 'usr/local/lib/envoy-injector-cni');
      const ldd = await run('ldd', [plugin]).then(({ stdout }) => stdout, (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ''}${error.stderr ?? ''}`);
      assert.match(ldd, /not a dynamic executable|statically linked/);
      const version = await run(plugin, [], { env: { CNI_COMMAND: 'VERSION' } });
      assert.ok((JSON.parse(version.stdout) as { supportedVersions: string[] }).supportedVersions.includes('1.0.0'));
    });

    it('its ENTRYPOINT runs the agent\'s command', async () => {
      assert.ok(image !== undefined);
      const [node, ...args] = image.entrypoint;
      const env = Object.fromEntries(image.env.map((pair) => pair.split('=', 2) as [string, string]));
      const inImage = (path: string): string => join(root, 'image', path);
      const help = await run(inImage(node ?? ''), [...args, '--help'], { cwd: inImage(image.workdir), env });
      assert.equal(help.stdout, CNI_AGENT_HELP);
      const noCluster = await run(inImage(node ?? ''), [...args, '--node-name', 'n1'], { cwd: inImage(image.workdir), env: { ...env, KUBERNETES_SERVICE_HOST: '' } }).then(
        () => undefined,
        (error: { code?: number; stderr?: string }) => error,
      );
      assert.equal(noCluster?.code, 2);
      assert.match(noCluster?.stderr ?? '', /cni-agent needs the cluster/);
    });
  });
});
