import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { copySteps, execForm, instructionsOf, parseDockerfile } from './helpers/dockerfile.js';
import { ROOT } from './helpers/fixtures.js';
import { only, renderChart } from './helpers/helm.js';
import { parseTemplateData } from '../src/injection/index.js';

const run = promisify(execFile);

/**
 * The envoy-init image (init/Dockerfile): Debian slim, iptables, the
 * repository's rule script and nothing else. No Docker engine here: its
 * shape is checked, and test/capture-rules.test.ts runs the script it copies.
 */
const INIT = join(ROOT, 'init');
const dockerfile = await readFile(join(INIT, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);

describe('init/Dockerfile (the envoy-init image)', () => {
  it('is one Debian slim stage that installs iptables from apt, without Node', () => {
    assert.equal(stages.length, 1);
    const [stage] = stages;
    assert.ok(stage !== undefined);
    assert.match(stage.image, /^debian:bookworm-slim(@sha256:[a-f0-9]{64})?$/);
    const runs = instructionsOf(stage, 'RUN').map((instruction) => instruction.args).join('\n');
    assert.match(runs, /apt-get install -y --no-install-recommends iptables\b/);
    assert.match(runs, /rm -rf \/var\/lib\/apt\/lists/, 'the apt lists do not stay in the image');
    const instructions = dockerfile.split('\n').filter((line) => !line.trimStart().startsWith('#')).join('\n');
    assert.doesNotMatch(instructions, /\bnode(js)?\b|\bnpm\b/i);
  });

  it('copies the repository\'s rule script, and its ENTRYPOINT runs that copy as root', async () => {
    const [stage] = stages;
    assert.ok(stage !== undefined);
    const copies = copySteps(stage);
    assert.deepEqual(copies.map((copy) => [copy.sources, copy.destination]), [[['capture-rules.sh'], '/usr/local/bin/capture-rules.sh']]);
    // The build context is init/: the script the tests run is the one the image gets.
    assert.ok((await stat(join(INIT, 'capture-rules.sh'))).isFile());
    const entrypoint = instructionsOf(stage, 'ENTRYPOINT').at(-1);
    assert.ok(entrypoint !== undefined);
    assert.deepEqual(execForm(entrypoint), ['/bin/sh', '/usr/local/bin/capture-rules.sh']);
    assert.equal(instructionsOf(stage, 'USER').at(-1)?.args, '0:0');
  });

  it('the script is POSIX sh (dash, Debian\'s /bin/sh, parses it) and refuses unknown arguments', async () => {
    const script = join(INIT, 'capture-rules.sh');
    const shell = await run('sh', ['-c', 'command -v dash || command -v sh']);
    await run(shell.stdout.trim(), ['-n', script]);
    await assert.rejects(run('sh', [script, '--proxy-uid=101', '--colour=red']), (error: { code?: number; stderr?: string }) => {
      assert.equal(error.code, 2);
      assert.match(error.stderr ?? '', /envoy-init: unknown argument "--colour=red"/);
      return true;
    });
  });

  it('the chart names it like the proxy image: envoy-injector-init at the chart\'s appVersion, or a digest', async () => {
    const chart = await readFile(join(ROOT, 'charts/envoy-injector/Chart.yaml'), 'utf8');
    const appVersion = /^appVersion:\s*"?([^"\n]+)"?/m.exec(chart)?.[1];
    const image = async (values: Record<string, unknown>): Promise<string | undefined> =>
      parseTemplateData(only(await renderChart(values), 'ConfigMap')['data'] as Record<string, string>).defaultTemplate.capture?.image;
    assert.equal(await image({}), `envoy-injector-init:${appVersion}`);
    const digest = `sha256:${'d'.repeat(64)}`;
    assert.equal(await image({ proxy: { capture: { image: { repository: 'registry.example.com/init', digest } } } }), `registry.example.com/init@${digest}`);
  });
});
