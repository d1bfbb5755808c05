-- Resources of the types everyone may see (calendars, slots, services, practitioners, places, code
-- systems) that belong to an institution all the same: one written by an institution that is not a
-- repository owner (src/server-lib/owner.ts, ownerForWrite). There are normally none. A search by
-- anyone but an owner checks each candidate's owner unless this index says no resource of the
-- type belongs to another institution (src/store/search/sql.ts, ownerProbe): a search by service
-- and day has thousands of candidates, each a lookup of its row. Keep the type list equal to
-- PUBLIC_TO_PATIENTS (test/store/search.test.ts checks it).
CREATE INDEX resource_owned_public ON resource (resource_type, owner)
  WHERE owner IS NOT NULL AND resource_type IN ('CodeSystem', 'ValueSet', 'Schedule', 'Slot', 'HealthcareService', 'Practitioner', 'PractitionerRole', 'Location');
