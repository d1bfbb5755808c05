/**
 * OpenTelemetry traces (docs/requirements.md#practice-page-and-operations) through the standard
 * `OTEL_*` variables: with `OTEL_EXPORTER_OTLP_ENDPOINT` (or `..._TRACES_ENDPOINT`) set, every
 * HTTP request in and out, every SQL statement (pg) and every Redis command (ioredis) becomes a
 * span, exported over OTLP
 * (`OTEL_EXPORTER_OTLP_PROTOCOL`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER` ... as the
 * specification defines them). Unset, nothing is loaded.
 *
 * Instrumentation patches modules as they are loaded, so this module runs first: `main.ts`
 * imports it before anything that loads `http`, `express`, `pg` or `ioredis`.
 */
import type { NodeSDK } from '@opentelemetry/sdk-node';

let sdk: NodeSDK | undefined;

/** Starts tracing when the environment asks for it; true when it did. */
export function startTracing(env: NodeJS.ProcessEnv = process.env): boolean {
  if (sdk) return true;
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return false;
  // Traces only: metrics are Prometheus's (METRICS_PORT), logs are pino's.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  env.OTEL_SERVICE_NAME ??= 'terminus';
  // Required here, not imported at the top: a process without tracing never loads these packages.
  const { NodeSDK: Sdk } = require('@opentelemetry/sdk-node') as typeof import('@opentelemetry/sdk-node');
  const { HttpInstrumentation } = require('@opentelemetry/instrumentation-http') as typeof import('@opentelemetry/instrumentation-http');
  const { ExpressInstrumentation } = require('@opentelemetry/instrumentation-express') as typeof import('@opentelemetry/instrumentation-express');
  const { PgInstrumentation } = require('@opentelemetry/instrumentation-pg') as typeof import('@opentelemetry/instrumentation-pg');
  const { IORedisInstrumentation } = require('@opentelemetry/instrumentation-ioredis') as typeof import('@opentelemetry/instrumentation-ioredis');
  sdk = new Sdk({
    instrumentations: [
      // Probes every few seconds would drown the requests that matter.
      new HttpInstrumentation({ ignoreIncomingRequestHook: (req) => req.url === '/healthz' || req.url === '/readyz' }),
      new ExpressInstrumentation(),
      // Statement text without values: parameters may hold patient data.
      new PgInstrumentation({ enhancedDatabaseReporting: false }),
      // The command name only: keys and arguments carry client ids, token ids and addresses.
      new IORedisInstrumentation({ dbStatementSerializer: (command) => command }),
    ],
  });
  sdk.start();
  return true;
}

/** Exports what is buffered and stops (at shutdown). */
export async function stopTracing(): Promise<void> {
  const running = sdk;
  sdk = undefined;
  await running?.shutdown();
}

startTracing();
