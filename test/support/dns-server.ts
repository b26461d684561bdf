import { createSocket } from 'node:dgram';
import dnsPacket, { type Answer } from 'dns-packet';

/** What a name holds: TXT records (each a list of strings, or one string) and MX records. */
export interface Zone {
  [name: string]: { TXT?: (string | string[])[]; MX?: { preference: number; exchange: string }[] };
}

export interface DnsServer {
  /** `127.0.0.1:port`, for DNS_SERVERS. */
  address: string;
  /** Replaces what the server answers (the zone is read at each query). */
  zone: Zone;
  /** Every question asked, `TYPE name`. */
  asked: string[];
  close(): Promise<void>;
}

/**
 * A real DNS server over UDP on loopback, answering from a zone the test writes (dns-packet
 * encodes the answers): NXDOMAIN for a name it does not hold, an empty answer for a type the
 * name lacks, and SERVFAIL for names under `servfail.`.
 */
/** A TXT string holds at most 255 bytes (RFC 1035 3.3): a longer record is published as several. */
function chunks(text: string): string[] {
  const parts: string[] = [];
  for (let i = 0; i < text.length; i += 255) parts.push(text.slice(i, i + 255));
  return parts;
}

export async function startDnsServer(zone: Zone): Promise<DnsServer> {
  const socket = createSocket('udp4');
  const server: DnsServer = {
    address: '',
    zone,
    asked: [],
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
  socket.on('message', (message, peer) => {
    const query = dnsPacket.decode(message);
    const question = query.questions?.[0];
    if (!question) return;
    const name = question.name.toLowerCase();
    server.asked.push(`${question.type} ${name}`);
    const held = server.zone[name];
    const answers: Answer[] = [];
    for (const data of question.type === 'TXT' ? (held?.TXT ?? []) : []) {
      answers.push({ type: 'TXT', name: question.name, ttl: 60, data: typeof data === 'string' ? chunks(data) : data });
    }
    if (question.type === 'MX') for (const data of held?.MX ?? []) answers.push({ type: 'MX', name: question.name, ttl: 60, data });
    // The rcode is the low 4 bits of the flags (RFC 1035 4.1.1): 0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN.
    const rcode = name.endsWith('servfail.test') ? 2 : held ? 0 : 3;
    const flags = dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode;
    const reply = dnsPacket.encode({ id: query.id, type: 'response', flags, questions: [question], answers });
    socket.send(reply, peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  server.address = `127.0.0.1:${socket.address().port}`;
  return server;
}
