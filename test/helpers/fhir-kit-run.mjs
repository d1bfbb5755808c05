// A FHIR client of another vendor, in a process of its own as a practice system would be:
// fhir-kit-client against a base URL, searching, booking and cancelling; prints what it got.
import { Client } from 'fhir-kit-client';

const [baseUrl, slotId, parametersJson] = process.argv.slice(2);
const client = new Client({ baseUrl });
try {
  const bundle = await client.search({ resourceType: 'Slot', searchParams: { schedule: 'Schedule/Schedule-Read-Example', status: 'free', _id: slotId } });
  const booked = await client.operation({ name: '$book', resourceType: 'Appointment', method: 'POST', input: JSON.parse(parametersJson) });
  const cancelled = await client.patch({ resourceType: 'Appointment', id: booked.id, jsonPatch: [{ op: 'replace', path: '/status', value: 'cancelled' }] });
  process.stdout.write(JSON.stringify({ found: bundle.entry?.length ?? 0, booked, cancelled }));
} catch (err) {
  process.stdout.write(JSON.stringify({ error: err.message, status: err.response?.status, body: err.response?.data }));
  process.exitCode = 1;
}
