/**
 * What gematik's Konnektor error codes (tel/error/TelematikError.xsd `Code`, the numbers of
 * gemSpec_Kon) mean for the practice, and what to do: the Konnektor's own ErrorText follows in
 * parentheses, so nothing it says is lost.
 */
export const KONNEKTOR_ERRORS: Record<number, string> = {
  4004: 'the Konnektor does not know the Mandant of the .kon file (mandantId)',
  4005: 'the Konnektor does not know the client system of the .kon file (clientSystemId)',
  4006: 'the Konnektor does not know the workplace of the .kon file (workplaceId)',
  4010: 'the client system of the .kon file is not assigned to its Mandant in the Konnektor (information model)',
  4011: 'the workplace of the .kon file is not assigned to its Mandant in the Konnektor (information model)',
  4012: 'the card terminal is not assigned to the Mandant of the .kon file in the Konnektor (information model)',
  4014: 'the workplace of the .kon file is not assigned to its client system in the Konnektor (information model)',
  4015: 'the card terminal is not reachable from the workplace of the .kon file',
  4016: 'the card terminal is not reachable from the workplace of the .kon file',
  4018: 'the card is in use by another session; try again in a moment',
  4020: 'the card terminal is not reachable from the workplace of the .kon file',
  4021: 'the call context is incomplete (mandantId, clientSystemId and workplaceId of the .kon file)',
  4047: 'the Konnektor does not know this card handle any more (the card was removed or reinserted); log in again',
  4049: 'the PIN entry at the card terminal was cancelled',
  4085: 'the SMC-B refused the operation: its access conditions are not met (is it unlocked with its PIN?)',
  4092: 'the Konnektor does not support remote PIN entry for this card',
  4204: 'the Konnektor does not accept this client system: check the .kon credentials (client certificate or user name and password)',
};

/** The practice's sentence for a gematik error code, or undefined for a code not listed. */
export function explainKonnektorError(code: number | undefined): string | undefined {
  return code === undefined ? undefined : KONNEKTOR_ERRORS[code];
}
