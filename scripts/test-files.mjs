// Which test files there are and which lane each runs in (CONTRIBUTING.md, "Tests"). A test file is
// a `*.test.ts`; its lane is what it declares, not where it lives:
//
//   // services: processes, kafka
//
// on a line of the comment block that opens the file puts it in the end-to-end lane, with those
// services; a file without that line is a unit test (no services, no child processes). A file
// under test/e2e/ must declare, and a unit test that reaches for a process or a broker anyway is
// refused with the line to add, so that a new test cannot land in the wrong lane unnoticed.
//
// Only node built-ins; plain ESM so that it runs before anything is compiled.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

/** What a file may declare, and what the runner does for each (nothing: installed by .ci/run). */
export const SERVICES = {
  processes: "starts child processes (`sluice`, node, python3, npm): nothing to start",
  kafka: "a Kafka broker: the runner starts or reuses one (scripts/kafka.mjs), KAFKA_BROKERS",
  jaeger: "a Jaeger: the runner starts or reuses one (scripts/jaeger.mjs), JAEGER_QUERY_URL",
  prometheus: "a Prometheus: the runner starts or reuses one (scripts/prometheus.mjs), PROMETHEUS_URL",
  zipkin: "a Zipkin (trace UI): the runner starts or reuses one (scripts/zipkin.mjs, fetching its jar on first use), ZIPKIN_URL",
  chromium: "headless Chromium (installed by .ci/run)",
  python: "python3 with clients/python/requirements-dev.txt (installed by .ci/run)",
};

/** Where every test file is looked for when no paths are given. */
export const DEFAULT_ROOTS = ["packages", "test", "examples"];

export function findTests(path) {
  if (!existsSync(path)) return [];
  if (statSync(path).isFile()) return path.endsWith(".test.ts") ? [path] : [];
  return readdirSync(path, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "node_modules" || entry.name === "dist" || entry.name.startsWith(".")) return [];
    return findTests(join(path, entry.name));
  });
}

const DECLARATION = /^\/\/\s*services:\s*(.*)$/;

/** The services a file declares in its opening comment block, or undefined (a unit test). */
export function declaredServices(file, text = readFileSync(file, "utf8")) {
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") continue;
    if (!trimmed.startsWith("//")) return undefined;
    const match = DECLARATION.exec(trimmed);
    if (match)
      return (match[1] ?? "")
        .split(",")
        .map((s) => s.trim())
        .filter((s) => s !== "");
  }
  return undefined;
}

/** A unit test that imports any of these needs a service or starts processes. */
const NEEDS_A_SERVICE = [
  [/from\s+"node:child_process"/, "processes"],
  [/import\s+(?!type\b)[^;]*from\s+"kafkajs"/, "kafka"],
  [/from\s+"[^"]*\/support\/(processes|kafka|private-kafka|read-committed|failover-group|concurrency-test-bed)\.ts"/, "processes"],
  [/from\s+"[^"]*\/support\/(prometheus-server|adaptive-run)\.ts"/, "prometheus"],
  [/from\s+"[^"]*kafka-test-kit\.ts"/, "kafka"],
  [/from\s+"[^"]*\/run-cli\.ts"/, "processes"],
  [/from\s+"playwright-core"/, "chromium"],
  [/from\s+"[^"]*\/support\/browser\.ts"/, "chromium"],
];

/**
 * Splits files into the two lanes.
 * @returns {{ unit: string[], e2e: { file: string, services: string[] }[], problems: string[] }}
 */
export function classify(files) {
  const unit = [];
  const e2e = [];
  const problems = [];
  for (const file of files) {
    if (/^test\/[^/]+\.test\.ts$/.test(file)) {
      problems.push(
        `${file}: tests under test/ live in a folder by kind (git mv it): test/e2e/ against processes and services, test/simulation/ on virtual time, test/integration/ in one process on the real clock`,
      );
      continue;
    }
    const text = readFileSync(file, "utf8");
    const services = declaredServices(file, text);
    if (services === undefined) {
      if (file.startsWith("test/e2e/")) {
        problems.push(
          `${file}: an end-to-end test declares what it needs on a line of its opening comment, e.g. \`// services: processes, kafka\` (one or more of ${Object.keys(SERVICES).join(", ")})`,
        );
        continue;
      }
      const needs = [...new Set(NEEDS_A_SERVICE.filter(([pattern]) => pattern.test(text)).map(([, service]) => service))];
      if (needs.length > 0) {
        problems.push(
          `${file}: imports what needs ${needs.join(", ")} but declares no services, so it would run in the unit lane; add \`// services: ${needs.join(", ")}\` to its opening comment (and see CONTRIBUTING.md for where it goes)`,
        );
        continue;
      }
      unit.push(file);
      continue;
    }
    const unknown = services.filter((s) => !(s in SERVICES));
    if (services.length === 0 || unknown.length > 0) {
      problems.push(
        `${file}: \`// services:\` names ${unknown.length > 0 ? `unknown ${unknown.join(", ")}` : "nothing"}; the services are ${Object.keys(SERVICES).join(", ")}`,
      );
      continue;
    }
    e2e.push({ file, services });
  }
  return { unit, e2e, problems };
}
