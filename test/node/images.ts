/**
 * Container images built by the node tier itself, from Debian packages, with
 * no registry and no Docker engine: a root file system from `apt-get download`
 * + `dpkg -x` (maintainer scripts never run), plus a layer of the test's own
 * files, written as an OCI image layout archive that `ctr images import`
 * takes. Each archive is cached under node_modules/.cache/ by a key over
 * everything it is made from (the resolved package versions, the files, the
 * image config), so a run builds an image once and a changed input builds it
 * anew.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { access, chmod, mkdir, mkdtemp, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/fixtures.js';
import { withLock } from '../helpers/lock.js';

const run = promisify(execFile);
const CACHE = join(ROOT, 'node_modules', '.cache', 'envoy-injector-node', 'images');
const APT_CACHE = join(ROOT, 'node_modules', '.cache', 'envoy-injector-node', 'apt');
/** Bumped when the way an image is assembled changes, so that no archive of the old way is reused. */
const BUILDER_VERSION = 1;

export interface ImageFile {
  /** Absolute path in the image. */
  readonly path: string;
  readonly content: string | Buffer;
  readonly mode?: number;
}

export interface ImageRecipe {
  /** The full reference containerd stores it under, e.g. docker.io/envoyproxy/envoy:v1.39.6. */
  readonly reference: string;
  /** Debian packages (the names `apt-get install --no-install-recommends` is given); their dependencies come along. */
  readonly packages: readonly string[];
  readonly files: readonly ImageFile[];
  /** Symbolic links in the files' layer (what a package's maintainer script would have made). */
  readonly symlinks?: readonly { readonly path: string; readonly target: string }[];
  readonly entrypoint?: readonly string[];
  readonly cmd?: readonly string[];
  /** uid:gid, as a Dockerfile's USER. */
  readonly user?: string;
  readonly env?: readonly string[];
  readonly workdir?: string;
}

export interface BuiltImage {
  readonly reference: string;
  /** The OCI layout archive (a tar). */
  readonly archive: string;
  /** Whether it was built now (false: taken from the cache). */
  readonly built: boolean;
}

/**
 * The packages `apt-get install --no-install-recommends PACKAGES` would put on
 * an empty system, as name=version: the dependency closure as apt resolves it
 * (one provider per virtual package), from the machine's own apt lists.
 */
