import fs from 'node:fs';
import path from 'node:path';
import { projectPath } from '../server-lib/paths';
import type { AppointmentEventType } from '../booking';

/** Links a topic to the booking outbox event it stands for (ISiK Terminplanung 6.0.0). */
const OUTBOX_EVENT_EXT = 'http://terminus.local/fhir/StructureDefinition/outbox-event';

export interface Topic {
  /** Canonical, the value of `Subscription.criteria`. */
  url: string;
  title: string;
  outboxEvent: AppointmentEventType;
  /** Resource type the topic's events focus on. */
  resource: string;
  /** Search parameters allowed in `backport-filter-criteria`. */
  filterParameters: string[];
}

interface TopicFile {
  url: string;
  title: string;
  extension?: { url: string; valueCode?: string }[];
  canFilterBy?: { resource?: string; filterParameter: string }[];
  notificationShape?: { resource: string }[];
}

let loaded: Topic[] | undefined;

/** The SubscriptionTopic definitions in the top-level `subscriptions/` folder, read once. */
export function topics(): Topic[] {
  loaded ??= fs
    .readdirSync(projectPath('subscriptions'))
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => toTopic(JSON.parse(fs.readFileSync(path.join(projectPath('subscriptions'), f), 'utf8')) as TopicFile, f));
  return loaded;
}

function toTopic(file: TopicFile, name: string): Topic {
  const outboxEvent = file.extension?.find((e) => e.url === OUTBOX_EVENT_EXT)?.valueCode;
  if (outboxEvent !== 'appointment.updated' && outboxEvent !== 'appointment.cancelled') {
    throw new Error(`subscriptions/${name}: extension ${OUTBOX_EVENT_EXT} must name an outbox event`);
  }
  return {
    url: file.url,
    title: file.title,
    outboxEvent,
    resource: file.notificationShape?.[0]?.resource ?? 'Appointment',
    filterParameters: (file.canFilterBy ?? []).map((c) => c.filterParameter),
  };
}

export function findTopic(url: string | undefined): Topic | undefined {
  return topics().find((t) => t.url === url);
}

/** Topics an outbox event triggers. */
export function topicsFor(event: string): Topic[] {
  return topics().filter((t) => t.outboxEvent === event);
}
