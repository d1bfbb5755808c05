import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** A throwaway TLS PKI made with the openssl CLI: a CA, a server certificate for localhost/127.0.0.1, client certificates. */
export class TlsPki {
  constructor(
    readonly dir: string,
    readonly name = 'ca',
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.openssl(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', this.file('key'), '-out', this.file('pem'),
      '-subj', `/CN=${name}`, '-days', '2', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  }

  get caPem(): string {
    return this.file('pem');
  }

  get caKey(): string {
    return this.file('key');
  }

  private file(ext: string, base = this.name): string {
    return path.join(this.dir, `${base}.${ext}`);
  }

  private openssl(args: string[]): void {
    execFileSync('openssl', args, { stdio: 'ignore' });
  }

  /** Issues a certificate; returns the paths of its PEM and key. */
  issue(cn: string, o: { server?: boolean; san?: string; ocspUrl?: string } = {}): { cert: string; key: string } {
    const base = `${this.name}-${cn}`;
    const ext = path.join(this.dir, `${base}.ext`);
    const aia = o.ocspUrl ? `authorityInfoAccess=OCSP;URI:${o.ocspUrl}\n` : '';
    fs.writeFileSync(ext, (o.server ? `subjectAltName=${o.san ?? 'DNS:localhost,IP:127.0.0.1'}\nextendedKeyUsage=serverAuth\n` : 'extendedKeyUsage=clientAuth\n') + aia);
    this.openssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', this.file('key', base), '-out', this.file('csr', base), '-subj', `/CN=${cn}`]);
    this.openssl(['x509', '-req', '-in', this.file('csr', base), '-CA', this.caPem, '-CAkey', this.file('key'), '-CAcreateserial', '-out', this.file('pem', base), '-days', '2', '-extfile', ext]);
    return { cert: this.file('pem', base), key: this.file('key', base) };
  }
}
