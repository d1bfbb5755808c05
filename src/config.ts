import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { projectPath } from './server-lib/paths';

/**
 * The only place that reads process.env. Every knob has one default,
 * written here once. A bad value throws ConfigError naming the variable; main.ts prints that one
 * line and exits.
 */
export interface Config {
  port: number;
  host: string;
  /** Externally visible origin without trailing slash; issued URLs, htu and aud derive from it. */
  publicUrl: string;
  databaseUrl?: string;
  /** PostgreSQL connections per process (DB_POOL_SIZE, default 20). */
  dbPoolSize: number;
  /**
   * PostgreSQL streaming replicas for reads and searches outside a transaction (DATABASE_READ_URL,
   * comma-separated), with read-your-writes; a replica further behind the primary than
   * DATABASE_READ_MAX_LAG (default 2 s) serves nobody until it catches up.
   */
  databaseReadUrls: string[];
  databaseReadMaxLagMs: number;
  /** Seconds an idle PostgreSQL connection stays open (DB_IDLE_TIMEOUT_SECONDS, default 300; 0: until the process ends). */
  dbIdleTimeoutSec: number;
  dataDir: string;
  redisUrl?: string;
  /** PEM file of CAs issuing institution cards; unset (and no CARD_TSL): the generated dev PKI CA. */
  cardTrustAnchors?: string;
  /**
   * The gematik TSL (CARD_TSL, a file or URL; ETSI TS 119 612 XML), the CA its signer must chain to
   * (CARD_TSL_SIGNER_CA), how often it is read again (CARD_TSL_REFRESH, default 24 h, gematik
   * publishes daily at most) and how long past its NextUpdate it is still used (CARD_TSL_GRACE,
   * default 3 days: a missed publication is not an outage, a list weeks old is no trust).
   */
  cardTsl?: { source: string; signerCa: string; refreshSec: number; graceSec: number };
  /** PEM file of TPM manufacturer CAs; unset: no TPM client accepted. */
  tpmEkTrustAnchors?: string;
  /** Lifetime of a pending registration transaction (REGISTRATION_TTL_SECONDS, default 600). */
  registrationTtlSec: number;
  /** Calendar window search results kept per process (SEARCH_CACHE_ENTRIES, default 1000; 0: no cache). */
  searchCacheEntries: number;
  /**
   * Free slots that ended longer ago than this many days are retired (SLOT_RETENTION_DAYS, default
   * 30: a month of past calendar for questions about it; 0 keeps every slot).
   */
  slotRetentionDays: number;
  /**
   * When an access is answered relative to its AuditEvent (AUDIT_MODE): `sync` (default) after it
   * is stored, an audit failure refusing the access with 503; `buffered` at once, the events
   * following within the group commit (a crash loses the events of the last moment); `off` records
   * nothing and is refused with NODE_ENV=production (health data needs its access log).
   */
  auditMode: 'sync' | 'buffered' | 'off';
  /** AuditEvents older than this many days are purged, a month at a time (AUDIT_RETENTION_DAYS, default 1095: three years). */
  auditRetentionDays: number;
  /** Other guard instances whose `svc_att_token` this guard accepts at registration (TRUSTED_ATTESTATION_ISSUERS). */
  trustedAttestationIssuers: string[];
  /** Roots of Apple App Attest chains (PLATFORM_A_TRUST_ANCHORS; default Apple's root, shipped). */
  platformATrustAnchors: string;
  /** App IDs whose App Attest keys may register (PLATFORM_A_APP_IDS): empty, no platform_a client. */
  platformAAppIds: PlatformAAppId[];
  /** Roots of Android key attestation chains (PLATFORM_B_TRUST_ANCHORS; default Google's, shipped). */
  platformBTrustAnchors: string;
  /** Apps whose attested keys may register (PLATFORM_B_PACKAGES): empty, no platform_b client. */
  platformBPackages: PlatformBPackage[];
  /** The attestation status list (PLATFORM_B_REVOCATION_URL): a URL or a file. */
  platformBRevocationSource: string;
  /** SMTP server for e-mail one-time codes (SMTP_URL, nodemailer URL form); unset outside production: codes go to the log. */
  smtpUrl?: string;
  /** Sender of those mails (MAIL_FROM). */
  mailFrom: string;
  /** Issuers whose workload tokens the token endpoint exchanges (WORKLOAD_ISSUERS_FILE; docs/requirements.md#workload-token-exchange). */
  workloadIssuers: WorkloadIssuer[];
  /** Upstream identity providers of the authorization-code flow (OIDC_PROVIDERS_FILE; docs/requirements.md#patients-authorization-code-flow). */
  oidcProviders: OidcProvider[];
  /** The additional security layer (ASL_MODE): off, supported or required (plain /fhir then 403; docs/requirements.md#additional-security-layer-asl). */
  aslMode: 'off' | 'supported' | 'required';
  /** PEM files of the certificate (then its issuer) and key that sign the server's ASL keys; unset outside production: generated. */
  aslSignerCert?: string;
  aslSignerKey?: string;
  /** The environment byte of ASL data frames: 1 in production (PU), 0 otherwise. */
  aslEnvironment: 0 | 1;
  /** OCSP check of institution card certificates (CARD_OCSP, default if-present). */
  cardOcsp: 'required' | 'if-present' | 'off';
  /** Telematik-IDs of the practice running this repository (management scopes). */
  repositoryOwners: string[];
  policyFile: string;
  policyEngineUrl?: string;
  logLevel: string;
  /** LOG_FORMAT: `json` lines (default) or `pretty` for a terminal. */
  logFormat: 'json' | 'pretty';
  production: boolean;
  /**
   * TLS_CERT_FILE and TLS_KEY_FILE: PEM certificate (then its chain) and key; `serve` then speaks
   * TLS 1.3 only and follows the files as they are replaced. Unset: plain HTTP, for a TLS
   * terminator in front.
   */
  tls?: { certFile: string; keyFile: string; ocspStapling: boolean };
  /** Load demo calendars into an empty embedded store at start. */
  demoData: boolean;
  /** Separate upstream behind the enforcement proxy (proxy mode); unset: the embedded FHIR app. */
  upstreamUrl?: string;
  /**
   * Secret that encrypts the guard's signing keys at rest (GUARD_KEY_SECRET). Unset: a key file in
   * DATA_DIR when the embedded store is on disk, else a per-process key (each replica then signs
   * with a key of its own; all public keys are still published from the shared store).
   */
  guardKeySecret?: string;
  /** Guard requests per minute per client IP and endpoint (RATE_LIMIT_PER_IP, default 3000 = 50/s). */
  rateLimitPerIp: number;
  /** Guard token/revoke requests per minute per client_id (RATE_LIMIT_PER_CLIENT, default 600). */
  rateLimitPerClient: number;
  /**
   * The enforcement point in front of /fhir (GUARD_ENFORCEMENT, default on). `off` serves /fhir
   * without tokens, as the repository itself: for tests of the FHIR layer and the guard-off
   * benchmark only; refused with NODE_ENV=production.
   */
  guardEnforcement: boolean;
  /** FHIR requests per minute per client_id through the enforcement point (RATE_LIMIT_FHIR_PER_CLIENT, default 6000 = 100/s). */
  rateLimitFhirPerClient: number;
  /** JWKS of the PoPP issuer (POPP_JWKS_URL); required when POPP_REQUIRED_ROUTES names routes. */
  poppJwksUrl?: string;
  /**
   * FHIR routes that require a proof of patient presence (POPP_REQUIRED_ROUTES, comma-separated:
   * `Patient` = every interaction on a type, `Appointment/$book` = one operation, `*` = all).
   */
  poppRequiredRoutes: string[];
  /**
   * Hops whose X-Forwarded-For / Forwarded this server believes (TRUST_PROXY, default `loopback`):
   * passed to Express `trust proxy`. Behind a load balancer in another container or host name its
   * addresses (docker-compose: `uniquelocal`), or every client shares the balancer's IP bucket.
   */
  trustProxy: string[];
  /** CORS_ORIGINS: browser origins allowed to call (default none). */
  corsOrigins: string[];
  /** METRICS_PORT (0: off) and METRICS_HOST: the Prometheus `/metrics` listener. */
  metricsPort: number;
  metricsHost: string;
}

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
  }
}

