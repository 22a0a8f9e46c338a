import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from './helpers/fixtures.js';
import { aptInstalled, chartEnvoyImage, fullReference, initRecipe, standInRecipe } from './node/image-recipes.js';

/**
 * The node tier (test/node) builds envoy-init from init/Dockerfile's own
 * recipe and the stand-in under the chart's Envoy image name. These checks
 * keep the two in step without a node: what the tier would build is what
 * the Dockerfile and the chart say.
 */
describe('the node tier\'s images follow the Dockerfile and the chart', () => {
  it('envoy-init: the packages of the Dockerfile\'s apt-get install, its COPY, USER and ENTRYPOINT', async () => {
    const dockerfile = await readFile(join(ROOT, 'init', 'Dockerfile'), 'utf8');
    const recipe = await initRecipe();
    assert.deepEqual(recipe.packages, ['dash', ...aptInstalled(dockerfile.replace(/\\\n/g, ' '))]);
    assert.ok(recipe.packages.includes('iptables'));
    assert.ok(recipe.packages.includes('iproute2'), 'ip rule and ip route, for --interception=tproxy');
    const script = recipe.files.find((file) => file.path === '/usr/local/bin/capture-rules.sh');
    assert.equal(script?.content.toString(), await readFile(join(ROOT, 'init', 'capture-rules.sh'), 'utf8'), 'the image gets the repository\'s rule script as it is');
    assert.deepEqual(recipe.entrypoint, ['/bin/sh', '/usr/local/bin/capture-rules.sh']);
    assert.equal(recipe.user, '0:0');
    assert.equal(recipe.reference, 'docker.io/library/envoy-injector-init:0.1.0');
  });

  it('reads the package names of apt-get install lines, flags left out', () => {
    assert.deepEqual(aptInstalled('apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iptables nftables && rm -rf /x'), ['iptables', 'nftables']);
    assert.deepEqual(aptInstalled('apt-get install -y a; apt-get install b'), ['a', 'b']);
    assert.deepEqual(aptInstalled('echo no install'), []);
  });

  it('the stand-in is tagged exactly as the chart\'s default Envoy image, as containerd names it', async () => {
    assert.equal(fullReference(await chartEnvoyImage()), (await standInRecipe()).reference);
    assert.match((await standInRecipe()).reference, /^docker\.io\/envoyproxy\/envoy:v\d+\.\d+\.\d+$/);
    assert.equal(fullReference('registry.example.com:5000/a/b:1'), 'registry.example.com:5000/a/b:1');
    assert.equal(fullReference('busybox:1'), 'docker.io/library/busybox:1');
  });
});
