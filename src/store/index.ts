/**
 * The store: PostgreSQL or PGlite access, migrations, the versioned resource repository and FHIR
 * search executed as SQL. Knows SQL and resources, not HTTP, booking rules or the guard.
 */
export * from './db';
export * from './migrate';
export * from './repository';
export * from './search/dates';
export * from './search/extract';
export * from './search/parameters';
export * from './search/query';
export * from './search/sql';
export * from './search/window-cache';
export * from './write-interceptors';
export * from './outbox';
export * from './deferred-indexes';