type Env = Record<string, string | undefined>;

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function loadConfig(env: Env = process.env): Config {
  const port = parsePort(env, 'PORT', 8080);
  const host = nonEmpty(env, 'HOST') ?? '127.0.0.1';
  const publicUrl = parseOrigin(env, 'PUBLIC_URL') ?? `http://localhost:${port}`;
  const databaseUrl = nonEmpty(env, 'DATABASE_URL');
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// connection string');
  }
  const redisUrl = nonEmpty(env, 'REDIS_URL');
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) {
    throw new ConfigError('REDIS_URL', 'must be a redis:// or rediss:// URL');
  }
  const logLevel = nonEmpty(env, 'LOG_LEVEL') ?? 'info';
  const logFormat = nonEmpty(env, 'LOG_FORMAT') ?? 'json';
  if (logFormat !== 'json' && logFormat !== 'pretty') throw new ConfigError('LOG_FORMAT', 'must be json or pretty');
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const policyEngineUrl = parseUrl(env, 'POLICY_ENGINE_URL');
  const upstreamUrl = parseUrl(env, 'UPSTREAM_URL');
  const production = env.NODE_ENV === 'production';
  const guardEnforcement = parseBool(env, 'GUARD_ENFORCEMENT', true);
  if (!guardEnforcement && production) throw new ConfigError('GUARD_ENFORCEMENT', 'cannot be off with NODE_ENV=production');
  const poppJwksUrl = parseUrl(env, 'POPP_JWKS_URL');
  const poppRequiredRoutes = parsePoppRoutes(env);
  if (poppRequiredRoutes.length > 0 && !poppJwksUrl) throw new ConfigError('POPP_REQUIRED_ROUTES', 'needs POPP_JWKS_URL (the PoPP issuer JWKS)');
  const cardTrustAnchors = certificateFile(env, 'CARD_TRUST_ANCHORS');
  const cardTsl = parseCardTsl(env);
  // Production never trusts the generated development card CA.
  if (production && !cardTrustAnchors && !cardTsl) throw new ConfigError('CARD_TRUST_ANCHORS', 'must name a PEM file of card CA certificates (or CARD_TSL the gematik TSL) with NODE_ENV=production');
  const guardKeySecret = parseSecret(env, 'GUARD_KEY_SECRET');
  // Without it each process seals keys with a key of its own: restarts and replicas lose them.
  if (production && !guardKeySecret) throw new ConfigError('GUARD_KEY_SECRET', 'must be set with NODE_ENV=production (the same long random secret on every replica)');
  const smtpUrl = nonEmpty(env, 'SMTP_URL');
  if (smtpUrl !== undefined && !/^smtps?:\/\/[^/]/.test(smtpUrl)) throw new ConfigError('SMTP_URL', 'must be an smtp:// or smtps:// URL (nodemailer form, e.g. smtp://user:pass@mail.example.org:587)');
  // Production never writes one-time codes to the log.
  if (production && !smtpUrl) throw new ConfigError('SMTP_URL', 'must be set with NODE_ENV=production (e-mail one-time codes of mobile registrations)');
  const aslMode = nonEmpty(env, 'ASL_MODE') ?? 'off';
  if (aslMode !== 'off' && aslMode !== 'supported' && aslMode !== 'required') throw new ConfigError('ASL_MODE', 'must be off, supported or required');
  const aslSignerCert = certificateFile(env, 'ASL_SIGNER_CERT');
  const aslSignerKey = existingFile(env, 'ASL_SIGNER_KEY');
  if ((aslSignerCert === undefined) !== (aslSignerKey === undefined)) throw new ConfigError(aslSignerCert ? 'ASL_SIGNER_KEY' : 'ASL_SIGNER_CERT', 'ASL_SIGNER_CERT and ASL_SIGNER_KEY go together');
  if (aslSignerKey) {
    try {
      crypto.createPrivateKey(fs.readFileSync(aslSignerKey));
    } catch {
      throw new ConfigError('ASL_SIGNER_KEY', `${aslSignerKey} is not a PEM private key`);
    }
  }
  if (production && aslMode !== 'off' && !aslSignerCert) throw new ConfigError('ASL_SIGNER_CERT', 'must name the ASL signer certificate with NODE_ENV=production and ASL_MODE on');
  const tls = parseTls(env);
  // Health data never travels in clear: an https origin is served by this process's TLS or by a
  // terminator in front that TRUST_PROXY names (docs/requirements.md#configuration).
  if (production && publicUrl.startsWith('https:') && !tls && nonEmpty(env, 'TRUST_PROXY') === undefined) {
    throw new ConfigError('PUBLIC_URL', 'is https, but this server speaks plain HTTP with NODE_ENV=production: set TLS_CERT_FILE and TLS_KEY_FILE, or TRUST_PROXY to the TLS terminator in front');
  }
  return {
    port,
    host,
    publicUrl,
    databaseUrl,
    dbPoolSize: parsePositiveInt(env, 'DB_POOL_SIZE', 20),
    databaseReadUrls: readUrls(env, databaseUrl),
    databaseReadMaxLagMs: parseDuration(env, 'DATABASE_READ_MAX_LAG', 2) * 1000,
    dbIdleTimeoutSec: parseNonNegativeInt(env, 'DB_IDLE_TIMEOUT_SECONDS', 300),
    dataDir: path.resolve(nonEmpty(env, 'DATA_DIR') ?? './data'),
    redisUrl,
    cardTrustAnchors,
    cardTsl,
    tpmEkTrustAnchors: certificateSource(env, 'TPM_EK_TRUST_ANCHORS'),
    registrationTtlSec: parsePositiveInt(env, 'REGISTRATION_TTL_SECONDS', 600),
    searchCacheEntries: parseNonNegativeInt(env, 'SEARCH_CACHE_ENTRIES', 1000),
    slotRetentionDays: parseNonNegativeInt(env, 'SLOT_RETENTION_DAYS', 30),
    auditMode: parseAuditMode(env, production),
    auditRetentionDays: parsePositiveInt(env, 'AUDIT_RETENTION_DAYS', 1095),
    trustedAttestationIssuers: parseIssuers(env, 'TRUSTED_ATTESTATION_ISSUERS'),
    workloadIssuers: parseWorkloadIssuers(env),
    oidcProviders: parseOidcProviders(env),
    aslMode,
    aslSignerCert,
    aslSignerKey,
    aslEnvironment: production ? 1 : 0,
    platformATrustAnchors: certificateSource(env, 'PLATFORM_A_TRUST_ANCHORS') ?? projectPath('deploy', 'trust', 'apple-app-attestation-root-ca.pem'),
    platformAAppIds: parsePlatformAAppIds(env),
    platformBTrustAnchors: certificateSource(env, 'PLATFORM_B_TRUST_ANCHORS') ?? projectPath('deploy', 'trust', 'google-hardware-attestation-roots.pem'),
    platformBPackages: parsePlatformBPackages(env),
    platformBRevocationSource: parseRevocationSource(env),
    smtpUrl,
    mailFrom: nonEmpty(env, 'MAIL_FROM') ?? `Terminus <no-reply@${new URL(publicUrl).hostname.replace(/^\[|\]$/g, '')}>`,
    cardOcsp: parseChoice(env, 'CARD_OCSP', ['required', 'if-present', 'off'] as const, 'if-present'),
    repositoryOwners: (env.REPOSITORY_OWNERS ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
    policyFile: jsonFile(env, 'POLICY_FILE', projectPath('policies', 'default.json')),
    policyEngineUrl,
    logLevel,
    logFormat,
    production,
    tls,
    // Demo calendars are an embedded-mode convenience: on for `npm start` without DATABASE_URL,
    // off in production and against a real database unless asked for.
    demoData: parseBool(env, 'DEMO_DATA', env.NODE_ENV !== 'production' && !databaseUrl),
    upstreamUrl,
    guardKeySecret,
    // At least 20 requests/s per client IP on each guard endpoint.
    rateLimitPerIp: parsePositiveInt(env, 'RATE_LIMIT_PER_IP', 3000),
    rateLimitPerClient: parsePositiveInt(env, 'RATE_LIMIT_PER_CLIENT', 600),
    guardEnforcement,
    // A practice system rarely needs more than a few requests per second; 100/s leaves room for
    // bulk reads while one stolen or looping client cannot starve the others.
    rateLimitFhirPerClient: parsePositiveInt(env, 'RATE_LIMIT_FHIR_PER_CLIENT', 6000),
    poppJwksUrl,
    poppRequiredRoutes,
    trustProxy: parseTrustProxy(env),
    // No browser origin may call by default: a browser app's origin is named on purpose.
    corsOrigins: parseCorsOrigins(env),
    // Prometheus scrapes on loopback by default; 0 switches the listener off.
    metricsPort: parsePort(env, 'METRICS_PORT', 9464),
    metricsHost: nonEmpty(env, 'METRICS_HOST') ?? '127.0.0.1',
  };
}

