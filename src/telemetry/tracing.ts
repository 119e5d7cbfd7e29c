import {
  context,
  propagation,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';

/**
 * OpenTelemetry traces of a job, from the webhook delivery through intake, the queue, the job, each
 * agent step, model call and tool, to the pull request. The code here only uses the API, which does
 * nothing until a process registers the SDK (startTracing in src/telemetry/sdk.ts, when
 * OTEL_EXPORTER_OTLP_ENDPOINT is set): the CLI and the Action carry no exporter.
 *
 * A trace crosses processes inside the queued payloads (`trace`: the W3C `traceparent` and
 * `tracestate` of the span that queued them), so the App's webhook span is the root of the worker's
 * spans too.
 */
const TRACER = 'issue-agent';

export function tracer(): ReturnType<typeof trace.getTracer> {
  return trace.getTracer(TRACER);
}

/** The active trace context as W3C headers, to put in a queued payload (empty when not tracing). */
export function traceCarrier(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier;
}

/** The context a payload's carrier names as parent (the active one when it names none). */
export function remoteParent(carrier: Readonly<Record<string, string>> | null | undefined): Context {
  return propagation.extract(context.active(), carrier ?? {});
}

/**
 * Runs `fn` in a new active span (a child of `parent`, default the active context): an error ends
 * the span with status ERROR and the exception recorded, and is thrown on.
 */
export async function inSpan<T>(
  name: string,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  parent: Context = context.active(),
): Promise<T> {
  return tracer().startActiveSpan(name, { attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error instanceof Error ? error : String(error));
      span.setStatus({
        code: SpanStatusCode.ERROR,
        message: error instanceof Error ? error.message : String(error),
      });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** A span for a time that has already passed (the queue wait between two processes). */
export function pastSpan(
  name: string,
  attributes: Attributes,
  startMs: number,
  endMs: number,
  parent: Context,
): void {
  if (!(endMs >= startMs)) return;
  tracer().startSpan(name, { attributes, startTime: startMs }, parent).end(endMs);
}

/**
 * The agent's steps as spans: `next` ends the step before and starts the next one (a model call and
 * the tools of its reply); `child` runs work as a child of the open step.
 */
export class StepSpans {
  private current: Span | null = null;
  private readonly parent = context.active();

  next(step: number): void {
    this.current?.end();
    this.current = tracer().startSpan(
      'agent step',
      { attributes: { 'issue_agent.step': step } },
      this.parent,
    );
  }

  child<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T> {
    const parent = this.current === null ? this.parent : trace.setSpan(this.parent, this.current);
    return inSpan(name, attributes, () => fn(), parent);
  }

  end(): void {
    this.current?.end();
    this.current = null;
  }
}
