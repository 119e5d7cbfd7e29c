import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';

/**
 * Registers the OpenTelemetry SDK for this process when an OTLP endpoint is configured with the
 * standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, plus
 * `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_BSP_*`, read by the SDK itself); off
 * otherwise, and with `OTEL_SDK_DISABLED=true`. Spans go out over OTLP/HTTP (JSON) in batches;
 * `shutdown` flushes what is left.
 */
export function startTracing(
  service: string,
  env: NodeJS.ProcessEnv = process.env,
): { readonly shutdown: () => Promise<void> } | null {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (endpoint === undefined || endpoint === '' || env.OTEL_SDK_DISABLED === 'true') return null;
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? service }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The AsyncLocalStorage context manager and the W3C trace-context propagator.
  provider.register();
  return { shutdown: () => provider.shutdown() };
}