/** CORS_ORIGINS: comma-separated origins (scheme://host[:port]) whose browser apps may call. */
function parseCorsOrigins(env: Env): string[] {
  const values = (nonEmpty(env, 'CORS_ORIGINS') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const v of values) {
    let origin: string | undefined;
    try {
      origin = new URL(v).origin;
    } catch {
      origin = undefined;
    }
    if (origin !== v) throw new ConfigError('CORS_ORIGINS', `"${v}" is not an origin like https://app.example.org (no path, no trailing slash)`);
  }
  return values;
}

/** The names Express (proxy-addr) knows; anything else must be an address or a CIDR / netmask. */
const TRUST_PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'];

function parseTrustProxy(env: Env): string[] {
  const values = (nonEmpty(env, 'TRUST_PROXY') ?? 'loopback')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = values.find((v) => !TRUST_PROXY_NAMES.includes(v) && !isAddressOrRange(v));
  if (bad) throw new ConfigError('TRUST_PROXY', `"${bad}" is not an address, a CIDR range or one of ${TRUST_PROXY_NAMES.join(', ')}`);
  return values;
}

function isAddressOrRange(v: string): boolean {
  const [addr, range, ...rest] = v.split('/');
  const family = net.isIP(addr);
  if (family === 0 || rest.length > 0) return false;
  if (range === undefined) return true;
  if (/^\d{1,3}$/.test(range)) return Number(range) <= (family === 4 ? 32 : 128);
  return family === 4 && net.isIPv4(range); // proxy-addr also takes an IPv4 netmask
}

