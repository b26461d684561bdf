import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/**
 * The webhook benchmark's receiver (bench/webhooks.ts), a process of its own: an HTTPS server on
 * loopback answering 204 to every post, as cheaply as a receiver can. It tells its parent how many
 * posts arrived (at most every 20 ms), and on request when each event of each labelled batch
 * arrived (the label is the part of the contact's address before the dash).
 */
interface Start {
  type: 'start';
  key: string;
  cert: string;
}
type Message = Start | { type: 'report' } | { type: 'reset' };

let received = 0;
let told = -1;
let arrivals = new Map<string, number[]>();
const label = /"email":"([^"-]+)-/;

const send = (message: object) => process.send?.(message);
setInterval(() => {
  if (received === told) return;
  told = received;
  send({ type: 'count', received });
}, 20).unref();

process.on('message', (message: Message) => {
  if (message.type === 'start') {
    const server = createServer({ key: message.key, cert: message.cert, keepAliveTimeout: 60_000 }, (req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const at = Date.now();
        received++;
        const name = label.exec(body)?.[1];
        if (name) {
          const list = arrivals.get(name);
          if (list) list.push(at);
          else arrivals.set(name, [at]);
        }
        res.writeHead(204).end();
      });
    });
    server.listen(0, '127.0.0.1', () => send({ type: 'port', port: (server.address() as AddressInfo).port }));
  } else if (message.type === 'report') {
    send({ type: 'report', arrivals: Object.fromEntries(arrivals) });
  } else if (message.type === 'reset') {
    received = 0;
    arrivals = new Map();
    told = 0;
    send({ type: 'count', received: 0 });
  }
});
process.on('disconnect', () => process.exit(0));
