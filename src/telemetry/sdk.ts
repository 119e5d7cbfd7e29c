/**
 * Registers the OpenTelemetry SDK for this process when an OTLP endpoint is configured with the
 * standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, plus
 * `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_BSP_*`, read by the SDK itself); off
 * otherwise, and with `OTEL_SDK_DISABLED=true`. Spans go out over OTLP/HTTP (JSON) in batches;
 * `shutdown` flushes what is left.
 *
 * The SDK is imported only when it is on: its modules cost about 0.3 s of CPU at every App and
 * worker start, and most deployments send no traces. Spans are made through `@opentelemetry/api`
 * (telemetry/tracing.ts), which is a no-op until this registers a provider, so nothing is lost by
 * registering after the process's first modules load.
 */
export async function startTracing(
  service: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ readonly shutdown: () => Promise<void> } | null> {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (endpoint === undefined || endpoint === '' || env.OTEL_SDK_DISABLED === 'true') return null;
  const [{ OTLPTraceExporter }, { resourceFromAttributes }, { BatchSpanProcessor, NodeTracerProvider }] =
    await Promise.all([
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
      import('@opentelemetry/sdk-trace-node'),
    ]);
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? service }),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The AsyncLocalStorage context manager and the W3C trace-context propagator.
  provider.register();
  return { shutdown: () => provider.shutdown() };
}
