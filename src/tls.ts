import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Config } from './config.ts';
import { inRealTime } from './time.ts';

/**
 * TLS 1.2 and 1.3 only, and for TLS 1.2 only forward-secret AEAD suites (AES-GCM, ChaCha20-Poly1305):
 * no CBC-SHA1/SHA256, no static RSA key exchange.
 */
export const TLS_SERVER_OPTIONS = {
  minVersion: 'TLSv1.2',
  ciphers: [
    'TLS_AES_128_GCM_SHA256',
    'TLS_AES_256_GCM_SHA384',
    'TLS_CHACHA20_POLY1305_SHA256',
    'ECDHE-ECDSA-AES128-GCM-SHA256',
    'ECDHE-RSA-AES128-GCM-SHA256',
    'ECDHE-ECDSA-AES256-GCM-SHA384',
    'ECDHE-RSA-AES256-GCM-SHA384',
    'ECDHE-ECDSA-CHACHA20-POLY1305',
    'ECDHE-RSA-CHACHA20-POLY1305',
  ].join(':'),
  honorCipherOrder: true,
} as const;

interface TlsMaterial {
  key: string;
  cert: string;
  /** Where the certificate lives, for the curl line printed at first start. */
  certFile: string;
  generated: boolean;
}

/**
 * The operator's certificate when TLS_CERT_FILE/TLS_KEY_FILE are set; otherwise a self-signed one
 * for localhost, generated once into DATA_DIR/tls and reused on every later start.
 */
export async function loadTls(config: Config): Promise<TlsMaterial> {
  if (config.tlsCertFile && config.tlsKeyFile) {
    const [cert, key] = await Promise.all([readFile(config.tlsCertFile, 'utf8'), readFile(config.tlsKeyFile, 'utf8')]);
    return { key, cert, certFile: config.tlsCertFile, generated: false };
  }
  const dir = join(config.dataDir, 'tls');
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  if (existsSync(certFile) && existsSync(keyFile)) {
    const [cert, key] = await Promise.all([readFile(certFile, 'utf8'), readFile(keyFile, 'utf8')]);
    return { key, cert, certFile, generated: false };
  }
  // The certificate is judged by its clients against the real clock, whatever a test's clock says.
  const now = inRealTime(0);
  // Loaded only to make a certificate (once per DATA_DIR): it costs every other start 80 ms.
  const { generate } = await import('selfsigned');
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: now,
    notAfterDate: new Date(now.getTime() + 825 * 86_400_000),
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFile(keyFile, pems.private, { mode: 0o600 });
  await writeFile(certFile, pems.cert, { mode: 0o644 });
  return { key: pems.private, cert: pems.cert, certFile, generated: true };
}
