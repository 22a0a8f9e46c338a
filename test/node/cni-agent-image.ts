/**
 * The CNI agent's image for the node tier, from cni/Dockerfile's own recipe
 * (test/helpers/cni-agent-image.ts: its runtime stage's packages and files,
 * the bundle of `npm run build`, the shim built by the shim stage's gcc
 * line): what stands in for debian:bookworm-slim is dash as /bin/sh,
 * coreutils (the readinessProbe's `cat`) and the libraries Node.js links;
 * the Node.js binary is of the build stage's line. Tagged as the chart's
 * cniAgent.image.
 */
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseYaml } from '../../src/injection/index.js';
import { agentImage } from '../helpers/cni-agent-image.js';
import { CHART_DIR } from '../helpers/helm.js';
import { LTS_NODE_LINE } from '../helpers/lts-node.js';
import { fullReference } from './image-recipes.js';
import type { ImageRecipe } from './images.js';
import { nodeOfLine } from './injector-image.js';

export async function cniAgentRecipe(): Promise<ImageRecipe> {
  const image = await agentImage(await nodeOfLine(LTS_NODE_LINE), await mkdtemp(join(tmpdir(), 'ei-cni-agent-shim-')));
  if (!/^debian:bookworm-slim(@sha256:[a-f0-9]{64})?$/.test(image.base)) throw new Error(`cni/Dockerfile: FROM ${image.base}, the node tier knows debian:bookworm-slim`);
  const chart = parseYaml(await readFile(join(CHART_DIR, 'Chart.yaml'), 'utf8')) as { appVersion?: string };
  const values = parseYaml(await readFile(join(CHART_DIR, 'values.yaml'), 'utf8')) as { cniAgent: { image: { repository: string } } };
  return {
    reference: fullReference(`${values.cniAgent.image.repository}:${String(chart.appVersion)}`),
    packages: ['dash', 'coreutils', 'libstdc++6', 'libgcc-s1', ...image.packages],
    files: [
      ...image.files,
      { path: '/etc/passwd', content: 'root:x:0:0:root:/root:/bin/sh\n' },
      { path: '/etc/group', content: 'root:x:0:\n' },
    ],
    symlinks: [{ path: '/bin/sh', target: 'dash' }],
    entrypoint: image.entrypoint,
    env: image.env,
    workdir: image.workdir,
    ...(image.user === undefined ? {} : { user: image.user }),
  };
}
