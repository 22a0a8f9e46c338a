import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { installPlugin, uninstallPlugin, type PluginPlaces } from '../src/node/agent.js';
import { CNI_PLUGIN_TYPE } from '../src/node/cni/chain-config.js';

/**
 * The agent's uninstall gives the node back its primary configuration byte
 * for byte when nothing else edited it meanwhile (docs/design.md §11, CNI
 * mode): whatever its formatting, a single network (`.conf`, chained as a
 * `.conflist` of the same name) included, and after the primary CNI rewrote
 * it (what it wrote last). Edited by another
 * hand after the agent's insert: only our entry is taken out.
 */

const BRIDGE = { cniVersion: '1.0.0', name: 'ei-node', plugins: [{ type: 'bridge', bridge: 'ei-node0', ipam: { type: 'host-local', subnet: '198.51.100.0/24' } }] };

describe('cni-agent: uninstall restores the primary configuration', () => {
  let dir = '';
  let count = 0;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'envoy-injector-uninstall-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  /** Folders of their own for one case, the primary configuration FILE holding TEXT. */
  const places = async (file: string, text: string): Promise<PluginPlaces & { path: string }> => {
    count += 1;
    const root = join(dir, String(count));
    for (const folder of ['bin', 'net.d']) await mkdir(join(root, folder), { recursive: true });
    await writeFile(join(root, 'shim'), 'shim');
    await writeFile(join(root, 'net.d', file), text);
    return { plugin: join(root, 'shim'), binDir: join(root, 'bin'), confDir: join(root, 'net.d'), agentSocket: '/run/ei/cni.sock', path: join(root, 'net.d', file) };
  };
  const plugins = async (path: string): Promise<unknown[]> => (JSON.parse(await readFile(path, 'utf8')) as { plugins: { type: string }[] }).plugins.map((plugin) => plugin.type);

  for (const [title, file, text] of [
    ['minified, no final newline', '10-a.conflist', JSON.stringify(BRIDGE)],
    ['four spaces and a final newline', '10-b.conflist', `${JSON.stringify(BRIDGE, null, 4)}\n`],
    ['a single network (.conf), tabs', '10-c.conf', JSON.stringify({ cniVersion: '0.4.0', name: 'c', type: 'bridge', bridge: 'cni0' }, null, '\t')],
  ] as const) {
    it(`${title}: the same bytes, no file of ours left`, async () => {
      const at = await places(file, text);
      const chained = file.replace(/\.conf$/, '.conflist');
      assert.equal((await installPlugin(at) as { file?: string }).file, chained);
      // A list is a .conflist for the runtimes (containerd refuses a .conf holding one): a .conf is made one, and removed.
      assert.deepEqual(await readdir(at.confDir), [`.${file}.envoy-injector-original`, chained]);
      assert.deepEqual((await plugins(join(at.confDir, chained))).at(-1), CNI_PLUGIN_TYPE);
      await uninstallPlugin(at);
      assert.equal(await readFile(at.path, 'utf8'), text);
      assert.deepEqual(await readdir(at.confDir), [file]);
    });
  }

  it('rewritten by the primary CNI, chained again: uninstall gives what the primary wrote last', async () => {
    const at = await places('10-d.conflist', `${JSON.stringify(BRIDGE, null, 2)}\n`);
    await installPlugin(at);
    const rewritten = JSON.stringify({ ...BRIDGE, name: 'rewritten' });
    await writeFile(at.path, rewritten);
    await installPlugin(at);
    assert.deepEqual(await plugins(at.path), ['bridge', CNI_PLUGIN_TYPE]);
    await uninstallPlugin(at);
    assert.equal(await readFile(at.path, 'utf8'), rewritten);
  });

  it('a single network rewritten by the primary CNI, chained again: its .conflist made anew, and uninstall gives the .conf it wrote last', async () => {
    const at = await places('10-f.conf', JSON.stringify({ cniVersion: '1.0.0', name: 'f', type: 'bridge', bridge: 'cni0' }));
    await installPlugin(at);
    const rewritten = JSON.stringify({ cniVersion: '1.0.0', name: 'f', type: 'bridge', bridge: 'cni1' });
    await writeFile(at.path, rewritten);
    const again = await installPlugin(at);
    assert.equal((again as { file?: string }).file, '10-f.conflist');
    assert.deepEqual(await readdir(at.confDir), ['.10-f.conf.envoy-injector-original', '10-f.conflist']);
    const list = JSON.parse(await readFile(join(at.confDir, '10-f.conflist'), 'utf8')) as { plugins: { type: string; bridge?: string }[] };
    assert.deepEqual(list.plugins.map((plugin) => plugin.bridge ?? plugin.type), ['cni1', CNI_PLUGIN_TYPE]);
    await uninstallPlugin(at);
    assert.equal(await readFile(at.path, 'utf8'), rewritten);
    assert.deepEqual(await readdir(at.confDir), ['10-f.conf']);
  });

  it('a single network rewritten by the primary CNI and the agent stopped before its next round: the .conf kept as written, our .conflist of it gone', async () => {
    const at = await places('10-h.conf', JSON.stringify({ cniVersion: '1.0.0', name: 'h', type: 'bridge', bridge: 'cni0' }));
    await installPlugin(at);
    const rewritten = JSON.stringify({ cniVersion: '1.0.0', name: 'h', type: 'bridge', bridge: 'cni1' });
    await writeFile(at.path, rewritten);
    await uninstallPlugin(at);
    assert.equal(await readFile(at.path, 'utf8'), rewritten);
    assert.deepEqual(await readdir(at.confDir), ['10-h.conf']);
  });

  it('a single network beside a .conflist of another\'s of the same name: a problem named, neither file touched', async () => {
    const single = JSON.stringify({ cniVersion: '1.0.0', name: 'g', type: 'bridge' });
    const at = await places('10-g.conf', single);
    const beside = JSON.stringify(BRIDGE);
    await writeFile(join(at.confDir, '10-g.conflist'), beside);
    const edit = await installPlugin(at);
    assert.match((edit as { problem?: string }).problem ?? '', /10-g\.conf is a single network and 10-g\.conflist beside it is not ours/);
    assert.equal(await readFile(at.path, 'utf8'), single);
    assert.equal(await readFile(join(at.confDir, '10-g.conflist'), 'utf8'), beside);
    assert.deepEqual(await readdir(at.confDir), ['10-g.conf', '10-g.conflist']);
  });

  it('edited by another hand after the insert: only our entry is taken out, the edit kept', async () => {
    const at = await places('10-e.conflist', JSON.stringify(BRIDGE));
    await installPlugin(at);
    const edited = JSON.parse(await readFile(at.path, 'utf8')) as typeof BRIDGE;
    await writeFile(at.path, JSON.stringify({ ...edited, plugins: [...edited.plugins, { type: 'portmap' }] }));
    await uninstallPlugin(at);
    assert.deepEqual(await plugins(at.path), ['bridge', 'portmap']);
    assert.deepEqual(await readdir(at.confDir), ['10-e.conflist']);
  });
});
