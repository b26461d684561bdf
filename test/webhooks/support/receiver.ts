import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';

/**
 * A real HTTPS webhook receiver on loopback with a certificate of its own (its file is what the
 * app trusts through WEBHOOK_CA_FILE). It keeps every request as it arrived and answers with the
 * status `respond` picks (200 unless told otherwise).
 */
export interface Received {
  headers: Record<string, string>;
  body: string;
  at: number;
}

export interface Receiver {
  url: string;
  port: number;
  caFile: string;
  received: Received[];
  /** The status to answer with, or a status and headers (`Retry-After`, …). */
  respond: (request: Received, index: number) => number | { status: number; headers: Record<string, string> };
  /** Stops accepting connections (the endpoint is "down") and drops open ones. */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  close(): Promise<void>;
}

let material: Promise<{ key: string; cert: string }> | undefined;
function certificate() {
  material ??= generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
        ],
      },
    ],
  }).then((pems) => ({ key: pems.private, cert: pems.cert }));
  return material;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  const { key, cert } = await certificate();
  const dir = await mkdtemp(join(tmpdir(), 'hopper-receiver-'));
  const caFile = join(dir, 'ca.pem');
  await writeFile(caFile, cert);
  let server: Server;
  const receiver: Receiver = {
    url: '',
    port: 0,
    caFile,
    received: [],
    respond: () => 200,
    async down() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
    async up() {
      await listen(receiver.port);
    },
    async close() {
      if (server.listening) await receiver.down();
      await rm(dir, { recursive: true, force: true });
    },
  };
  const listen = (onPort: number) =>
    new Promise<void>((resolve, reject) => {
      server = createServer({ key, cert }, (request, response) => {
        const chunks: Buffer[] = [];
        request.on('data', (chunk: Buffer) => chunks.push(chunk));
        request.on('end', () => {
          const headers = Object.fromEntries(Object.entries(request.headers).map(([k, v]) => [k, String(v)]));
          const entry = { headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
          const index = receiver.received.push(entry) - 1;
          const answer = receiver.respond(entry, index);
          const { status, headers: extra } = typeof answer === 'number' ? { status: answer, headers: {} } : answer;
          response.writeHead(status, { 'content-type': 'text/plain', ...extra }).end('ok');
        });
      });
      server.once('error', reject);
      server.listen(onPort, '127.0.0.1', () => {
        receiver.port = (server.address() as AddressInfo).port;
        receiver.url = `https://localhost:${receiver.port}/hooks`;
        resolve();
      });
    });
  await listen(port);
  return receiver;
}