const POPP_ROUTE = /^(\*|\$[a-z][\w-]*|[A-Z][A-Za-z]+(\/\$[a-z][\w-]*)?)$/;

function parsePoppRoutes(env: Env): string[] {
  const routes = (nonEmpty(env, 'POPP_REQUIRED_ROUTES') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const bad = routes.find((r) => !POPP_ROUTE.test(r));
  if (bad) throw new ConfigError('POPP_REQUIRED_ROUTES', `"${bad}" is not a route (Type, Type/$operation, $operation or *)`);
  return routes;
}

function parseAuditMode(env: Env, production: boolean): Config['auditMode'] {
  const mode = parseChoice(env, 'AUDIT_MODE', ['sync', 'buffered', 'off'] as const, 'sync');
  if (mode === 'off' && production) throw new ConfigError('AUDIT_MODE', 'off is refused with NODE_ENV=production: every access to health data is recorded (sync or buffered)');
  return mode;
}

function parseChoice<T extends string>(env: Env, name: string, choices: readonly T[], dflt: T): T {
  const v = nonEmpty(env, name);
  if (v === undefined) return dflt;
  if (!(choices as readonly string[]).includes(v)) throw new ConfigError(name, `must be one of ${choices.join(', ')}, got "${v}"`);
  return v as T;
}

/** One App ID of PLATFORM_A_APP_IDS: `TEAMID.bundle.id:desktop` or `:phone`, `:development` admitting development keys. */
export interface PlatformAAppId {
  appId: string;
  kind: 'desktop' | 'phone';
  development: boolean;
}

function parsePlatformAAppIds(env: Env): PlatformAAppId[] {
  return (nonEmpty(env, 'PLATFORM_A_APP_IDS') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^([A-Z0-9]{10}\.[A-Za-z0-9.-]+):(desktop|phone)(:development)?$/.exec(entry);
      if (!m) throw new ConfigError('PLATFORM_A_APP_IDS', `"${entry}" must read TEAMID.bundle.id:desktop or TEAMID.bundle.id:phone (optionally :development)`);
      return { appId: m[1], kind: m[2] as 'desktop' | 'phone', development: Boolean(m[3]) };
    });
}