export async function resolvePackages(packages: readonly string[]): Promise<string[]> {
  if (packages.length === 0) return [];
  const work = await mkdtemp(join(tmpdir(), 'ei-apt-'));
  try {
    const status = join(work, 'status');
    await writeFile(status, '');
    await mkdir(APT_CACHE, { recursive: true });
    // apt's cache of the lists for an empty status, kept between calls (built anew when the lists change): ~2 s a call instead of ~4.
    const cache = ['-o', `Dir::Cache::pkgcache=${join(APT_CACHE, 'pkgcache.bin')}`, '-o', `Dir::Cache::srcpkgcache=${join(APT_CACHE, 'srcpkgcache.bin')}`];
    const { stdout } = await run('apt-get', ['install', '-s', '-qq', '--no-install-recommends', '-o', `Dir::State::Status=${status}`, ...cache, '-o', 'Debug::NoLocking=1', ...packages], {
      maxBuffer: 16 * 1024 * 1024,
    }).catch((error: { stderr?: string; message: string }) => {
      throw new Error(`apt-get could not resolve ${packages.join(' ')} (run apt-get update?): ${error.stderr?.trim() ?? error.message}`);
    });
    const resolved = [...stdout.matchAll(/^Inst (\S+) \((\S+)/gm)].map(([, name, version]) => `${name}=${version}`);
    if (resolved.length === 0) throw new Error(`apt-get resolved no package for ${packages.join(' ')}`);
    return resolved.sort();
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The image of RECIPE as an OCI layout archive: from the cache, or built now. */
export async function buildImage(recipe: ImageRecipe): Promise<BuiltImage> {
  const packages = await resolvePackages(recipe.packages);
  const key = createHash('sha256')
    .update(JSON.stringify({ builder: BUILDER_VERSION, packages, reference: recipe.reference, entrypoint: recipe.entrypoint, cmd: recipe.cmd, user: recipe.user, env: recipe.env, workdir: recipe.workdir }))
    .update(JSON.stringify(recipe.symlinks ?? []))
    .update(JSON.stringify(recipe.files.map((file) => [file.path, file.mode ?? 0o644, createHash('sha256').update(file.content).digest('hex')])))
    .digest('hex')
    .slice(0, 20);
  const safeName = recipe.reference.replace(/[^a-zA-Z0-9.-]+/g, '_');
  const archive = join(CACHE, `${safeName}-${key}.tar`);
  if (await exists(archive)) return { reference: recipe.reference, archive, built: false };
  return withLock(`node-image-${key}`, async () => {
    if (await exists(archive)) return { reference: recipe.reference, archive, built: false };
    await mkdir(CACHE, { recursive: true });
    const work = await mkdtemp(join(tmpdir(), 'ei-image-'));
    try {
      const layers: string[] = [];
      if (packages.length > 0) layers.push(await packageLayer(packages, work));
      layers.push(await filesLayer(recipe, work));
      const staged = `${archive}.${process.pid}.tmp`;
      await writeLayout(recipe, layers, join(work, 'layout'), staged);
      await rename(staged, archive);
      return { reference: recipe.reference, archive, built: true };
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  });
}

async function packageLayer(packages: readonly string[], work: string): Promise<string> {
  const debs = join(work, 'debs');
  const rootfs = join(work, 'packages-rootfs');
  await mkdir(debs, { recursive: true });
  await mkdir(rootfs, { recursive: true });
  await run('apt-get', ['download', '-qq', '-o', 'Debug::NoLocking=1', ...packages], { cwd: debs, maxBuffer: 16 * 1024 * 1024, timeout: 300_000 }).catch(
    (error: { stderr?: string; message: string }) => {
      throw new Error(`apt-get download failed: ${error.stderr?.trim() ?? error.message}`);
    },
  );
  for (const deb of (await readdir(debs)).filter((name) => name.endsWith('.deb')).sort()) await run('dpkg-deb', ['-x', join(debs, deb), rootfs]);
  return tarLayer(rootfs, join(work, 'packages.tar'));
}

async function filesLayer(recipe: ImageRecipe, work: string): Promise<string> {
  const rootfs = join(work, 'files-rootfs');
  await mkdir(rootfs, { recursive: true });
  for (const file of recipe.files) {
    const target = join(rootfs, file.path);
    await mkdir(dirname(target), { recursive: true });
    await writeFile(target, file.content, { mode: file.mode ?? 0o644 });
    await chmod(target, file.mode ?? 0o644); // writeFile's mode is masked by the umask
  }
  for (const link of recipe.symlinks ?? []) {
    const path = join(rootfs, link.path);
    await mkdir(dirname(path), { recursive: true });
    await symlink(link.target, path);
  }
  return tarLayer(rootfs, join(work, 'files.tar'));
}

/** A layer tar: sorted, owned by root, dated at the epoch, so the same tree gives the same bytes. */
async function tarLayer(rootfs: string, target: string): Promise<string> {
  await run('tar', ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '--format=gnu', '-C', rootfs, '-cf', target, '.']);
  return target;
}

async function writeLayout(recipe: ImageRecipe, layers: readonly string[], layout: string, archive: string): Promise<void> {
  const blobs = join(layout, 'blobs', 'sha256');
  await mkdir(blobs, { recursive: true });
  const blob = async (content: Buffer | string): Promise<{ digest: string; size: number }> => {
    const digest = createHash('sha256').update(content).digest('hex');
    await writeFile(join(blobs, digest), content);
    return { digest: `sha256:${digest}`, size: Buffer.byteLength(content) };
  };
  const layerDescriptors = [];
  for (const layer of layers) {
    const digest = await fileDigest(layer);
    await rename(layer, join(blobs, digest));
    layerDescriptors.push({ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: `sha256:${digest}`, size: (await stat(join(blobs, digest))).size });
  }
  const config = await blob(JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: {
      ...(recipe.entrypoint === undefined ? {} : { Entrypoint: recipe.entrypoint }),
      ...(recipe.cmd === undefined ? {} : { Cmd: recipe.cmd }),
      ...(recipe.user === undefined ? {} : { User: recipe.user }),
      ...(recipe.workdir === undefined ? {} : { WorkingDir: recipe.workdir }),
      Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', ...(recipe.env ?? [])],
    },
    rootfs: { type: 'layers', diff_ids: layerDescriptors.map((layer) => layer.digest) },
  }));
  const manifest = await blob(JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', ...config },
    layers: layerDescriptors,
  }));
  const tag = recipe.reference.slice(recipe.reference.lastIndexOf(':') + 1);
  await writeFile(join(layout, 'oci-layout'), JSON.stringify({ imageLayoutVersion: '1.0.0' }));
  await writeFile(join(layout, 'index.json'), JSON.stringify({
    schemaVersion: 2,
    manifests: [{
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      ...manifest,
      platform: { architecture: 'amd64', os: 'linux' },
      annotations: { 'io.containerd.image.name': recipe.reference, 'org.opencontainers.image.ref.name': tag },
    }],
  }));
  await run('tar', ['--sort=name', '--mtime=@0', '--owner=0', '--group=0', '--numeric-owner', '-C', layout, '-cf', archive, '.']);
}

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false);
}
