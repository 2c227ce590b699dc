// Certificates of the edge's TLS listener, chosen per SNI server name. A directory holds PEM pairs,
// `<name>.crt` (the chain, leaf first) beside `<name>.key`; the names a certificate serves come from
// its subjectAltName DNS entries (the subject CN when it has none), so file names do not matter.
// Loaded once: the listener sees a new or renewed certificate after the next start.
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';

export type CertificateLookup = (servername: string) => tls.SecureContext | undefined;

/** One usable pair: its PEM texts, and the context Node's TLS serves it with. */
export interface CertificatePair {
  certFile: string;
  cert: string;
  key: string;
  context: tls.SecureContext;
  validTo: number;
}

/**
 * Reads every pair in `dir` and maps each DNS name (lower-case, `*.` for a wildcard) to the pair that
 * serves it: during a renewal both certificates may be present, and the one valid longer wins. A
 * missing directory serves no name. A pair that cannot be used (no key, a key that does not match) is
 * skipped and reported through `onInvalid`. The HAProxy edge writes its crt-list from this.
 */
export async function loadCertificatePairs(
  dir: string,
  onInvalid: (file: string, error: Error) => void = () => undefined,
): Promise<Map<string, CertificatePair>> {
  const byName = new Map<string, CertificatePair>();
  let entries: string[];
  try {
    entries = await fs.readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return byName;
    throw error;
  }
  for (const entry of entries.filter((name) => name.endsWith('.crt')).sort()) {
    const certFile = path.join(dir, entry);
    try {
      const cert = await fs.readFile(certFile, 'utf8');
      const key = await fs.readFile(certFile.slice(0, -'.crt'.length) + '.key', 'utf8');
      const leaf = new X509Certificate(cert);
      const loaded: CertificatePair = {
        certFile,
        cert,
        key,
        context: tls.createSecureContext({ cert, key }),
        validTo: Date.parse(leaf.validTo),
      };
      for (const name of certificateNames(leaf)) {
        const existing = byName.get(name);
        if (!existing || existing.validTo < loaded.validTo) byName.set(name, loaded);
      }
    } catch (error) {
      onInvalid(certFile, error as Error);
    }
  }
  return byName;
}

/**
 * The Node edge's lookup: the context for an SNI server name (exact, or a wildcard one label up), from
 * loadCertificatePairs.
 */
export async function loadCertificateStore(
  dir: string,
  onInvalid: (file: string, error: Error) => void = () => undefined,
): Promise<CertificateLookup> {
  const byName = await loadCertificatePairs(dir, onInvalid);
  return (servername) => {
    let name = servername.toLowerCase();
    if (name.endsWith('.')) name = name.slice(0, -1);
    const exact = byName.get(name);
    if (exact) return exact.context;
    // A wildcard covers exactly one label (RFC 6125 6.4.3).
    const dot = name.indexOf('.');
    return dot > 0 ? byName.get(`*${name.slice(dot)}`)?.context : undefined;
  };
}

/** The DNS names a certificate is for, lower-case. */
export function certificateNames(cert: X509Certificate): string[] {
  const altNames = (cert.subjectAltName ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice('DNS:'.length).toLowerCase());
  if (altNames.length > 0) return altNames;
  const commonName = /^CN=(.+)$/m.exec(cert.subject)?.[1];
  return commonName ? [commonName.trim().toLowerCase()] : [];
}
