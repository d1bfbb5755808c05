/**
 * Real access tokens for tests of other parts (FHIR, PEP): registers a software client, issues an
 * institution card from the server's development PKI and runs the full token exchange.
 *
 *   const app = createApp(ctx);
 *   const t = await getTestToken(app, ctx, { telematikId: '1-A', professionOid: '1.2.276.0.76.4.50' });
 *   const url = `${ctx.config.publicUrl}/fhir/Appointment`;
 *   await request(app).get('/fhir/Appointment')
 *     .set('Authorization', `DPoP ${t.accessToken}`)
 *     .set('DPoP', await t.makeProof('GET', url, t.accessToken));
 *
 * `app` may also be a base URL of a running server (`http://127.0.0.1:PORT`): requests go there,
 * while `htu` and `aud` keep naming PUBLIC_URL. A Telematik-ID listed in REPOSITORY_OWNERS gets
 * `system/*.cruds` too. CARD_TRUST_ANCHORS must be unset (the dev PKI is trusted then).
 */
import type { Express } from 'express';
import type { AppContext } from '../../../src/context';
import { GuardClient, type EcKey } from '../../../src/client';
import { SoftwareCard } from '../../../src/client/software-card';
import { fetchTransport, type HttpTransport } from '../../../src/client/transport';
import { devPkiFor, issueCard, type CardCurve } from '../../../src/guard/pki/dev-pki';
import { supertestTransport } from './transport';

export interface TestTokenOptions {
  telematikId: string;
  /** Default 1.2.276.0.76.4.50 (Betriebsstätte Arzt). */
  professionOid?: string;
  commonName?: string;
  organizationName?: string;
  curve?: CardCurve;
  scope?: string;
}

export interface TestToken {
  accessToken: string;
  refreshToken: string;
  clientId: string;
  dpopKey: EcKey;
  scope: string;
  /** A DPoP proof for `method url` with the token's key; pass the access token to get `ath`. */
  makeProof(method: string, url: string, ath?: string): Promise<string>;
  /** The client behind it (refresh, revoke, request). */
  client: GuardClient;
}

const cards = new Map<string, SoftwareCard>();

/** A card for this institution, issued once per process by the dev PKI the server trusts. */
export function testCard(ctx: AppContext, o: Omit<TestTokenOptions, 'scope'>): SoftwareCard {
  const key = JSON.stringify([o.telematikId, o.professionOid, o.commonName, o.organizationName, o.curve, ctx.config.dataDir]);
  let card = cards.get(key);
  if (!card) {
    const c = issueCard(devPkiFor(ctx).ca, {
      telematikId: o.telematikId,
      professionOid: o.professionOid,
      commonName: o.commonName ?? `Praxis ${o.telematikId}`,
      organizationName: o.organizationName ?? `Praxis ${o.telematikId}`,
      curve: o.curve,
    });
    card = new SoftwareCard(c.certPem, c.keyPem);
    cards.set(key, card);
  }
  return card;
}

export function transportFor(app: Express | string): HttpTransport {
  return typeof app === 'string' ? fetchTransport({ connectTo: app }) : supertestTransport(app);
}

export async function getTestToken(app: Express | string, ctx: AppContext, o: TestTokenOptions): Promise<TestToken> {
  const client = new GuardClient({
    server: ctx.config.publicUrl,
    transport: transportFor(app),
    retries: 0,
    now: () => Math.floor(ctx.now().getTime() / 1000),
  });
  const tokens = await client.login(testCard(ctx, o), { scope: o.scope });
  return {
    accessToken: tokens.accessToken,
    refreshToken: tokens.refreshToken,
    clientId: client.clientId!,
    dpopKey: client.dpopKey!,
    scope: tokens.scope,
    makeProof: (method, url, ath) => client.proof(method, url, ath),
    client,
  };
}
