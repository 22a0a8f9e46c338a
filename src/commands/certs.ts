import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { describeCertificate, DEFAULT_HOSTS } from '../tls/certificates.js';
import { writeCertificateFiles } from '../server/serve.js';
import { readInput, type CommandIo } from './io.js';

export const CERTS_HELP = `Usage: envoy-injector certs [--out DIR] [--host NAME]...

Makes a development CA (ca.crt, ca.key) and a serving certificate signed by it
(tls.crt, tls.key) in DIR (default certs/). The serving certificate is valid
for every --host (DNS name or IP) plus ${DEFAULT_HOSTS.join(', ')}. Existing files are replaced.

Options:
  --out DIR        where to write (default certs)
  --host NAME      a DNS name or IP address for the certificate (repeatable)
  -h, --help
`;

export async function runCerts(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      out: { type: 'string', default: 'certs' },
      host: { type: 'string', multiple: true, default: [] },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(CERTS_HELP);
    return 0;
  }
  await writeCertificateFiles(values.out, values.host);
  const info = describeCertificate(await readInput(join(values.out, 'tls.crt'), io));
  io.stdout.write(`wrote ${['ca.crt', 'ca.key', 'tls.crt', 'tls.key'].map((file) => join(values.out, file)).join(', ')}\n`);
  io.stdout.write(`serving certificate for ${info.subjectAltNames.join(', ')}, valid until ${info.notAfter.toISOString()}\n`);
  return 0;
}
