import assert from 'node:assert/strict';
import { request } from 'node:https';
import { after, before, it } from 'node:test';
import { TemplateError } from '../../src/errors.js';
import { applyPodPatch, injectPod, isJsonObject, parseTemplateData, parseYaml, type JsonObject } from '../../src/injection/index.js';
import { TEMPLATES_CORPUS, type CorpusEntry } from '../fixtures/templates-corpus.js';
import { seedPod } from '../helpers/fixtures.js';
import { createNamespace, deleteNamespaces, uniqueName } from './cluster.js';
import { forEachKubeVersion, type ControlPlane } from './control-plane.js';

type Verdict = 'accept' | 'reject';

/**
 * Our verdict, and the Pod the API server judges: the seed Pod injected by our
 * merge (its patch applied) when we accept the template; when we refuse it, the seed Pod with every
 * entry of the template appended as written (our merge would quietly leave out
 * a repeated name, and so hide the very mistake we refuse).
 */
function judge(entry: CorpusEntry): { verdict: Verdict; pod: JsonObject } {
  try {
    const template = parseTemplateData({ config: entry.template }).defaultTemplate;
    return { verdict: 'accept', pod: applyPodPatch(seedPod(), injectPod(seedPod(), template, { nativeSidecar: false }).patch) };
  } catch (error) {
    assert.ok(error instanceof TemplateError, `${entry.name}: expected a TemplateError, got ${String(error)}`);
    const content = parseYaml(entry.template);
    assert.ok(isJsonObject(content), `${entry.name}: the template is a mapping`);
    const pod = seedPod();
    const spec = pod['spec'];
    assert.ok(isJsonObject(spec));
    for (const list of ['containers', 'initContainers', 'volumes', 'imagePullSecrets']) {
      const added = content[list];
      const existing = spec[list];
      if (Array.isArray(added)) spec[list] = [...(Array.isArray(existing) ? existing : []), ...added];
    }
    return { verdict: 'reject', pod };
  }
}

/**
 * The API server's verdict on the seed Pod injected with TEMPLATE: a server-side
 * dry-run create with strict field validation. The Pod goes as raw JSON, not
 * through client-node's models, which would drop unknown fields and so hide them.
 */
async function dryRunCreate(plane: ControlPlane, namespace: string, pod: JsonObject): Promise<{ verdict: Verdict; detail: string }> {
  const url = new URL(`/api/v1/namespaces/${namespace}/pods?dryRun=All&fieldValidation=Strict`, plane.server);
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const post = request(url, { method: 'POST', ca: plane.ca, headers: { authorization: `Bearer ${plane.adminToken}`, 'content-type': 'application/json' }, timeout: 10_000 }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
      response.on('error', reject);
    });
    post.on('timeout', () => post.destroy(new Error('no answer from the API server within 10 s')));
    post.on('error', reject);
    post.end(JSON.stringify(pod));
  });
  if (status === 201) return { verdict: 'accept', detail: 'created (dry run)' };
  let message = body;
  try {
    message = (JSON.parse(body) as { message?: string }).message ?? body;
  } catch {
    // not a Status: keep the body
  }
  // 400: the JSON does not decode into a Pod (wrong type, unknown field); 422: the Pod is invalid. Anything else is no verdict.
  assert.ok(status === 400 || status === 422, `the API server answered ${status}, which is no verdict: ${message}`);
  return { verdict: 'reject', detail: `${status}: ${message}` };
}

forEachKubeVersion('template corpus: our verdict is the API server\'s', (plane, version) => {
  const namespace = uniqueName('corpus');
  const tally = { agreements: 0, known: [] as string[], disagreements: [] as string[] };
  before(() => createNamespace(plane(), namespace));
  after(() => deleteNamespaces(plane(), [namespace]));

  for (const entry of TEMPLATES_CORPUS) {
    it(entry.name, async () => {
      const ours = judge(entry);
      const theirs = await dryRunCreate(plane(), namespace, ours.pod);
      const known = entry.differs?.versions.includes(version) === true;
      if (theirs.verdict === ours.verdict && !known) tally.agreements += 1;
      else if (theirs.verdict !== ours.verdict && known) tally.known.push(entry.name);
      else tally.disagreements.push(entry.name);
      assert.equal(
        theirs.verdict,
        known ? (ours.verdict === 'accept' ? 'reject' : 'accept') : ours.verdict,
        `we ${ours.verdict}, Kubernetes ${version} answered ${theirs.detail}${known ? ` (a known difference: ${entry.differs?.why ?? ''})` : ''}`,
      );
    });
  }

  it(`agrees on every template but the known differences listed in docs/template.md`, (t) => {
    t.diagnostic(`Kubernetes ${version}: ${tally.agreements} agreements, ${tally.known.length} known differences, ${tally.disagreements.length} disagreements`);
    assert.deepEqual(tally.disagreements, []);
    assert.equal(tally.agreements + tally.known.length, TEMPLATES_CORPUS.length, 'every template was judged');
    assert.deepEqual(tally.known, TEMPLATES_CORPUS.filter((entry) => entry.differs?.versions.includes(version) === true).map((entry) => entry.name));
  });
});
