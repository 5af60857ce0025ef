#!/usr/bin/env node
// The whole test suite: type-check, then every *.test.ts under packages/*/test and test/ with node's
// test runner. Services that tests need (a Kafka broker, a Jaeger, a Prometheus) are started here when nothing is listening
// yet, and stopped by their own pid at the end.
//
//   pnpm test                      everything
//   pnpm test packages/core        only test files under these paths
import { spawnSync, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(fileURLToPath(import.meta.url), "../..");
process.chdir(root);

function findTests(dir) {
  if (!existsSync(dir)) return [];
  if (statSync(dir).isFile()) return dir.endsWith(".test.ts") ? [dir] : [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "node_modules" || entry.name.startsWith(".")) return [];
    return findTests(join(dir, entry.name));
  });
}

const roots = process.argv.slice(2);
const searchRoots = roots.length > 0 ? roots : ["packages", "test", "examples"];
const files = searchRoots.flatMap((r) => findTests(r)).map((f) => relative(root, f)).sort();
if (files.length === 0) {
  console.error(`no *.test.ts files under ${searchRoots.join(", ")}`);
  process.exit(1);
}

console.log("== type-check (tsc --noEmit)");
const tsc = spawnSync("pnpm", ["exec", "tsc", "-p", "tsconfig.json"], { stdio: "inherit" });
if (tsc.status !== 0) process.exit(tsc.status ?? 1);

const services = [];
const needsKafka = files.some((f) => f.startsWith("test/e2e/kafka") || f.includes("/kafka/"));
if (needsKafka && existsSync(join(root, "scripts/kafka.mjs"))) {
  const { ensureKafka } = await import("./kafka.mjs");
  const kafka = await ensureKafka();
  process.env.KAFKA_BROKERS = kafka.brokers;
  services.push(kafka);
}
const needsJaeger = files.some((f) => f.startsWith("test/e2e/jaeger") || f.includes("/jaeger/"));
if (needsJaeger && existsSync(join(root, "scripts/jaeger.mjs"))) {
  const { ensureJaeger } = await import("./jaeger.mjs");
  const jaeger = await ensureJaeger();
  // Not OTEL_EXPORTER_OTLP_ENDPOINT: every `sluice` child of every test would then trace to Jaeger.
  // Tests that want traces there ask ensureJaeger(), which finds this one running.
  process.env.JAEGER_OTLP_ENDPOINT = jaeger.otlpHttpEndpoint;
  process.env.JAEGER_QUERY_URL = jaeger.queryUrl;
  services.push(jaeger);
}

const needsPrometheus = files.some(
  (f) => f.startsWith("test/e2e/prometheus") || f.startsWith("test/e2e/adaptive") || f.includes("/prometheus/") || f.includes("cluster-admission"),
);
if (needsPrometheus && existsSync(join(root, "scripts/prometheus.mjs"))) {
  const { ensurePrometheus } = await import("./prometheus.mjs");
  const prometheus = await ensurePrometheus();
  // Tests register their scrape targets as file_sd files under this home (registerScrapeTarget).
  process.env.PROMETHEUS_URL = prometheus.url;
  // That is the home of the server found running (maybe another checkout's), not necessarily ours.
  process.env.PROMETHEUS_HOME = prometheus.home;
  services.push(prometheus);
}

console.log(`== node --test (${files.length} files)`);
const child = spawn(
  process.execPath,
  ["--import", "tsx", "--test", "--test-timeout=600000", ...files],
  { stdio: "inherit", env: process.env },
);
const code = await new Promise((done) => child.on("exit", (c, signal) => done(c ?? (signal ? 1 : 0))));
for (const service of services.reverse()) await service.stop();
process.exit(code);
