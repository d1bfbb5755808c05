/**
 * The import directions of docs/architecture.md, checked in CI (`npm run check:imports`).
 * Data flows one way: HTTP adapters (fhir/, guard/) -> domain (booking/, subscriptions/) -> store/;
 * every part may import the leaves server-lib/ and common/, which import nothing of ours.
 */
const layer = (name) => `^src/${name}/`;

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'leaves-import-nothing',
      comment: 'server-lib/ and common/ are leaves: every part may import them, so they import no other part.',
      severity: 'error',
      from: { path: '^src/(server-lib|common)/' },
      to: { path: '^src/', pathNot: '^src/(server-lib|common)/' },
    },
    {
      name: 'model-is-below-the-store',
      comment: 'model/ (profile validation, JSON and XML formats) works on plain resources: it imports only the leaves.',
      severity: 'error',
      from: { path: layer('model') },
      to: { path: '^src/', pathNot: '^src/(model|server-lib|common)/' },
    },
    {
      name: 'store-is-the-bottom',
      comment: 'The store knows SQL and versioned resources, not HTTP, FHIR REST, booking rules or the guard.',
      severity: 'error',
      from: { path: layer('store') },
      to: { path: '^src/(fhir|booking|subscriptions|guard|jobs|audit|client|cli|attestation-helper)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'demo-is-seed-data',
      comment: 'The demo practice is plain resources in the booking vocabulary: no store, no HTTP, no other part.',
      severity: 'error',
      from: { path: layer('demo') },
      to: { path: '^src/', pathNot: '^src/(demo|booking|common|server-lib)/' },
    },
    {
      name: 'only-the-root-loads-demo-data',
      comment: 'server.ts loads the demo practice into an empty store; no part below the composition root knows it.',
      severity: 'error',
      from: { path: '^src/[^/]+/', pathNot: '^src/(demo|cli)/' },
      to: { path: layer('demo') },
    },
    {
      name: 'domain-below-http',
      comment: 'booking/ and subscriptions/ are domain code: no FHIR REST adapter, no guard, no composition.',
      severity: 'error',
      from: { path: '^src/(booking|subscriptions)/' },
      to: { path: '^src/(fhir|guard|client|cli)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'booking-knows-no-subscriptions',
      comment: 'Booking writes outbox events; subscriptions consume them. Never the other way round.',
      severity: 'error',
      from: { path: layer('booking') },
      to: { path: layer('subscriptions') },
    },
    {
      name: 'audit-below-http',
      comment: 'The audit trail stores and checks AuditEvents: it knows the store and FHIR, not HTTP, the guard or the domain.',
      severity: 'error',
      from: { path: layer('audit') },
      to: { path: '^src/(fhir|booking|subscriptions|guard|jobs|client|cli)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'jobs-are-infrastructure',
      comment: 'The queue port runs kinds it is given; it knows no domain and no HTTP.',
      severity: 'error',
      from: { path: layer('jobs') },
      to: { path: '^src/(fhir|booking|subscriptions|guard|client|cli)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'guard-knows-no-fhir',
      comment: 'The guard sees a FHIR request only through the ports the FHIR layer implements (guard/pep/ports), and tells the audit trail through its port (server-lib/audit-port.ts).',
      severity: 'error',
      from: { path: layer('guard') },
      to: { path: '^src/(fhir|booking|subscriptions|audit|client|cli)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'enforcement-is-pure',
      comment: 'enforce() is a function of a plain request: no Express, no SQL, so ASL can run an inner request through it.',
      severity: 'error',
      from: { path: '^src/guard/pep/', pathNot: '^src/guard/pep/(express|upstream-proxy|index)\\.ts$' },
      to: { path: '^src/store/|node_modules/(express|pg|@electric-sql)/' },
    },
    {
      name: 'fhir-knows-no-guard',
      comment: 'The FHIR layer gets the caller identity from common/; it does not reach into the guard.',
      severity: 'error',
      from: { path: layer('fhir') },
      to: { path: '^src/(guard|client|cli)/|^src/(app|server|main)\\.ts$' },
    },
    {
      name: 'client-is-standalone',
      comment: 'The reference client ships to other machines: it depends on common/ and the attestation helper only, never on server code.',
      severity: 'error',
      from: { path: layer('client') },
      to: { path: '^src/', pathNot: '^src/(client|common|attestation-helper)/' },
    },
    {
      name: 'helper-is-standalone',
      comment: 'The attestation helper runs on the client machine next to the TPM: common/ only.',
      severity: 'error',
      from: { path: layer('attestation-helper') },
      to: { path: '^src/', pathNot: '^src/(attestation-helper|common)/' },
    },
    {
      name: 'public-surface-only',
      comment: 'Outside a top-level folder, import its index.ts, not its insides. The leaves server-lib/ and common/ are libraries of small modules: import the one you need.',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/[^/]+/.+', pathNot: ['^src/$1/', '^src/[^/]+/index\\.ts$', '^src/(server-lib|common)/'] },
    },
    {
      name: 'no-cycles-between-parts',
      comment: 'Two top-level parts that import each other are one part.',
      severity: 'error',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/', pathNot: '^src/$1/', circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(test|bench|dist)/' },
  },
};