/** One app of PLATFORM_B_PACKAGES: `package.name:SHA256HEX` (the signing certificate's digest). */
export interface PlatformBPackage {
  packageName: string;
  signerDigest: string;
}

function parsePlatformBPackages(env: Env): PlatformBPackage[] {
  return (nonEmpty(env, 'PLATFORM_B_PACKAGES') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((entry) => {
      const m = /^([A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z][A-Za-z0-9_]*)+):([0-9A-Fa-f]{64})$/.exec(entry.replace(/(?<=:.*):/g, ''));
      if (!m) throw new ConfigError('PLATFORM_B_PACKAGES', `"${entry}" must read package.name:SHA256HEX (64 hex digits of the signing certificate's SHA-256)`);
      return { packageName: m[1], signerDigest: m[2].toLowerCase() };
    });
}

/** PLATFORM_B_REVOCATION_URL: Google's attestation status list by default; an http(s) URL or a file. */
function parseRevocationSource(env: Env): string {
  const v = nonEmpty(env, 'PLATFORM_B_REVOCATION_URL');
  if (v === undefined) return 'https://android.googleapis.com/attestation/status';
  if (/^https?:\/\//.test(v)) return v;
  const p = existingFile(env, 'PLATFORM_B_REVOCATION_URL');
  return p as string;
}

/** One entry of WORKLOAD_ISSUERS_FILE. */
export interface WorkloadIssuer {
  issuer: string;
  /** Unset: from the issuer's `/.well-known/openid-configuration`. */
  jwksUri?: string;
  /** The token's `aud` must name one of them; empty: this guard's issuer or token endpoint. */
  audiences: string[];
  /** Allowed `sub` values; one ending in `*` is a prefix. */
  subjects: string[];
  /** The most a workload of this issuer may get (and what it gets when it asks for none). */
  scopes: string[];
  /** Oldest `iat` accepted, seconds. */
  maxTokenAgeSec: number;
}

/** WORKLOAD_ISSUERS_FILE: `[{issuer, jwks_uri?, audiences, subjects, scopes, max_token_age}]`. */
function parseWorkloadIssuers(env: Env): WorkloadIssuer[] {
  const file = existingFile(env, 'WORKLOAD_ISSUERS_FILE');
  if (!file) return [];
  let data: unknown;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new ConfigError('WORKLOAD_ISSUERS_FILE', `${file} is not readable JSON: ${(err as Error).message}`);
  }
  const fail = (what: string): never => {
    throw new ConfigError('WORKLOAD_ISSUERS_FILE', `${file}: ${what}`);
  };
  if (!Array.isArray(data)) fail('must hold a JSON array of issuers');
  const strings = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === 'string' && x.length > 0);
  return (data as unknown[]).map((entry, i) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return fail(`entry ${i} must be an object`);
    const e = entry as Record<string, unknown>;
    if (typeof e.issuer !== 'string') return fail(`entry ${i} needs an issuer`);
    let issuer: string | undefined;
    try {
      [issuer] = parseIssuers({ issuer: e.issuer }, 'issuer');
    } catch (err) {
      return fail(`entry ${i}: ${(err as Error).message}`);
    }
    if (!issuer) return fail(`entry ${i} needs an issuer`);
    if (e.jwks_uri !== undefined && (typeof e.jwks_uri !== 'string' || !/^https?:\/\//.test(e.jwks_uri))) fail(`entry ${i}: jwks_uri must be an http(s) URL`);
    for (const k of ['audiences', 'subjects', 'scopes']) if (e[k] !== undefined && !strings(e[k])) fail(`entry ${i}: ${k} must be a list of strings`);
    if (!strings(e.subjects) || (e.subjects as string[]).length === 0) fail(`entry ${i}: subjects must name at least one subject`);
    if (!strings(e.scopes) || (e.scopes as string[]).length === 0) fail(`entry ${i}: scopes must name at least one scope`);
    if (e.max_token_age !== undefined && !(Number.isInteger(e.max_token_age) && (e.max_token_age as number) > 0)) fail(`entry ${i}: max_token_age must be a positive number of seconds`);
    return {
      issuer,
      jwksUri: e.jwks_uri as string | undefined,
      audiences: (e.audiences as string[] | undefined) ?? [],
      subjects: e.subjects as string[],
      scopes: e.scopes as string[],
      maxTokenAgeSec: (e.max_token_age as number | undefined) ?? 3600,
    };
  });
}

