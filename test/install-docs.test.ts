import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CHART_DIR } from './helpers/helm.js';
import { ROOT } from './helpers/fixtures.js';

/**
 * The install commands a user copies (issue 42): from the README, the
 * install guide and the chart's NOTES. Run in that order on a real node, labelling
 * a namespace and restarting a workload before the injector is Ready made
 * the ReplicaSet fail its creates ("no endpoints available for service")
 * until a replica was; a captured Pod needs the envoy-injector-init image.
 */
const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
const installGuide = readFileSync(join(ROOT, 'docs', 'install.md'), 'utf8');
const notes = readFileSync(join(CHART_DIR, 'templates', 'NOTES.txt'), 'utf8');

/** The text of the `## TITLE` section (up to the next `## `). */
function section(markdown: string, title: string): string {
  const start = markdown.indexOf(`\n## ${title}\n`);
  assert.notEqual(start, -1, `no section "## ${title}"`);
  const end = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, end === -1 ? undefined : end);
}

/** The shell commands of the ```sh blocks of TEXT, a continued line joined, comments dropped. */
function commands(text: string): string[] {
  return [...text.matchAll(/```sh\n([\s\S]*?)```/g)]
    .flatMap((block) => (block[1] ?? '').replace(/\\\n\s*/g, '').split('\n'))
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
}

/** The index of the first command matching PATTERN; fails naming it when none does. */
function first(list: readonly string[], pattern: RegExp): number {
  const index = list.findIndex((command) => pattern.test(command));
  assert.notEqual(index, -1, `no command matching ${pattern} in:\n${list.join('\n')}`);
  return index;
}

const HELM_INSTALL = /^helm install envoy-injector charts\/envoy-injector /;
const ROLLOUT_WAIT = /^kubectl -n envoy-injector-system rollout status deployment\/envoy-injector$/;

describe('the install commands users copy', () => {
  for (const [name, text] of [['README.md, Install in a cluster', section(readme, 'Install in a cluster')], ['docs/install.md, Install to See that it worked', `${section(installGuide, 'Install')}${section(installGuide, 'Turn injection on')}${section(installGuide, 'See that it worked')}`]] as const) {
    it(`${name}: wait for the rollout after helm install, before a namespace is labelled or a workload restarted`, () => {
      const list = commands(text);
      const install = first(list, HELM_INSTALL);
      const wait = first(list, ROLLOUT_WAIT);
      assert.ok(install < wait, 'the rollout is awaited after helm install');
      for (const after of [/^kubectl label namespace \S+ envoy-injector\.io\/inject=enabled$/, /^kubectl -n \S+ rollout restart deployment\//]) {
        assert.ok(wait < first(list, after), `${after} comes after the wait`);
      }
    });

    it(`${name}: build both images (the injector, and envoy-injector-init for captured Pods), push or load them, and point the chart at both`, () => {
      const list = commands(text);
      const built = list.filter((command) => command.startsWith('docker build ')).map((command) => command.split(/\s+/));
      const tagOf = (context: string): string | undefined => {
        const words = built.find((candidate) => candidate.at(-1) === context);
        return words === undefined ? undefined : words[words.indexOf('-t') + 1];
      };
      const injector = tagOf('.');
      const init = tagOf('init/');
      assert.ok(injector !== undefined && init !== undefined, `docker build of . and of init/: ${JSON.stringify(built)}`);
      assert.match(init, /\/envoy-injector-init:0\.1\.0$/);
      for (const image of [injector, init]) assert.ok(list.some((command) => (command.startsWith('docker push ') || command.startsWith('kind load docker-image ')) && command.includes(image)), `${image} is neither pushed nor loaded`);
      const install = list[first(list, HELM_INSTALL)] ?? '';
      assert.ok(install.includes(`--set image.repository=${injector.split(':')[0]}`), install);
      assert.ok(install.includes(`--set proxy.capture.image.repository=${init.split(':')[0]}`), install);
    });
  }

  it('the install guide says what early Pods meet: no endpoints (or a refused connection), not a TLS error', () => {
    const install = section(installGuide, 'Install');
    assert.doesNotMatch(install, /TLS error/);
    assert.match(install, /no endpoints available for service/);
  });

  it('NOTES.txt waits for the rollout before it turns injection on', () => {
    assert.ok(notes.indexOf('rollout status deployment/') < notes.indexOf('kubectl label namespace'));
  });
});

