/**
 * The recorder: an HTTP server on the node's address (RECORDER_ADDRESS, baked
 * into the stand-in's and the app's images) that keeps what they report
 * (images/record.py) and tells each Pod the behaviour the test chose for it
 * (`configure`). GET / answers like the app does, so a Pod can call the node
 * (an address outside the Pod network, for the excluded-CIDR case).
 */
import { createServer, type Server } from 'node:http';
import { eventually } from '../e2e/cluster.js';
import { NODE_IP, RECORDER_PORT } from './network.js';

export interface NodeRecord {
  readonly source: 'stand-in' | 'app' | 'recorder';
  readonly event: string;
  readonly pod: string;
  /** Seconds since the epoch, the sender's clock (the node's: containers share the kernel's). */
  readonly time: number;
  readonly [field: string]: unknown;
}

export interface PodBehaviour {
  /** The stand-in answers /ready with 503 for this long after it started. */
  readonly readyDelaySeconds?: number;
}

export interface Recorder {
  readonly records: readonly NodeRecord[];
  configure(pod: string, behaviour: PodBehaviour): void;
  /** POD's records, in the order they arrived, optionally of one SOURCE and EVENT. */
  of(pod: string, source?: NodeRecord['source'], event?: string): NodeRecord[];
  /** The first record of POD that MATCHES, waited for (bounded) and named WHAT in the error. */
  waitFor(what: string, pod: string, matches: (record: NodeRecord) => boolean, timeoutMs?: number): Promise<NodeRecord>;
  close(): Promise<void>;
}

export async function startRecorder(): Promise<Recorder> {
  const records: NodeRecord[] = [];
  const behaviours = new Map<string, PodBehaviour>();
  const server: Server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://recorder');
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      if (request.method === 'POST' && url.pathname === '/record') {
        try {
          records.push(JSON.parse(body) as NodeRecord);
        } catch {
          response.writeHead(400).end('not JSON\n');
          return;
        }
        response.end('ok\n');
      } else if (url.pathname === '/config') {
        response.setHeader('content-type', 'application/json');
        response.end(JSON.stringify(behaviours.get(url.searchParams.get('pod') ?? '') ?? {}));
      } else {
        const peer = request.socket.remoteAddress ?? '';
        records.push({ source: 'recorder', event: 'served', pod: '', time: Date.now() / 1000, peer: peer.replace(/^::ffff:/, '') });
        response.end(`recorder ${NODE_IP} ${RECORDER_PORT} from ${peer.replace(/^::ffff:/, '')}\n`);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(RECORDER_PORT, NODE_IP, resolve);
  });
  const of = (pod: string, source?: NodeRecord['source'], event?: string): NodeRecord[] =>
    records.filter((record) => record.pod === pod && (source === undefined || record.source === source) && (event === undefined || record.event === event));
  return {
    records,
    configure: (pod, behaviour) => void behaviours.set(pod, behaviour),
    of,
    waitFor: (what, pod, matches, timeoutMs = 30_000) => eventually(what, async () => of(pod).find(matches), timeoutMs),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
