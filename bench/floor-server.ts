/**
 * The floor: what HTTPS + the AdmissionReview JSON envelope cost on this
 * stack with no injection work. The same Fastify (same version, resolved
 * from the same node_modules), the same certificate and key files, the same
 * TLS minimum and body limit as our server; one POST route that lets Fastify
 * parse the body with its default JSON parser and answers a precomputed,
 * fixed AdmissionReview (our server's own answer to the same input, so the
 * bytes on the wire are the same).
 *   node --import tsx bench/floor-server.ts CERT KEY RESPONSE.json
 * Prints {"msg":"floor serving https on port N","port":N} once listening.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';

const [certFile, keyFile, responseFile] = process.argv.slice(2);
if (certFile === undefined || keyFile === undefined || responseFile === undefined) {
  process.stderr.write('usage: node --import tsx bench/floor-server.ts CERT KEY RESPONSE.json\n');
  process.exit(2);
}

const response = JSON.parse(readFileSync(responseFile, 'utf8')) as unknown;
const app = Fastify({
  logger: false,
  // As our server: a ~1 MiB Pod must be accepted.
  bodyLimit: 4 * 1024 * 1024,
  https: { cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: 'TLSv1.2' },
});
app.post('/mutate', async (_request, reply) => reply.send(response));

await app.listen({ host: '127.0.0.1', port: 0 });
const { port } = app.server.address() as AddressInfo;
process.stdout.write(`${JSON.stringify({ msg: `floor serving https on port ${port}`, port })}\n`);
const close = (): void => void app.close().then(() => process.exit(0));
process.once('SIGTERM', close);
process.once('SIGINT', close);
