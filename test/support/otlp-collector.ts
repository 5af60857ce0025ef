import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as a trace backend stores it: its own fields plus its service's resource. */
export interface CollectedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** "" for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** Resource `service.name`. */
  readonly service: string;
  readonly resource: Readonly<Record<string, unknown>>;
  readonly attributes: Readonly<Record<string, unknown>>;
  readonly startMs: number;
  readonly endMs: number;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly statusCode: number;
}

/**
 * A minimal OTLP/HTTP JSON receiver on 127.0.0.1 (what @opentelemetry/exporter-trace-otlp-http
 * sends): `POST /v1/traces`, answered 200, spans kept in memory. It lets end-to-end tests read what
 * the `sluice` processes exported without a trace backend; test/e2e/jaeger-tracing.test.ts does the same
 * against a real Jaeger.
 */
export class OtlpCollector {
  readonly spans: CollectedSpan[] = [];
  private constructor(
    private readonly server: Server,
    /** Base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it. */
    readonly endpoint: string,
  ) {}

  static async start(): Promise<OtlpCollector> {
    let collector: OtlpCollector | undefined;
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () => {
        if (request.method !== "POST" || request.url !== "/v1/traces") {
          response.writeHead(404).end();
          return;
        }
        try {
          collector?.spans.push(...flattenOtlpJson(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
          response.writeHead(200, { "content-type": "application/json" }).end("{}");
        } catch (error) {
          response.writeHead(400, { "content-type": "text/plain" }).end(String(error));
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    collector = new OtlpCollector(server, `http://127.0.0.1:${port}`);
    return collector;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: OtlpAnyValue[] };
}
interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpKeyValue[];
  status?: { code?: number };
}
interface OtlpExport {
  resourceSpans?: { resource?: { attributes?: OtlpKeyValue[] }; scopeSpans?: { spans?: OtlpSpan[] }[] }[];
}

function flattenOtlpJson(body: OtlpExport): CollectedSpan[] {
  const spans: CollectedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const resource = attributesOf(resourceSpans.resource?.attributes);
    const service = typeof resource["service.name"] === "string" ? resource["service.name"] : "";
    for (const scope of resourceSpans.scopeSpans ?? []) {
      for (const span of scope.spans ?? []) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? "",
          name: span.name,
          service,
          resource,
          attributes: attributesOf(span.attributes),
          startMs: Number(BigInt(span.startTimeUnixNano) / 1000n) / 1000,
          endMs: Number(BigInt(span.endTimeUnixNano) / 1000n) / 1000,
          statusCode: span.status?.code ?? 0,
        });
      }
    }
  }
  return spans;
}

function attributesOf(list: OtlpKeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, anyValue(value)]));
}

function anyValue(value: OtlpAnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(anyValue);
  return null;
}
