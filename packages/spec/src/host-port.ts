import * as z from "zod";
import { mustBe } from "./rule-error.ts";

// "host:port" as Kafka and gRPC clients take it: a host name, an IPv4 address or a bracketed IPv6
// address, then a port in 1..65535.
const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/;

function isHostPort(value: string): boolean {
  const port = Number(HOST_PORT.exec(value)?.[1] ?? Number.NaN);
  return port >= 1 && port <= 65_535;
}

export const hostPortSchema = z
  .string({ error: mustBe('a "host:port" address such as "127.0.0.1:9092"') })
  .refine(isHostPort, { error: mustBe('a "host:port" address such as "127.0.0.1:9092" (port 1..65535)') });
