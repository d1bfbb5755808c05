/**
 * The demo practice: seed data that the composition root (server.ts) loads into an empty store
 * when DEMO_DATA is on. Plain FHIR resources from the booking vocabulary; no SQL, no HTTP.
 */
export { DEMO_HORIZON_DAYS, demoResources } from './practice';
