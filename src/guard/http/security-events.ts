import type { Request, Response } from 'express';
import { decodeJwt } from 'jose';
import type { AuditParties, SecurityAudit, SecurityEventCode } from '../../server-lib/audit-port';
import type { AccessTokenPayload } from '../authserver/tokens/access-token';
import { isGuardError, type GuardError } from '../errors';
import { auditPartiesOf } from '../pep/caller';
import { clientIp, handleAsync } from './respond';

/**
 * The authorization server's security events for the audit trail: each endpoint says which event
 * its success is and how its refusals are named; the event is stored before the answer goes out
 * (AUDIT_MODE=sync). A refusal names only the address: nothing in a refused request is trusted.
 */
export class SecurityEvents {
  constructor(private readonly audit: SecurityAudit | undefined) {}

  /** Records `code` for this request. */
  record(req: Request, res: Response, code: SecurityEventCode, parties: AuditParties = {}, failure?: string): Promise<void> {
    if (!this.audit) return Promise.resolve();
    return this.audit.security({ code, parties: { ...parties, address: clientIp(req) }, failure, requestId: res.locals.requestId as string | undefined });
  }

  /** An async handler whose guard errors are recorded as `refusal(err)` says (none: not a security event) before they are answered. */
  handler(refusal: (err: GuardError) => SecurityEventCode | undefined, fn: (req: Request, res: Response) => Promise<void>) {
    return handleAsync(async (req, res) => {
      try {
        await fn(req, res);
      } catch (err) {
        const code = isGuardError(err) ? refusal(err) : undefined;
        if (code) await this.record(req, res, code, {}, `${(err as GuardError).code}: ${(err as GuardError).description}`);
        throw err;
      }
    });
  }
}

/**
 * Who an access token this server just issued speaks for (its claims, read without a check: it is
 * our own). A grant that issues something else than a JWT (a deployment's own) names nobody.
 */
export function partiesOfIssued(accessToken: string | undefined): AuditParties {
  try {
    const claims = decodeJwt(accessToken ?? '') as unknown as Partial<AccessTokenPayload>;
    return typeof claims.sub === 'string' && typeof claims.client_id === 'string' ? auditPartiesOf(claims as AccessTokenPayload) : {};
  } catch {
    return {};
  }
}
