import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { AppContext } from '../../context';
import { pemCertificates } from './certificate-builder';
import { RefreshedList } from './refreshed-list';
import { TrustListRejected } from './tsl/xml-dom';

/** The trust anchors of one attestation method (DER), as they stand now. */
export type AnchorSource = () => Promise<Buffer[]>;

/** Published root lists change seldom (a new root a year); read daily, kept while the host is down. */
const REFRESH_MS = 86_400_000;
/** With no bundle at all (the host down at the first use, nothing kept), read again on use this often. */
const RETRY_MS = 30_000;

/**
 * The anchors a variable names: a PEM file, read once at start; or an https URL of a PEM bundle (as
 * manufacturers and platform vendors publish their roots), read on first use and daily through the
 * loader of the TSL (refreshed-list.ts): kept under DATA_DIR, the last good bundle used while a
 * download fails. An empty or unparsable bundle is refused, never taken as "no roots".
 */
export function anchorSource(ctx: AppContext, name: string, source: string): AnchorSource {
  if (!/^https:\/\//.test(source)) {
    const anchors = pemCertificates(fs.readFileSync(source, 'utf8'));
    return async () => anchors;
  }
  const list = new RefreshedList<Buffer[]>({
    name,
    source,
    storeFile: path.join(ctx.config.dataDir, 'trust', `${name.toLowerCase()}.pem`),
    refreshMs: REFRESH_MS,
    graceMs: 0,
    now: ctx.now,
    logger: ctx.logger,
    async decode(text) {
      return { value: pemBundle(text, `${name} (${source})`) };
    },
  });
  return async () => (await list.valueOnUse(RETRY_MS)) ?? [];
}

function pemBundle(text: string, what: string): Buffer[] {
  const ders = pemCertificates(text);
  if (ders.length === 0) throw new TrustListRejected('malformed', `${what} holds no PEM certificate`);
  ders.forEach((der, i) => {
    try {
      new crypto.X509Certificate(der);
    } catch {
      throw new TrustListRejected('malformed', `${what}: certificate ${i + 1} does not parse`);
    }
  });
  return ders;
}
