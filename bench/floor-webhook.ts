/**
 * The floor of the cluster figures (bench/cluster-latency.ts): a webhook
 * that does no work, called by a real API server. The same stack as the
 * loopback floor (floor-server.ts: Fastify from the same node_modules, TLS
 * 1.2+, 4 MiB bodies, Fastify's own JSON parser) answering our server's own
 * answer to a Pod of the bench's shape, with what the API server checks or
 * the Pod needs set per request: the request's uid, and the Pod's
 * ServiceAccount token volume's name in the patch (our answer mounts it; a
 * patch naming another Pod's volume would be refused). That is the price of
 * any webhook that patches a Pod.
 *   node floor-webhook.mjs CERT KEY ANSWER.json TOKEN_VOLUME_NAME [HOST [PORT]]
 * (HOST defaults to 127.0.0.1, PORT to any free port.)
 * Prints {"msg":"floor webhook serving https on port N","port":N} once listening.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';

const [certFile, keyFile, answerFile, volumeName, host = '127.0.0.1', listenPort = '0'] = process.argv.slice(2);
if (certFile === undefined || keyFile === undefined || answerFile === undefined || volumeName === undefined) {
  process.stderr.write('usage: node floor-webhook.mjs CERT KEY ANSWER.json TOKEN_VOLUME_NAME [HOST [PORT]]\n');
  process.exit(2);
}

interface Answer {
  apiVersion: string;
  kind: string;
  response: Record<string, unknown> & { patch?: string };
}
interface Review {
  request?: { uid?: string; object?: { spec?: { volumes?: { name?: string }[] } } };
}

const answer = JSON.parse(readFileSync(answerFile, 'utf8')) as Answer;
// The patch's JSON cut where it names the token volume: each request's name goes in between.
const pieces = Buffer.from(answer.response.patch ?? '', 'base64').toString('utf8').split(volumeName);

const app = Fastify({
  logger: false,
  bodyLimit: 4 * 1024 * 1024,
  https: { cert: readFileSync(certFile), key: readFileSync(keyFile), minVersion: 'TLSv1.2' },
});
app.post('/mutate', async (request, reply) => {
  const review = request.body as Review;
  const name = review.request?.object?.spec?.volumes?.find((volume) => volume.name?.startsWith('kube-api-access-') === true)?.name ?? volumeName;
  const patch = pieces.length === 1 ? answer.response.patch : Buffer.from(pieces.join(name)).toString('base64');
  return reply.send({ apiVersion: answer.apiVersion, kind: answer.kind, response: { ...answer.response, uid: review.request?.uid ?? '', patch } });
});

await app.listen({ host, port: Number(listenPort) });
const { port } = app.server.address() as AddressInfo;
process.stdout.write(`${JSON.stringify({ msg: `floor webhook serving https on port ${port}`, port })}\n`);
const close = (): void => void app.close().then(() => process.exit(0));
process.once('SIGTERM', close);
process.once('SIGINT', close);
