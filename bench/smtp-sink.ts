import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

/**
 * The benchmark's SMTP server, run as a child process (`fork`) so that it does not share the
 * sender's CPU. It accepts everything, keeps only each message's Message-ID (to count distinct
 * messages and duplicates) and the bytes of every message's data (so two senders' messages can be
 * compared by size), and answers the parent's questions over IPC:
 * `{ type: 'count' }` → `{ type: 'count', received, distinct, bytes }`; `{ type: 'reset' }` forgets all.
 */
const seen = new Set<string>();
let received = 0;
let bytes = 0;
const MESSAGE_ID = /^message-id:[ \t]*(<[^>\r\n]*>)/im;

const server = new SMTPServer({
  authOptional: true,
  disabledCommands: ['STARTTLS', 'AUTH'],
  logger: false,
  maxClients: 1000,
  onData(stream, _session, callback) {
    let head = '';
    stream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      // Headers come first; the body is only counted, never kept.
      if (head.length < 8192 && !head.includes('\r\n\r\n')) head += chunk.toString('latin1', 0, Math.min(chunk.length, 8192));
    });
    stream.on('end', () => {
      received++;
      const id = MESSAGE_ID.exec(head)?.[1];
      if (id) seen.add(id);
      callback();
    });
  },
});

server.listen(0, '127.0.0.1', () => {
  process.send?.({ type: 'listening', port: (server.server.address() as AddressInfo).port });
});

process.on('message', (message: { type: string }) => {
  if (message.type === 'count') process.send?.({ type: 'count', received, distinct: seen.size, bytes });
  if (message.type === 'reset') {
    received = 0;
    bytes = 0;
    seen.clear();
    process.send?.({ type: 'reset' });
  }
});
process.on('disconnect', () => server.close(() => process.exit(0)));
