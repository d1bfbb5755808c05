import type { CapabilityStatement, CapabilityStatementRestResource } from '@medplum/fhirtypes';
import { RESOURCE_TYPES } from '../store';
import { searchParams } from '../store';
import { knownProfiles } from '../model';
import type { FhirEnv } from './request';
import { resourceTypesOf } from './operations/registry';
import { addSubscriptionCapabilities } from '../subscriptions';
import { ISIK_PROFILE } from '../common/vocabulary';

const ISIK_CS = 'https://gematik.de/fhir/isik/CapabilityStatement';

/** ISiK role canonicals this server implements (ISiK Terminplanung 6.0.0: all of them in `instantiates`). */
const INSTANTIATES = [
  `${ISIK_CS}/ISiKCapabilityStatementTerminRepositoryAkteur`,
  `${ISIK_CS}/ISiKCapabilityStatementTerminRepositoryRolle`,
  `${ISIK_CS}/ISiKCapabilityStatementTerminologieRolle`,
  `${ISIK_CS}/ISiKCapabilityStatementStammdatenRolle`,
];

/** Profiles each stored type is validated against (ISiK Terminplanung 6.0.0). */
const TYPE_PROFILES: Readonly<Record<string, string>> = ISIK_PROFILE;

/** Includes/revincludes advertised per type (ISiK Termin-Repository: all MAY, `Encounter:patient` SHALL). */
const INCLUDES: Record<string, { include?: string[]; revinclude?: string[] }> = {
  Schedule: { revinclude: ['Slot:schedule'] },
  Slot: { include: ['Slot:schedule'], revinclude: ['Appointment:slot'] },
  Appointment: { include: ['Appointment:slot', 'Appointment:actor'] },
  HealthcareService: { revinclude: ['Schedule:actor', 'Appointment:actor'] },
  Encounter: { include: ['Encounter:patient'] },
};


/**
 * The CapabilityStatement is generated from what the code supports: the stored types, their
 * indexed search parameters, the interactions of the router and the registered operations.
 */
/**
 * The audit trail (IHE BALP Audit Consumer): read and search only; the server alone writes it.
 * Pages continue from a cursor (`_cursor` in the next link).
 */
const SP = 'http://hl7.org/fhir/SearchParameter/AuditEvent-';
const AUDIT_EVENT_RESOURCE: CapabilityStatementRestResource = {
  type: 'AuditEvent',
  profile: 'http://hl7.org/fhir/StructureDefinition/AuditEvent',
  interaction: [{ code: 'read' }, { code: 'search-type' }],
  versioning: 'no-version',
  readHistory: false,
  updateCreate: false,
  searchParam: [
    { name: 'date', type: 'date', definition: `${SP}date` },
    { name: 'agent', type: 'reference', definition: `${SP}agent`, documentation: 'agent:identifier=[system|]value finds a Telematik-ID, KVNR or client_id' },
    { name: 'entity', type: 'reference', definition: `${SP}entity` },
    { name: 'patient', type: 'reference', definition: `${SP}patient` },
    { name: 'type', type: 'token', definition: `${SP}type` },
    { name: 'subtype', type: 'token', definition: `${SP}subtype` },
    { name: 'action', type: 'token', definition: `${SP}action` },
    { name: 'outcome', type: 'token', definition: `${SP}outcome` },
    { name: '_count', type: 'number' },
    { name: '_sort', type: 'string', documentation: '-date (default) or date' },
  ],
};

export function capabilityStatement(env: FhirEnv): CapabilityStatement {
  const all = env.operations.list();
  const operations = all.filter((o) => !o.internal);
  const resource: CapabilityStatementRestResource[] = RESOURCE_TYPES.map((type) => {
    const params = [...searchParams(type).values()]
      .filter((d) => ['token', 'reference', 'date', 'string', 'uri', 'composite'].includes(d.type))
      .map((d) => ({ name: d.code, type: d.type as 'token', definition: d.url }));
    const interactions = ['read', 'vread', 'history-instance', 'search-type', 'create', 'update', 'delete'];
    if (all.some((o) => o.definition.code === 'patch' && resourceTypesOf(o).includes(type))) interactions.push('patch');
    return {
      type,
      profile: TYPE_PROFILES[type],
      supportedProfile: knownProfiles().filter((url) => url === TYPE_PROFILES[type]),
      interaction: interactions.map((code) => ({ code: code as 'read' })),
      versioning: 'versioned',
      readHistory: true,
      updateCreate: true,
      conditionalUpdate: false,
      conditionalDelete: 'not-supported',
      searchInclude: INCLUDES[type]?.include,
      searchRevInclude: INCLUDES[type]?.revinclude,
      searchParam: [
        { name: '_count', type: 'number' },
        { name: '_has', type: 'special' },
        ...params,
      ],
      operation: operations
        .filter((o) => resourceTypesOf(o).includes(type))
        .map((o) => ({ name: o.definition.code, definition: o.definition.url! })),
    } as CapabilityStatementRestResource;
  });
  resource.push(AUDIT_EVENT_RESOURCE);
  const cs: CapabilityStatement = {
    resourceType: 'CapabilityStatement',
    status: 'active',
    date: '2026-11-21',
    kind: 'instance',
    name: 'TerminusTerminRepository',
    title: 'Terminus ISiK Termin-Repository',
    instantiates: [...INSTANTIATES],
    software: { name: 'Terminus', version: '0.1.0' },
    implementation: { description: 'Terminus appointment repository', url: env.baseUrl },
    fhirVersion: '4.0.1',
    format: ['application/fhir+json', 'application/fhir+xml', 'json', 'xml'],
    patchFormat: ['application/fhir+json', 'application/json-patch+json'],
    rest: [
      {
        mode: 'server',
        security: {
          cors: false,
          description:
            'DPoP-bound access tokens from the embedded authorization server (see /.well-known/oauth-protected-resource); GET /metadata is public.',
        },
        resource,
        interaction: [{ code: 'transaction' }, { code: 'batch' }],
        operation: operations.filter((o) => resourceTypesOf(o).length === 0).map((o) => ({ name: o.definition.code, definition: o.definition.url! })),
      },
    ],
  };
  addSubscriptionCapabilities(cs);
  return cs;
}
