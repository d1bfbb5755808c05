import express, { type Request, type RequestHandler } from 'express';
import { FhirJsonError, MalformedBody, parametersShapeError, parseBody, UnsupportedMediaType } from '../model';

/** Largest request body accepted (a transaction Bundle of a few thousand slots fits). */
export const BODY_LIMIT = '5mb';

/** `fatal`: a byte sequence that is not UTF-8 is an error, never a silent U+FFFD in the store. */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** A body that could not be decoded, kept so that the second reader answers the same error. */
const undecodable = new WeakMap<Request, Error>();

/**
 * Reads any request body as UTF-8 text, once: the FHIR adapter parses it by Content-Type, and the
 * enforcement point reads a transaction Bundle through the same parser first (the second call
 * then finds the body read and skips). FHIR bodies are UTF-8; a FHIR body labelled
 * with another charset is 415, bytes that are not UTF-8 are 400.
 */
export function fhirBodyText(): RequestHandler {
  const raw = express.raw({ type: () => true, limit: BODY_LIMIT });
  return (req, res, next) => {
    const earlier = undecodable.get(req);
    if (earlier) return next(earlier);
    raw(req, res, (err?: unknown) => {
      if (err || !Buffer.isBuffer(req.body)) return next(err);
      try {
        req.body = decodeUtf8(req.header('content-type'), req.body);
      } catch (error) {
        undecodable.set(req, error as Error);
        return next(error);
      }
      next();
    });
  };
}

function decodeUtf8(contentType: string | undefined, bytes: Buffer): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  // A search form's charset label is not a FHIR body's: its bytes just have to be UTF-8 (ASCII with percent-escapes is).
  const form = /^\s*application\/x-www-form-urlencoded/i.test(contentType ?? '');
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8' && !form) {
    throw new UnsupportedMediaType(`Unsupported charset '${charset}': FHIR bodies are UTF-8`);
  }
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new MalformedBody('The request body is not valid UTF-8');
  }
}

/** Bodies already parsed, per request: the enforcement point reads a Bundle first, the FHIR adapter reuses it. */
const parsed = new WeakMap<object, unknown>();

/** `parseBody` once per request (a large transaction Bundle is not parsed and checked twice). */
export function parsedBody(req: object, contentType: string | undefined, text: string): unknown {
  if (parsed.has(req)) return parsed.get(req);
  const value = parseBody(contentType, text);
  if (value.resourceType === 'Parameters') {
    const wrong = parametersShapeError(value as unknown as Record<string, unknown>);
    if (wrong) throw new FhirJsonError(wrong.diagnostics, wrong.expression);
  }
  parsed.set(req, value);
  return value;
}
