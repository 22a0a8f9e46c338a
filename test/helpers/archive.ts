import { crc32, gunzipSync, inflateRawSync } from 'node:zlib';

/**
 * Just enough tar and zip reading to take one file out of an npm tarball and
 * a zip inside it, without `tar`, `unzip` or Python on the machine.
 */

/** One regular file of a gzipped tar (ustar or pax names). */
export function readTarGzEntry(tgz: Buffer, wanted: string): Buffer {
  const tar = gunzipSync(tgz);
  let paxPath: string | undefined;
  for (let offset = 0; offset + 512 <= tar.length; ) {
    const header = tar.subarray(offset, offset + 512);
    if (header.every((byte) => byte === 0)) break;
    const field = (start: number, length: number): string => {
      const raw = header.subarray(start, start + length);
      const end = raw.indexOf(0);
      return raw.subarray(0, end === -1 ? length : end).toString('utf8');
    };
    const size = Number.parseInt(field(124, 12).trim() || '0', 8);
    const type = field(156, 1);
    const prefix = field(345, 155);
    const name = paxPath ?? (prefix === '' ? field(0, 100) : `${prefix}/${field(0, 100)}`);
    const body = tar.subarray(offset + 512, offset + 512 + size);
    paxPath = undefined;
    if (type === 'x') {
      paxPath = /(?:^|\n)\d+ path=([^\n]*)\n/.exec(body.toString('utf8'))?.[1];
    } else if ((type === '0' || type === '') && name === wanted) {
      return Buffer.from(body);
    }
    offset += 512 + Math.ceil(size / 512) * 512;
  }
  throw new Error(`${wanted}: not in the tarball`);
}

/** One file of a zip archive (stored or deflated), its CRC checked. */
export function readZipEntry(zip: Buffer, wanted: string): Buffer {
  const EOCD = 0x06054b50;
  let eocd = -1;
  for (let offset = zip.length - 22; offset >= Math.max(0, zip.length - 22 - 0xffff); offset -= 1) {
    if (zip.readUInt32LE(offset) === EOCD) {
      eocd = offset;
      break;
    }
  }
  if (eocd === -1) throw new Error('not a zip archive (no end of central directory)');
  const entries = zip.readUInt16LE(eocd + 10);
  let offset = zip.readUInt32LE(eocd + 16);
  if (offset === 0xffffffff) throw new Error('zip64 archives are not supported');
  for (let index = 0; index < entries; index += 1) {
    if (zip.readUInt32LE(offset) !== 0x02014b50) throw new Error('corrupt zip central directory');
    const method = zip.readUInt16LE(offset + 10);
    const crc = zip.readUInt32LE(offset + 16);
    const compressedSize = zip.readUInt32LE(offset + 20);
    const nameLength = zip.readUInt16LE(offset + 28);
    const extraLength = zip.readUInt16LE(offset + 30);
    const commentLength = zip.readUInt16LE(offset + 32);
    const localOffset = zip.readUInt32LE(offset + 42);
    const name = zip.subarray(offset + 46, offset + 46 + nameLength).toString('utf8');
    if (name === wanted) {
      const dataStart = localOffset + 30 + zip.readUInt16LE(localOffset + 26) + zip.readUInt16LE(localOffset + 28);
      const data = zip.subarray(dataStart, dataStart + compressedSize);
      let content: Buffer;
      if (method === 0) content = Buffer.from(data);
      else if (method === 8) content = inflateRawSync(data);
      else throw new Error(`${wanted}: unsupported zip compression method ${method}`);
      if (crc32(content) !== crc) throw new Error(`${wanted}: CRC mismatch`);
      return content;
    }
    offset += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`${wanted}: not in the zip archive`);
}