/** One entry of OIDC_PROVIDERS_FILE: an upstream OpenID provider patients log in with. */
export interface OidcProvider {
  iss: string;
  name: string;
  logoUri?: string;
  /** This guard's client at the provider. */
  clientId: string;
  clientAuth: 'private_key_jwt' | 'client_secret_post' | 'client_secret_basic';
  /** private_key_jwt: the PEM (PKCS#8) private key file, EC P-256 (ES256) or RSA (RS256). */
  keyFile?: string;
  /** client_secret_*: the secret. */
  secret?: string;
  /** A PEM private key (EC P-256: ECDH-ES; RSA: RSA-OAEP-256) when the provider encrypts id_tokens. */
  idTokenDecryptionKeyFile?: string;
  /** Scopes asked of the provider; always with `openid`. */
  scopes: string[];
  /** The id_token claim holding the insurance number (KVNR); default `sub`. */
  userIdClaim: string;
}

/**
 * OIDC_PROVIDERS_FILE: `[{iss, name?, logo_uri?, client_id, client_auth, key | secret,
 * id_token_decryption_key?, scopes?, user_id_claim?}]`; key files relative to the file's folder.
 */
function parseOidcProviders(env: Env): OidcProvider[] {
  const file = existingFile(env, 'OIDC_PROVIDERS_FILE');
  if (!file) return [];
  const fail = (what: string): never => {
    throw new ConfigError('OIDC_PROVIDERS_FILE', `${file}: ${what}`);
  };
  let data: unknown;
  try {
    data = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    return fail(`not readable JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(data)) fail('must hold a JSON array of providers');
  const keyFile = (i: number, v: unknown, what: string): string | undefined => {
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length === 0) return fail(`entry ${i}: ${what} must name a PEM file`);
    const p = path.resolve(path.dirname(file), v);
    if (!fs.existsSync(p) || !fs.statSync(p).isFile()) return fail(`entry ${i}: ${what} file not found: ${p}`);
    try {
      crypto.createPrivateKey(fs.readFileSync(p));
    } catch {
      return fail(`entry ${i}: ${what} is not a PEM private key`);
    }
    return p;
  };
  const seen = new Set<string>();
  return (data as unknown[]).map((entry, i) => {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) return fail(`entry ${i} must be an object`);
    const e = entry as Record<string, unknown>;
    let iss: string | undefined;
    try {
      [iss] = parseIssuers({ iss: typeof e.iss === 'string' ? e.iss : '' }, 'iss');
    } catch (err) {
      return fail(`entry ${i}: ${(err as Error).message}`);
    }
    if (!iss) return fail(`entry ${i} needs an iss`);
    if (seen.has(iss)) fail(`entry ${i}: ${iss} is listed twice`);
    seen.add(iss);
    if (typeof e.client_id !== 'string' || e.client_id.length === 0) fail(`entry ${i} needs a client_id`);
    const clientAuth = e.client_auth ?? 'private_key_jwt';
    if (clientAuth !== 'private_key_jwt' && clientAuth !== 'client_secret_post' && clientAuth !== 'client_secret_basic') {
      fail(`entry ${i}: client_auth must be private_key_jwt, client_secret_post or client_secret_basic`);
    }
    const key = keyFile(i, e.key, 'key');
    if (clientAuth === 'private_key_jwt' && !key) fail(`entry ${i}: private_key_jwt needs key (a PEM private key file)`);
    if (clientAuth !== 'private_key_jwt' && (typeof e.secret !== 'string' || e.secret.length === 0)) fail(`entry ${i}: ${String(clientAuth)} needs a secret`);
    const scopes = e.scopes ?? ['openid'];
    if (!Array.isArray(scopes) || !scopes.every((s) => typeof s === 'string' && /^[\x21\x23-\x5b\x5d-\x7e]+$/.test(s))) fail(`entry ${i}: scopes must be a list of scope tokens`);
    for (const k of ['name', 'logo_uri', 'user_id_claim']) if (e[k] !== undefined && (typeof e[k] !== 'string' || (e[k] as string).length === 0)) fail(`entry ${i}: ${k} must be a string`);
    return {
      iss,
      name: (e.name as string | undefined) ?? iss,
      logoUri: e.logo_uri as string | undefined,
      clientId: e.client_id as string,
      clientAuth: clientAuth as OidcProvider['clientAuth'],
      keyFile: key,
      secret: e.secret as string | undefined,
      idTokenDecryptionKeyFile: keyFile(i, e.id_token_decryption_key, 'id_token_decryption_key'),
      scopes: [...new Set(['openid', ...(scopes as string[])])],
      userIdClaim: (e.user_id_claim as string | undefined) ?? 'sub',
    };
  });
}

/** Comma-separated issuer identifiers (RFC 8414 `issuer`: https, or http on loopback). */
function parseIssuers(env: Env, name: string): string[] {
  const values = (nonEmpty(env, name) ?? '')
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  for (const v of values) {
    let u: URL;
    try {
      u = new URL(v);
    } catch {
      throw new ConfigError(name, `"${v}" is not an absolute URL`);
    }
    const loopback = ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
    if (u.protocol !== 'https:' && !(u.protocol === 'http:' && loopback)) throw new ConfigError(name, `"${v}" must be an https issuer (http only on loopback)`);
    if (u.search || u.hash) throw new ConfigError(name, `"${v}" must not carry a query or fragment`);
  }
  return values;
}

function parsePositiveInt(env: Env, name: string, dflt: number): number {
  const v = nonEmpty(env, name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new ConfigError(name, `must be a positive integer, got "${v}"`);
  return n;
}

function parseNonNegativeInt(env: Env, name: string, dflt: number): number {
  const v = nonEmpty(env, name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new ConfigError(name, `must be a non-negative integer, got "${v}"`);
  return n;
}

function nonEmpty(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function parsePort(env: Env, name: string, dflt: number): number {
  const v = nonEmpty(env, name);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError(name, `must be a port number 0-65535, got "${v}"`);
  return n;
}

function parseUrl(env: Env, name: string): string | undefined {
  const v = nonEmpty(env, name);
  if (v === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, `must be an absolute http(s) URL, got "${v}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(name, 'must use http or https');
  return v.replace(/\/+$/, '');
}

/**
 * An origin (scheme, host, port) and nothing else: every issued URL, `htu` and `aud` is built by
 * appending to it, so a path, query, fragment or user info would end up inside them.
 */
function parseOrigin(env: Env, name: string): string | undefined {
  const v = parseUrl(env, name);
  if (v === undefined) return undefined;
  const u = new URL(v);
  if (u.username || u.password) throw new ConfigError(name, `must not carry user info, got "${v}"`);
  if (u.pathname !== '/' || u.search || u.hash || /[?#]/.test(v)) throw new ConfigError(name, `must be an origin (scheme://host[:port]) without path, query or fragment, got "${v}"`);
  return u.origin;
}

/** HMAC/KEK input: short secrets are guessable offline from one sealed key. */
const MIN_SECRET_LENGTH = 32;

function parseSecret(env: Env, name: string): string | undefined {
  const v = nonEmpty(env, name);
  if (v !== undefined && v.length < MIN_SECRET_LENGTH) throw new ConfigError(name, `must have at least ${MIN_SECRET_LENGTH} characters (e.g. openssl rand -base64 32), got ${v.length}`);
  return v;
}

/**
 * A PEM file of certificates, or an https URL of one (a published root list, read and refreshed
 * by guard/pki/anchor-source.ts; https, for nothing else vouches for the bundle).
 */
function certificateSource(env: Env, name: string): string | undefined {
  const v = nonEmpty(env, name);
  if (v === undefined || !/^[a-z][a-z0-9+.-]*:\/\//i.test(v)) return certificateFile(env, name);
  if (!/^https:\/\/[^/]/i.test(v)) throw new ConfigError(name, `must be a PEM file or an https URL of one, got "${v}"`);
  return v;
}

/** A PEM file with at least one certificate, every one of them parseable. */
function certificateFile(env: Env, name: string): string | undefined {
  const p = existingFile(env, name);
  if (p === undefined) return undefined;
  const pems = fs.readFileSync(p, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (pems.length === 0) throw new ConfigError(name, `no PEM certificate (-----BEGIN CERTIFICATE-----) in ${p}`);
  pems.forEach((pem, i) => {
    try {
      new crypto.X509Certificate(pem);
    } catch (err) {
      throw new ConfigError(name, `certificate ${i + 1} in ${p} does not parse: ${(err as Error).message}`);
    }
  });
  return p;
}

/** A JSON file that exists and parses (the embedded policy engine's data). */
function jsonFile(env: Env, name: string, dflt: string): string {
  const p = existingFile(env, name) ?? dflt;
  let data: unknown;
  try {
    data = JSON.parse(fs.readFileSync(p, 'utf8'));
  } catch (err) {
    throw new ConfigError(name, `${p} is not readable JSON: ${(err as Error).message}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw new ConfigError(name, `${p} must hold a JSON object`);
  return p;
}

function parseBool(env: Env, name: string, dflt: boolean): boolean {
  const v = nonEmpty(env, name);
  if (v === undefined) return dflt;
  if (/^(1|true|yes|on)$/i.test(v)) return true;
  if (/^(0|false|no|off)$/i.test(v)) return false;
  throw new ConfigError(name, `must be true or false, got "${v}"`);
}

/** TLS_CERT_FILE and TLS_KEY_FILE go together; TLS_OCSP_STAPLING needs them. The files are read when the server starts. */
function parseTls(env: Env): Config['tls'] {
  const certFile = existingFile(env, 'TLS_CERT_FILE');
  const keyFile = existingFile(env, 'TLS_KEY_FILE');
  const ocspStapling = parseBool(env, 'TLS_OCSP_STAPLING', false);
  if ((certFile === undefined) !== (keyFile === undefined)) throw new ConfigError(certFile ? 'TLS_KEY_FILE' : 'TLS_CERT_FILE', 'TLS_CERT_FILE and TLS_KEY_FILE go together');
  if (!certFile || !keyFile) {
    if (ocspStapling) throw new ConfigError('TLS_OCSP_STAPLING', 'needs TLS_CERT_FILE and TLS_KEY_FILE (the certificate whose OCSP answer is stapled)');
    return undefined;
  }
  return { certFile, keyFile, ocspStapling };
}

/**
 * CARD_TSL with its signer CA. A URL may be http: the list carries its own signature, and
 * gematik's locations inside the TI (download.tsl.telematik) are http.
 */
function parseCardTsl(env: Env): Config['cardTsl'] {
  const source = nonEmpty(env, 'CARD_TSL');
  const signerCa = certificateFile(env, 'CARD_TSL_SIGNER_CA');
  const refreshSec = parseDuration(env, 'CARD_TSL_REFRESH', 24 * 3600);
  const graceSec = parseDuration(env, 'CARD_TSL_GRACE', 3 * 24 * 3600);
  if (source === undefined) {
    if (signerCa) throw new ConfigError('CARD_TSL_SIGNER_CA', 'needs CARD_TSL (the list whose signature it checks)');
    return undefined;
  }
  if (!signerCa) throw new ConfigError('CARD_TSL_SIGNER_CA', 'must name the PEM CA certificate the TSL signer chains to when CARD_TSL is set');
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) {
    if (!/^https?:\/\/[^/]/i.test(source)) throw new ConfigError('CARD_TSL', `must be a file or an http(s) URL, got "${source}"`);
    return { source, signerCa, refreshSec, graceSec };
  }
  return { source: existingFile(env, 'CARD_TSL')!, signerCa, refreshSec, graceSec };
}

/** A duration: a number with s, m, h or d (plain seconds without a unit). */
/** DATABASE_READ_URL: PostgreSQL URLs of streaming replicas of DATABASE_URL. */
function readUrls(env: Env, databaseUrl: string | undefined): string[] {
  const v = nonEmpty(env, 'DATABASE_READ_URL');
  if (v === undefined) return [];
  if (!databaseUrl) throw new ConfigError('DATABASE_READ_URL', 'needs DATABASE_URL (the primary the replicas stream from); the embedded store has no replicas');
  const urls = v.split(',').map((u) => u.trim()).filter(Boolean);
  for (const u of urls) if (!/^postgres(ql)?:\/\//.test(u)) throw new ConfigError('DATABASE_READ_URL', `each entry must be a postgres:// or postgresql:// connection string, got "${u.replace(/\/\/[^@/]*@/, '//…@')}"`);
  return urls;
}

function parseDuration(env: Env, name: string, dfltSec: number): number {
  const v = nonEmpty(env, name);
  if (v === undefined) return dfltSec;
  const m = /^(\d{1,9})\s*(s|m|h|d)?$/.exec(v);
  if (!m || Number(m[1]) === 0) throw new ConfigError(name, `must be a positive duration such as 30m, 24h or 3d, got "${v}"`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
}

function existingFile(env: Env, name: string): string | undefined {
  const v = nonEmpty(env, name);
  if (v === undefined) return undefined;
  const p = path.resolve(v);
  if (!fs.existsSync(p)) throw new ConfigError(name, `file not found: ${p}`);
  if (!fs.statSync(p).isFile()) throw new ConfigError(name, `not a file: ${p}`);
  return p;
}

/** The FHIR base URL, `$PUBLIC_URL/fhir`: the access token's `aud`, the base of every absolute reference and link. */
export function fhirBaseUrl(config: Pick<Config, 'publicUrl'>): string {
  return `${config.publicUrl}/fhir`;
}
