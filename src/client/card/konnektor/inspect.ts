import { parseAdmission, ADMISSION_OID } from '../../../common/admission';
import * as pkijs from 'pkijs';
import type crypto from 'node:crypto';
import { readKonFile } from './kon-file';
import { KonnektorClient } from './konnektor-client';
import { KonnektorError } from './konnektor-error';

/**
 * What `konnektor inspect` shows (as zeta-cli's `connector inspect`, plus the cards): the
 * configuration without its secrets, the Konnektor's product and services with their versions, and
 * each SMC-B with handle, Telematik-ID and PIN status. A card that cannot be read is listed with
 * the reason; the Konnektor itself not answering is an error.
 */
export async function inspectKonnektor(file: string, env: NodeJS.ProcessEnv = process.env) {
  const kon = readKonFile(file, env);
  const client = await KonnektorClient.connect(kon, `the .kon file ${file}`);
  const cards = await client.getCards('SMC-B');
  const described = await Promise.all(
    cards.map(async (card) => {
      const out: Record<string, unknown> = { handle: card.handle, type: card.type, ...(card.iccsn ? { iccsn: card.iccsn } : {}), ...(card.holder ? { holder: card.holder } : {}) };
      try {
        const cert = (await client.readAuthCertificate(card.handle, 'ECC')) ?? (await client.readAuthCertificate(card.handle, 'RSA'));
        if (cert) Object.assign(out, certificateFacts(cert));
        const pin = await client.pinStatus(card.handle);
        out.pinStatus = pin.status;
        if (pin.leftTries !== undefined) out.leftTries = pin.leftTries;
      } catch (err) {
        if (!(err instanceof KonnektorError)) throw err;
        out.error = err.message;
      }
      return out;
    }),
  );
  const c = kon.credentials;
  return {
    configuration: {
      file,
      ...(kon.version ? { version: kon.version } : {}),
      url: kon.url,
      ...(kon.env ? { env: kon.env } : {}),
      ...(kon.expectedHost ? { expectedHost: kon.expectedHost } : {}),
      mandantId: kon.mandantId,
      workplaceId: kon.workplaceId,
      clientSystemId: kon.clientSystemId,
      ...(kon.userId ? { userId: kon.userId } : {}),
      ...(kon.telematikId ? { telematikId: kon.telematikId } : {}),
      credentials: c.type === 'basic' ? { type: 'basic', username: c.username } : { type: c.type },
      ...(kon.trustStore.length ? { trustStoreSize: kon.trustStore.length } : {}),
      ...(kon.insecureSkipVerify ? { insecureSkipVerify: true } : {}),
      ...(kon.rewriteServiceEndpoints ? { rewriteServiceEndpoints: true } : {}),
    },
    productInformation: client.directory.productInformation,
    services: [...client.directory.services].sort((a, b) => a.name.localeCompare(b.name)),
    cards: described,
  };
}

function certificateFacts(cert: crypto.X509Certificate): Record<string, unknown> {
  const ext = pkijs.Certificate.fromBER(new Uint8Array(cert.raw)).extensions?.find((e) => e.extnID === ADMISSION_OID);
  const admission = ext ? parseAdmission(ext.extnValue.valueBlock.valueHexView) : undefined;
  const key = cert.publicKey;
  return {
    ...(admission ? { telematikId: admission.telematikId, professionOid: admission.professionOid } : {}),
    certificate: { subject: cert.subject.replace(/\n/g, ', '), notAfter: new Date(cert.validTo).toISOString(), key: key.asymmetricKeyType === 'rsa' ? 'RSA' : (key.asymmetricKeyDetails?.namedCurve ?? 'EC') },
  };
}

/** The terminal summary of an inspection. */
export function inspectionText(r: Awaited<ReturnType<typeof inspectKonnektor>>): string {
  const lines = [`Konnektor ${r.configuration.url} (${[r.productInformation.vendor, r.productInformation.productCode, r.productInformation.fwVersion].filter(Boolean).join(' ')})`];
  lines.push(`context: Mandant ${r.configuration.mandantId}, client system ${r.configuration.clientSystemId}, workplace ${r.configuration.workplaceId}; credentials ${r.configuration.credentials.type}`);
  for (const s of r.services) lines.push(`  ${s.name}: ${s.versions.map((v) => v.version).join(', ')}`);
  if (r.cards.length === 0) lines.push('no SMC-B in the terminals of this context');
  for (const card of r.cards) {
    lines.push(`SMC-B ${card.handle}: ${card.error ? `not readable (${card.error})` : `Telematik-ID ${String(card.telematikId ?? 'unknown')}, PIN.SMC ${String(card.pinStatus)}`}${card.holder ? `, ${String(card.holder)}` : ''}`);
  }
  return lines.join('\n');
}
