import express from 'express';

/** Largest request body accepted (a transaction Bundle of a few thousand slots fits). */
export const BODY_LIMIT = '5mb';

/**
 * Reads any request body as UTF-8 text, once: the FHIR adapter parses it by Content-Type, and the
 * enforcement point reads a transaction Bundle through the same parser first (the second call
 * then finds the body read and skips).
 */
export function fhirBodyText(): express.RequestHandler {
  return express.text({ type: () => true, limit: BODY_LIMIT, defaultCharset: 'utf-8' });
}
