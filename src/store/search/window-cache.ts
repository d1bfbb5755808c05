import type { Resource } from '@medplum/fhirtypes';
import { TickBatch } from '../../server-lib/group-commit';
import { deepFreeze } from '../../server-lib/frozen';
import { searchCache } from '../../server-lib/metrics';
import type { Caller } from '../../common/identity';
import type { Db } from '../db';
import { compoundFilters, type SearchRequest, type SearchResult, type StoredMatch } from './sql';

const DAY_MS = 86_400_000;

/** What a cached result depends on: one reference target's compound rows in a range of days. */
interface Window {
  type: string;
  ref: string;
  firstDay: number;
  lastDay: number;
}

interface Entry {
  stamp: string;
  result: SearchResult;
}

interface Stamp {
  stamp: string;
  owned: boolean;
}

/**
 * Results of the common calendar query (ISiK: `Slot?schedule=X&status=free&start=ge..&start=le..`),
 * kept per request shape and viewer. Such a search depends only on the resources with
 * compound rows of that reference in those days, and every write of one raises the generation of
 * its (reference, day) in the write's own statement (migrations/004, store/repository.ts): a
 * cached result is used while the sum of its days' generations is what it was when the result
 * was read. That sum is one indexed statement instead of the search, asked of the shared store,
 * so a replica never answers from a result another replica's committed write made stale, and a
 * write rolled back changes nothing. The stamps asked for in one turn of the event loop are read
 * by one statement (one round trip for many requests under load); it starts after every request
 * in it asked, so it sees every write committed before.
 *
 * The stamp is read before the search: a write committed in between makes the entry look stale at
 * once (a miss, never a stale hit). Searches inside a transaction, with includes, chains, `_has`
 * or `ap` dates, or without a bounded window go to the store. Results are frozen: every request
 * served from one entry shares its objects. Least recently used entries go first.
 */
export class SearchWindowCache {
  private readonly entries = new Map<string, Entry>();
  /** Concurrent misses of one key and stamp share one search. */
  private readonly pending = new Map<string, Promise<SearchResult>>();
  /** One batch of stamp reads per store (the repository's Db outside a transaction). */
  private readonly stamps = new WeakMap<Db, TickBatch<Window, Stamp>>();

  constructor(readonly maxEntries: number) {}

  async search(db: Db, request: SearchRequest, opts: { scope?: Pick<Caller, 'institution' | 'isOwner' | 'patient'>; baseUrl: string }, run: () => Promise<SearchResult>): Promise<SearchResult> {
    const shape = db.inTransaction ? undefined : requestShape(request, opts.baseUrl);
    if (!shape) return run();
    const { stamp, owned } = await this.stampsOf(db).submit(shape.window);
    // A window without owned resources looks the same to every viewer: one entry serves them all.
    const key = `${shape.key}\u0000${owned ? viewerKey(opts.scope) : '*'}`;
    const entry = this.entries.get(key);
    if (entry && entry.stamp === stamp) {
      this.entries.delete(key); // most recently used last
      this.entries.set(key, entry);
      searchCache.inc({ result: 'hit' });
      return entry.result;
    }
    searchCache.inc({ result: 'miss' });
    const flight = `${key}\u0000${stamp}`;
    let shared = this.pending.get(flight);
    if (!shared) {
      shared = run()
        .then((result) => {
          this.remember(key, { stamp, result: frozen(result) });
          return result;
        })
        .finally(() => this.pending.delete(flight));
      this.pending.set(flight, shared);
    }
    return shared;
  }

  private stampsOf(db: Db): TickBatch<Window, Stamp> {
    let reads = this.stamps.get(db);
    if (!reads) {
      reads = new TickBatch<Window, Stamp>((windows) => readStamps(db, windows));
      this.stamps.set(db, reads);
    }
    return reads;
  }

  private remember(key: string, entry: Entry): void {
    this.entries.delete(key);
    this.entries.set(key, entry);
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }
}

/** A cacheable request's window and the part of its entries' key that the request makes. */
interface Shape {
  window: Window;
  key: string;
}

/** Shapes of frozen requests (a parsed query shared by every request that asks it: fhir/search-request.ts), per base URL. */
const shapes = new WeakMap<SearchRequest, Map<string, Shape | undefined>>();

function requestShape(request: SearchRequest, baseUrl: string): Shape | undefined {
  const make = (): Shape | undefined => {
    const window = cacheableWindow(request, baseUrl);
    return window && { window, key: `${JSON.stringify(request)}\u0000${baseUrl}` };
  };
  if (!Object.isFrozen(request)) return make();
  let perBase = shapes.get(request);
  if (!perBase) shapes.set(request, (perBase = new Map()));
  if (!perBase.has(baseUrl)) perBase.set(baseUrl, make());
  return perBase.get(baseUrl);
}

/**
 * The days a request's matches can lie in, when the compound index drives it and nothing else
 * (other resources, the clock) can change its result. The compound date parameters are instants
 * (Slot.start), so a match's day is at most one before the window's start.
 */
export function cacheableWindow(request: SearchRequest, baseUrl: string): Window | undefined {
  if (request.include.length || request.revinclude.length) return undefined;
  if (request.filters.some((f) => f.chain.length || f.has || f.values.some((v) => v.startsWith('ap')))) return undefined;
  const found = compoundFilters(request, baseUrl);
  if (!found || !Number.isFinite(found.window.low) || !Number.isFinite(found.window.high)) return undefined;
  return { type: request.resourceType, ref: found.ref, firstDay: Math.floor(found.window.low / DAY_MS) - 1, lastDay: Math.floor(found.window.high / DAY_MS) };
}

/** Each window's stamp, in order: one statement for all of them. */
async function readStamps(db: Db, windows: Window[]): Promise<Stamp[]> {
  const { rows } = await db.query<{ stamp: string; owned: boolean }>(
    `SELECT coalesce(sum(g.generation), 0)::text AS stamp, coalesce(sum(g.owned), 0) <> 0 AS owned
       FROM unnest($1::text[], $2::text[], $3::int[], $4::int[]) WITH ORDINALITY AS w(resource_type, ref, first_day, last_day, n)
       LEFT JOIN search_generation g ON g.resource_type = w.resource_type AND g.ref = w.ref AND g.day BETWEEN w.first_day AND w.last_day
      GROUP BY w.n ORDER BY w.n`,
    [windows.map((w) => w.type), windows.map((w) => w.ref), windows.map((w) => w.firstDay), windows.map((w) => w.lastDay)],
    { prepare: true },
  );
  return rows.map((r) => ({ stamp: r.stamp, owned: r.owned }));
}

function viewerKey(scope: Pick<Caller, 'institution' | 'isOwner' | 'patient'> | undefined): string {
  if (!scope || scope.isOwner) return '*';
  return `${scope.institution}\u0000${scope.patient ?? ''}`;
}

function frozen(result: SearchResult): SearchResult {
  // Parsed now, once for every request the entry serves (they share the objects).
  deepFreeze(result.resources as Resource[]);
  deepFreeze(result.included as Resource[]);
  deepFreeze(result.matches as StoredMatch[]);
  return Object.freeze(result);
}
