import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ClientInputError } from '../../input-error';

/**
 * A Konnektor configuration in gematik's `.kon` format 1.0.0 (zeta-cli `docs/kon-format.md`): one
 * JSON object naming the Konnektor, the call context and how the client authenticates, with
 * `${VAR}` placeholders filled from the environment before parsing.
 */
export interface KonConfig {
  version?: string;
  url: string;
  rewriteServiceEndpoints: boolean;
  mandantId: string;
  workplaceId: string;
  clientSystemId: string;
  userId?: string;
  /** Which SMC-B to use when the Konnektor holds several. */
  telematikId?: string;
  credentials: KonCredentials;
  env?: 'ru' | 'tu' | 'pu';
  insecureSkipVerify: boolean;
  expectedHost?: string;
  /** DER certificates the Konnektor's TLS certificate must be or chain to. */
  trustStore: Buffer[];
}

export type KonCredentials =
  | { type: 'basic'; username: string; password: string }
  | { type: 'pkcs12'; data: Buffer; password: string }
  | { type: 'system'; name: string };

/**
 * `${NAME}` placeholders (NAME: one or more characters other than `}`) replaced by the variable,
 * an unset one by the empty string; no defaults, no escapes, values inserted verbatim and not
 * scanned again (kon-format §4).
 */
export function substituteVariables(text: string, env: NodeJS.ProcessEnv): string {
  return text.replace(/\$\{([^}]+)\}/g, (_m, name: string) => env[name] ?? '');
}

/** Reads and validates a `.kon` file; every field error at once (kon-format §7), naming the file. */
export function readKonFile(file: string, env: NodeJS.ProcessEnv = process.env): KonConfig {
  const abs = path.resolve(process.cwd(), file);
  const source = `the .kon file ${file}${abs === file ? '' : ` (${abs})`}`;
  if (/\.kony$/i.test(file)) throw new ClientInputError('konnektor', `${source}: YAML (.kony) is not supported here; write the same fields as JSON in a .kon file`);
  let raw: string;
  try {
    raw = fs.readFileSync(abs, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ClientInputError('konnektor', `${source} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? (err as Error).message})`}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(substituteVariables(raw, env));
  } catch (err) {
    throw new ClientInputError('konnektor', `${source} is not JSON after \${VAR} substitution: ${(err as Error).message}`);
  }
  const errors: string[] = [];
  const config = validate(doc, errors);
  if (errors.length > 0 || !config) throw new ClientInputError('konnektor', `invalid .kon configuration ${file}:\n  - ${errors.join('\n  - ')}`);
  return config;
}

function validate(doc: unknown, errors: string[]): KonConfig | undefined {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) {
    errors.push('the document must be a JSON object');
    return undefined;
  }
  const o = doc as Record<string, unknown>;
  const required = (name: string) => {
    const v = o[name];
    if (v === undefined || v === null || (typeof v === 'string' && v.trim() === '')) errors.push(`"${name}" is required`);
    else if (typeof v !== 'string') errors.push(`"${name}" must be a string`);
    return typeof v === 'string' ? v : '';
  };
  const optional = (name: string) => {
    const v = o[name];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') {
      errors.push(`"${name}" must be a string`);
      return undefined;
    }
    return v;
  };
  const flag = (name: string) => {
    const v = o[name];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') errors.push(`"${name}" must be true or false`);
    return v === true;
  };
  const url = required('url');
  if (url && !/^https?:\/\/[^/]/i.test(url)) errors.push(`"url" must be an http(s) URL with the Konnektor's host, got "${url}"`);
  const env = optional('env');
  if (env !== undefined && env !== 'ru' && env !== 'tu' && env !== 'pu') errors.push(`"env" must be one of ru, tu, pu (got "${env}")`);
  const config: KonConfig = {
    version: optional('version'),
    url: url.replace(/\/+$/, ''),
    rewriteServiceEndpoints: flag('rewriteServiceEndpoints'),
    mandantId: required('mandantId'),
    workplaceId: required('workplaceId'),
    clientSystemId: required('clientSystemId'),
    userId: optional('userId'),
    telematikId: optional('telematikId'),
    credentials: credentials(o.credentials, errors),
    env: env as KonConfig['env'],
    insecureSkipVerify: flag('insecureSkipVerify'),
    expectedHost: optional('expectedHost'),
    trustStore: trustStore(o.trustStore, errors),
  };
  return config;
}

function credentials(v: unknown, errors: string[]): KonCredentials {
  const none = { type: 'basic', username: '', password: '' } as const;
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    errors.push('credentials is required (an object with type basic, pkcs12 or system)');
    return none;
  }
  const c = v as Record<string, unknown>;
  const text = (name: string, type: string, required = true) => {
    const s = c[name];
    if (s !== undefined && s !== null && typeof s !== 'string') errors.push(`credentials.${name} must be a string`);
    else if (required && (typeof s !== 'string' || s.trim() === '')) errors.push(`credentials.${name} is required for ${type} credentials`);
    return typeof s === 'string' ? s : '';
  };
  switch (c.type) {
    case 'basic':
      return { type: 'basic', username: text('username', 'basic'), password: text('password', 'basic') };
    case 'pkcs12': {
      const data = text('data', 'pkcs12');
      const der = data ? base64(data) : undefined;
      if (data && !der) errors.push('credentials.data is not valid base64');
      return { type: 'pkcs12', data: der ?? Buffer.alloc(0), password: text('password', 'pkcs12', false) };
    }
    case 'system':
      return { type: 'system', name: text('name', 'system') };
    case undefined:
    case null:
    case '':
      errors.push('credentials.type is required (must be basic, pkcs12 or system)');
      return none;
    default:
      // kon-format §6: an unknown type is refused, never ignored (a later version may add types).
      errors.push(`credentials.type ${JSON.stringify(c.type)} is not supported (must be basic, pkcs12 or system)`);
      return none;
  }
}

function trustStore(v: unknown, errors: string[]): Buffer[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) {
    errors.push('"trustStore" must be an array of base64 DER certificates');
    return [];
  }
  return v.flatMap((entry, i) => {
    const der = typeof entry === 'string' ? base64(entry) : undefined;
    if (!der) {
      errors.push(`trustStore[${i}] is not valid base64`);
      return [];
    }
    try {
      new crypto.X509Certificate(der);
    } catch {
      errors.push(`trustStore[${i}] is not a DER X.509 certificate`);
      return [];
    }
    return [der];
  });
}

/** Base64, line-wrapped (MIME) or not, padded or not; undefined when it is not base64. */
function base64(s: string): Buffer | undefined {
  const compact = s.replace(/[\r\n\t ]+/g, '');
  if (compact === '' || !/^[A-Za-z0-9+/]+={0,2}$/.test(compact) || compact.length % 4 === 1) return undefined;
  return Buffer.from(compact, 'base64');
}
