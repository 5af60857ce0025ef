import { SpanStatusCode, type Span } from "@opentelemetry/api";

/** Marks a span failed with `error` (recorded as its exception, its message as the status). */
export function failSpan(span: Span, error: unknown): void {
  span.recordException(error instanceof Error ? error : new Error(String(error)));
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
