import type { CollectedSpan } from "./otlp-collector.ts";

// Reading traces back from Jaeger's HTTP query API (`GET /api/traces`, the JSON API its UI uses),
// as CollectedSpans, so that the checks written for the OTLP receiver run unchanged on what Jaeger
// stored.

interface JaegerTag {
  key: string;
  type?: string;
  value: unknown;
}
interface JaegerSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: { refType: string; traceID: string; spanID: string }[];
  /** Microseconds since the epoch. */
  startTime: number;
  /** Microseconds. */
  duration: number;
  tags?: JaegerTag[];
  processID: string;
}
interface JaegerTrace {
  traceID: string;
  spans: JaegerSpan[];
  processes: Record<string, { serviceName: string; tags?: JaegerTag[] }>;
}

export interface TraceQuery {
  readonly service: string;
  readonly operation?: string;
  /** Epoch ms; Jaeger takes microseconds. */
  readonly startMs: number;
  readonly endMs: number;
  readonly limit: number;
  /** Span or resource attributes that must match (Jaeger's `tags` filter). */
  readonly tags?: Readonly<Record<string, string>>;
}

/**
 * Traces of a service as CollectedSpans (every span of each trace, whatever its service: the
 * controller's spans come with the worker's traces). An empty answer and HTTP 404 both mean "none
 * yet" — Jaeger answers 404 on some versions when nothing matches.
 */
export async function queryJaegerTraces(queryUrl: string, query: TraceQuery): Promise<CollectedSpan[]> {
  const params = new URLSearchParams({
    service: query.service,
    limit: String(query.limit),
    start: String(Math.floor(query.startMs * 1000)),
    end: String(Math.ceil(query.endMs * 1000)),
    ...(query.operation ? { operation: query.operation } : {}),
    ...(query.tags ? { tags: JSON.stringify(query.tags) } : {}),
  });
  const response = await fetch(`${queryUrl.replace(/\/+$/, "")}/api/traces?${params}`, { signal: AbortSignal.timeout(10_000) });
  if (response.status === 404) return [];
  if (!response.ok) throw new Error(`Jaeger query answered HTTP ${response.status}: ${(await response.text()).slice(0, 300)}`);
  const body = (await response.json()) as { data?: JaegerTrace[] | null };
  return (body.data ?? []).flatMap(flattenJaegerTrace);
}

function flattenJaegerTrace(trace: JaegerTrace): CollectedSpan[] {
  return trace.spans.map((span) => {
    const process = trace.processes[span.processID];
    const attributes = tagsOf(span.tags);
    const parent = (span.references ?? []).find((r) => r.refType === "CHILD_OF" && r.traceID === span.traceID);
    const status = attributes["otel.status_code"];
    return {
      traceId: span.traceID,
      spanId: span.spanID,
      parentSpanId: parent?.spanID ?? "",
      name: span.operationName,
      service: process?.serviceName ?? "",
      resource: { ...tagsOf(process?.tags), "service.name": process?.serviceName ?? "" },
      attributes,
      startMs: span.startTime / 1000,
      endMs: (span.startTime + span.duration) / 1000,
      statusCode: status === "ERROR" ? 2 : status === "OK" ? 1 : 0,
    };
  });
}

function tagsOf(tags: JaegerTag[] | undefined): Record<string, unknown> {
  return Object.fromEntries((tags ?? []).map((tag) => [tag.key, tag.type === "int64" || tag.type === "float64" ? Number(tag.value) : tag.value]));
}
