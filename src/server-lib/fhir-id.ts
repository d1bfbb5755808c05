/**
 * R4 datatypes.html#id: "Any combination of upper- or lower-case ASCII letters, numerals, '-'
 * and '.', with a length limit of 64 characters."
 */
export const FHIR_ID_PATTERN = '[A-Za-z0-9\\-.]{1,64}';

const ID = new RegExp(`^${FHIR_ID_PATTERN}$`);

export const isFhirId = (id: string): boolean => ID.test(id);
