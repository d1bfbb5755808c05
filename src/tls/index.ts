/**
 * The server's own TLS (TLS_CERT_FILE, TLS_KEY_FILE, TLS_OCSP_STAPLING): TLS 1.3 only, the files
 * followed as an operator or an ACME client replaces them, and the OCSP answer stapled.
 */
import fs from 'node:fs';
import type https from 'node:https';
import type { Logger } from 'pino';
import { readTlsCredentials, TlsFilesUnusable, type TlsCredentials } from './credentials';
import { OcspStapler, type StaplerSettings } from './ocsp-stapler';

export { readTlsCredentials, TlsFilesUnusable } from './credentials';
export { OcspStapler } from './ocsp-stapler';

export interface TlsSettings {
  certFile: string;
  keyFile: string;
  ocspStapling: boolean;
}

/** TLS 1.3 only: the versions below are not offered (docs/requirements.md#configuration). */
const MIN_VERSION = 'TLSv1.3';
/** How often the two files are looked at (their stat): a replaced file is served within about this long. */
const WATCH_INTERVAL_MS = 1000;

export interface ServerTls {
  /** Options for `https.createServer`. */
  options: https.ServerOptions;
  /** Serves new files as they appear, and staples, on this server. */
  attach(server: https.Server): void;
  /** The stapler, when TLS_OCSP_STAPLING is on. */
  stapler?: OcspStapler;
  stop(): void;
}

/**
 * Reads the files once (a start-up error names the variable when they cannot serve) and fetches
 * the first OCSP answer before the server listens, so the first handshake already carries it.
 */
export async function serverTls(settings: TlsSettings, logger: Logger, now: () => Date, stapling?: StaplerSettings): Promise<ServerTls> {
  let current = readTlsCredentials(settings.certFile, settings.keyFile);
  const stapler = settings.ocspStapling ? new OcspStapler(logger, now, stapling) : undefined;
  await stapler?.follow(current.leaf, current.issuer);
  let onChange: (() => void) | undefined;
  return {
    options: contextOptions(current),
    stapler,
    attach(server) {
      if (stapler) server.on('OCSPRequest', (_cert: Buffer, _issuer: Buffer, done: (err: Error | null, response?: Buffer | null) => void) => done(null, stapler.current() ?? null));
      onChange = () => {
        let next: TlsCredentials;
        try {
          next = readTlsCredentials(settings.certFile, settings.keyFile);
        } catch (err) {
          // Between the renames of the certificate and its key the pair does not match: the next change completes it.
          const problem = err instanceof TlsFilesUnusable ? err.message : String(err);
          logger.warn({ problem }, 'TLS: the certificate files cannot serve yet; the previous certificate stays');
          return;
        }
        if (next.version === current.version) return;
        server.setSecureContext(contextOptions(next));
        current = next;
        logger.info({ subject: next.leaf.subject, validTo: next.leaf.validTo, file: settings.certFile }, 'TLS: serving the new certificate');
        void stapler?.follow(next.leaf, next.issuer);
      };
      for (const file of [settings.certFile, settings.keyFile]) fs.watchFile(file, { interval: WATCH_INTERVAL_MS, persistent: false }, onChange);
    },
    stop() {
      if (onChange) for (const file of [settings.certFile, settings.keyFile]) fs.unwatchFile(file, onChange);
      stapler?.stop();
    },
  };
}

function contextOptions(c: TlsCredentials): https.ServerOptions {
  return { cert: c.cert, key: c.key, minVersion: MIN_VERSION };
}
