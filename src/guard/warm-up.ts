import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import express, { type Request, type Response } from 'express';
import type { GuardDeps } from './authserver/deps';
import { verifyCardChain } from './pki/card-trust';
import { createCardCa, issueCard } from './pki/dev-pki';
import { validatePath } from './pki/path-validation';

/**
 * The guard's start-up work (the first request after start as fast as a warm one,
 * docs/requirements.md#performance-aims), run before the server listens: the signing key loaded
 * (or created), and a rehearsal of what a first registration and token exchange would otherwise
 * load and compile on the caller's time — the request body readers, and the checks of an institution card (path validation to a trust anchor,
 * the admission extension, the OCSP responder lookup) on a throwaway card from a throwaway CA,
 * which no configured anchor trusts and no state remembers beyond the checks' own caches.
 */
export async function warmUpGuard(deps: GuardDeps): Promise<void> {
  const { logger } = deps.ctx;
  await deps.keys.signingKey().catch((err: unknown) => logger.warn({ err }, 'guard warm-up: signing key not loaded'));
  // A CARD_TSL that yields no list stops the start here, with the reason.
  await deps.cardIssuers.load();
  for (const anchor of await deps.cardIssuers.anchors()) await validatePath(anchor.raw, [], [anchor.raw], deps.ctx.now()).catch(() => undefined);
  await rehearseCardChecks(deps).catch((err: unknown) => logger.warn({ err }, 'guard warm-up: card checks not rehearsed'));
  await readBodyOnce(express.json({ type: () => true }), 'application/json', '{}');
  await readBodyOnce(express.text({ type: () => true }), 'application/x-www-form-urlencoded', 'a=b');
}

async function rehearseCardChecks(deps: GuardDeps): Promise<void> {
  const ca = createCardCa({ commonName: 'Terminus warm-up CA (trusted by nothing)' });
  const card = issueCard(ca, { telematikId: '1-WARM-UP' });
  const leaf = new crypto.X509Certificate(card.certPem);
  const issuer = new crypto.X509Certificate(ca.certPem);
  await verifyCardChain([leaf.raw.toString('base64'), issuer.raw.toString('base64')], [issuer], deps.ctx.now());
  // CARD_OCSP=required refuses a card without a responder: the parsing ran all the same.
  await deps.ocsp.check(leaf.raw, issuer.raw).catch(() => undefined);
}

/** Runs a body reader once over an in-memory request (its charset decoders load on first use). */
function readBodyOnce(reader: express.RequestHandler, contentType: string, body: string): Promise<void> {
  const req = Object.assign(Readable.from([Buffer.from(body)]), {
    headers: { 'content-type': `${contentType}; charset=utf-8`, 'content-length': String(Buffer.byteLength(body)) },
    method: 'POST',
  });
  return new Promise((resolve) => {
    void reader(req as unknown as Request, {} as Response, () => resolve());
  });
}
