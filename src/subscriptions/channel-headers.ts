import type { KeyEncryption } from '../server-lib/key-encryption';

/**
 * `Subscription.channel.header` is write-only (ISiK "Funktionen und Interaktionen" point 9): the
 * real values are sealed at rest with the guard's key-encryption key, the resource keeps the
 * masked form (`Authorization: Basic ****last5`).
 */
export interface ChannelHeader {
  name: string;
  value: string;
}

export class ChannelHeaderError extends Error {}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Headers the rest-hook sets itself; a Subscription may not override them. */
const RESERVED = new Set(['content-type', 'content-length', 'host', 'connection', 'transfer-encoding', 'expect', 'upgrade', 'te', 'trailer', 'keep-alive']);
/** Shorter secrets show no characters at all. */
const MIN_REVEAL_LENGTH = 12;
const MASK = '****';

export function parseChannelHeader(line: string): ChannelHeader {
  const i = line.indexOf(':');
  if (i <= 0) throw new ChannelHeaderError(`"${line.slice(0, 40)}" is not of the form "Name: value"`);
  const name = line.slice(0, i).trim();
  const value = line.slice(i + 1).trim();
  if (!TOKEN.test(name)) throw new ChannelHeaderError(`"${name.slice(0, 40)}" is not a valid HTTP header name`);
  if (RESERVED.has(name.toLowerCase())) throw new ChannelHeaderError(`header ${name} is set by the server and cannot be configured`);
  // CR, LF and other controls would let a value inject further headers.
  if (/[\u0000-\u0008\u000a-\u001f\u007f]/.test(value)) throw new ChannelHeaderError(`header ${name} contains control characters`);
  if (value === '') throw new ChannelHeaderError(`header ${name} has no value`);
  return { name, value };
}

/** `Authorization: Basic dXNlcjpzZWNyZXQ=` → `Authorization: Basic ****ZXQ=` style, last five kept. */
export function maskChannelHeader(h: ChannelHeader): string {
  const m = /^([A-Za-z][\w-]*) +(\S.*)$/.exec(h.value);
  const [scheme, secret] = m ? [`${m[1]} `, m[2]] : ['', h.value];
  const tail = secret.length >= MIN_REVEAL_LENGTH ? secret.slice(-5) : '';
  return `${h.name}: ${scheme}${MASK}${tail}`;
}

function isMasked(line: string): boolean {
  return line.includes(MASK);
}

export function sealHeaders(kek: KeyEncryption, headers: ChannelHeader[]): string {
  return kek.seal(Buffer.from(JSON.stringify(headers), 'utf8'));
}

/** The sealed headers in clear; throws when the key that sealed them is gone. */
export function openHeaders(kek: KeyEncryption, sealed: string | null): ChannelHeader[] {
  if (!sealed) return [];
  return JSON.parse(kek.open(sealed).toString('utf8')) as ChannelHeader[];
}

/**
 * The headers a client write asks for: a masked value sent back unchanged (read-modify-write)
 * keeps the stored secret it stands for; anything else is a new value.
 */
export function resolveHeaders(lines: string[], previous: ChannelHeader[]): ChannelHeader[] {
  return lines.map((line) => {
    if (!isMasked(line)) return parseChannelHeader(line);
    const kept = previous.find((p) => maskChannelHeader(p) === line.trim());
    if (!kept) throw new ChannelHeaderError(`"${line.slice(0, 40)}" is a masked value that matches no stored header; send the header in clear`);
    return kept;
  });
}
