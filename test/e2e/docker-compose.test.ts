// services: processes
// docker-compose.yml cannot run here (no Docker engine), so this reads it and checks what would break
// it: every Sluice command and flag exists in the CLI (`sluice <command> --help`), the spec and the
// producer it names exist and validate, ports agree between the flags, the published ports, the
// health checks, the services that call each other and docs/getting-started/kafka.md, and the images are the versions
// the repository runs without Docker.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { before, describe, it } from "node:test";
import { parse } from "yaml";
import { ROOT, sluice } from "../support/processes.ts";

interface Service {
  image?: string;
  build?: string;
  entrypoint?: string[];
  command?: string[];
  ports?: string[];
  environment?: Record<string, string | number>;
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
}

// Compose resolves `<<: *anchor` merge keys (YAML 1.1); the yaml package does so when asked.
const compose = parse(readFileSync(join(ROOT, "docker-compose.yml"), "utf8"), { merge: true }) as { services: Record<string, Service> };
const services = compose.services;
// docs/getting-started/kafka.md's "See it in Jaeger" section is what users follow.
const guide = readFileSync(join(ROOT, "docs/getting-started/kafka.md"), "utf8");
const jaegerStart = guide.indexOf("## See it in Jaeger");
const jaegerEnd = guide.indexOf("\n## ", jaegerStart + 1);
const jaegerSection = guide.slice(jaegerStart, jaegerEnd < 0 ? undefined : jaegerEnd);
const CONTROLLERS = ["controller", "controller-2"];
const SLUICE_SERVICES = [...CONTROLLERS, "worker-1", "worker-2"];

/** The value after `--flag` in a command. */
function flag(command: readonly string[], name: string): string {
  const index = command.indexOf(name);
  assert.ok(index >= 0 && index + 1 < command.length, `${name} in ${command.join(" ")}`);
  return command[index + 1] ?? "";
}

function service(name: string): Service {
  const found = services[name];
  assert.ok(found, `service ${name} in docker-compose.yml`);
  return found;
}

/** `host:container` mappings of a service. */
function published(name: string): Map<number, number> {
  return new Map(
    (service(name).ports ?? []).map((mapping) => {
      const [host, container] = mapping.split(":").map(Number);
      return [container ?? 0, host ?? 0];
    }),
  );
}

describe("docker-compose.yml", () => {
  const help = new Map<string, string>();
  before(async () => {
    for (const command of ["controller", "worker"]) {
      const child = sluice([command, "--help"]);
      const { code } = await child.exited;
      assert.equal(code, 0, child.stderr);
      help.set(command, child.stdout);
    }
  });

  it("has Kafka, Jaeger, two controllers (a failover group), two workers and a producer, with health checks", () => {
    assert.deepEqual(Object.keys(services).sort(), ["controller", "controller-2", "jaeger", "kafka", "producer", "worker-1", "worker-2"]);
    for (const name of ["kafka", "jaeger", ...SLUICE_SERVICES]) assert.ok(service(name).healthcheck?.test.length, `${name} has a health check`);
    for (const name of SLUICE_SERVICES) {
      for (const [dependency, { condition }] of Object.entries(service(name).depends_on ?? {})) {
        assert.equal(condition, "service_healthy", `${name} waits for ${dependency} to be healthy`);
      }
    }
    assert.deepEqual(Object.keys(service("worker-1").depends_on ?? {}).sort(), ["controller", "controller-2", "kafka"]);
    for (const name of CONTROLLERS) assert.ok(service(name).depends_on?.["kafka"], `${name} waits for Kafka: the group and its state live there`);
  });

  it("runs only commands and flags that `sluice --help` lists, on a spec that validates", async () => {
    for (const name of SLUICE_SERVICES) {
      const [command = "", spec = "", ...args] = service(name).command ?? [];
      const usage = help.get(command);
      assert.ok(usage, `${name} runs \`sluice ${command}\`, a command this test knows`);
      for (const arg of args.filter((a) => a.startsWith("--"))) {
        assert.ok(new RegExp(`^\\s+${arg}\\b`, "m").test(usage), `${name}: \`sluice ${command}\` has no ${arg}\n${usage}`);
      }
      assert.ok(existsSync(join(ROOT, spec)), `${name}: ${spec} exists`);
    }
    const spec = service("controller").command?.[1] ?? "";
    assert.deepEqual(new Set(SLUICE_SERVICES.map((name) => service(name).command?.[1])), new Set([spec]), "one spec for all");
    const validate = sluice(["validate", spec]);
    assert.equal((await validate.exited).code, 0, validate.stderr);
  });

  it("builds the Sluice image from this repository with the pnpm it pins", () => {
    for (const name of [...SLUICE_SERVICES, "producer"]) {
      assert.equal(service(name).build, ".", `${name} is built from the repository`);
      assert.equal(service(name).image, "sluice:dev");
    }
    const dockerfile = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    const packageManager = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { packageManager: string }).packageManager;
    assert.ok(dockerfile.includes(`npm install -g ${packageManager}`), `the Dockerfile installs ${packageManager}`);
    assert.match(dockerfile, /pnpm install --frozen-lockfile/);
    const entrypoint = /ENTRYPOINT \["node", "\/app\/([^"]+)"\]/.exec(dockerfile);
    assert.ok(entrypoint && existsSync(join(ROOT, entrypoint[1] ?? "")), "the entry point is the sluice bin");
    assert.match(readFileSync(join(ROOT, ".dockerignore"), "utf8"), /^\*\*\/node_modules$/m, "the host's node_modules stay out of the image");
  });

  it("wires the ports: flags, published ports, health checks and the addresses the services call agree", () => {
    const controller = service("controller").command ?? [];
    const grpcPort = Number(flag(controller, "--port"));
    const httpPort = Number(flag(controller, "--http-port"));
    const hostGrpcPorts: number[] = [];
    const hostHttpPorts: number[] = [];
    for (const name of CONTROLLERS) {
      const command = service(name).command ?? [];
      assert.equal(Number(flag(command, "--port")), grpcPort, `${name} listens on the same container port`);
      assert.equal(Number(flag(command, "--http-port")), httpPort);
      assert.equal(flag(command, "--host"), "0.0.0.0", "gRPC reachable from the other containers");
      assert.equal(flag(command, "--http-host"), "0.0.0.0", "the dashboard reachable from the host");
      assert.equal(flag(command, "--advertise"), `${name}:${grpcPort}`, `${name}'s followers send clients to an address the other containers resolve`);
      assert.equal(flag(command, "--brokers"), "kafka:9092", `${name} joins the group on Kafka's in-network listener`);
      hostGrpcPorts.push(published(name).get(grpcPort) ?? 0);
      hostHttpPorts.push(published(name).get(httpPort) ?? 0);
      assert.ok(service(name).healthcheck?.test.join(" ").includes(`127.0.0.1:${httpPort}/healthz`), `${name}'s health check asks its --http-port`);
    }
    assert.deepEqual(hostGrpcPorts, [grpcPort, grpcPort + 1], "the host reaches the controllers on 7070 and 7071");
    assert.deepEqual(hostHttpPorts, [httpPort, httpPort + 1]);

    const kafka = service("kafka").environment ?? {};
    const internal = /INTERNAL:\/\/([^,]+)/.exec(String(kafka["KAFKA_ADVERTISED_LISTENERS"]))?.[1];
    const external = /EXTERNAL:\/\/[^:]+:(\d+)/.exec(String(kafka["KAFKA_ADVERTISED_LISTENERS"]))?.[1];
    assert.equal(internal, "kafka:9092");
    const hostPorts = new Set<number>();
    for (const name of ["worker-1", "worker-2"]) {
      const worker = service(name).command ?? [];
      assert.equal(flag(worker, "--controller"), CONTROLLERS.map((c) => `${c}:${grpcPort}`).join(","), `${name} follows the leader of both controllers`);
      assert.equal(flag(worker, "--brokers"), internal, `${name} uses Kafka's in-network listener`);
      assert.equal(flag(worker, "--worker-id"), name);
      assert.equal(flag(worker, "--metrics-host"), "0.0.0.0");
      const metricsPort = Number(flag(worker, "--metrics-port"));
      const hostPort = published(name).get(metricsPort);
      assert.ok(hostPort, `${name} publishes its --metrics-port ${metricsPort}`);
      hostPorts.add(hostPort);
      assert.ok(service(name).healthcheck?.test.join(" ").includes(`127.0.0.1:${metricsPort}/healthz`), `${name}'s health check asks its --metrics-port`);
      assert.ok(jaegerSection.includes(`http://localhost:${hostPort}/metrics`), `the Docker Compose guide names ${name}'s metrics port ${hostPort}`);
    }
    assert.equal(hostPorts.size, 2, "the two workers publish different host ports");

    // The spec's own 127.0.0.1 addresses are what the host reaches: the same file works outside Docker.
    const spec = JSON.parse(readFileSync(join(ROOT, controller[1] ?? ""), "utf8")) as { kafka: { brokers: string[] }; controller: { addresses: string[] } };
    assert.deepEqual(spec.kafka.brokers, [`127.0.0.1:${external}`]);
    assert.equal(published("kafka").get(Number(external)), Number(external), "Kafka's host listener is published");
    assert.deepEqual(
      spec.controller.addresses,
      hostGrpcPorts.map((port) => `127.0.0.1:${port}`),
    );

    const otlp = [...SLUICE_SERVICES.map((name) => flag(service(name).command ?? [], "--otlp"))];
    assert.deepEqual(new Set(otlp), new Set(["http://jaeger:4318"]), "every Sluice process exports to Jaeger's OTLP/HTTP port");
    assert.equal(published("jaeger").get(16686), 16686, "the Jaeger UI on 16686");
    assert.equal(published("jaeger").get(4318), 4318);

    for (const text of [
      "docker compose up --build",
      "http://localhost:16686",
      ...hostHttpPorts.map((p) => `http://localhost:${p}/`),
      `localhost:${grpcPort}`,
      `localhost:${external}`,
    ]) {
      assert.ok(jaegerSection.includes(text), `"See it in Jaeger" mentions ${text}`);
    }
  });

  it("runs the example's producer with the options it takes", () => {
    const producer = service("producer");
    const script = producer.entrypoint?.at(-1) ?? "";
    assert.deepEqual(producer.entrypoint?.slice(0, 3), ["node", "--import", "tsx"]);
    const source = readFileSync(join(ROOT, script), "utf8");
    for (const option of (producer.command ?? []).filter((a) => a.startsWith("--"))) {
      assert.match(source, new RegExp(`\\b${option.slice(2)}: \\{ type: "string"`), `${script} takes ${option}`);
    }
    assert.equal(flag(producer.command ?? [], "--brokers"), "kafka:9092");
    assert.deepEqual(Object.keys(producer.depends_on ?? {}), ["kafka"]);
  });

  it("uses the Kafka and Jaeger versions the repository runs without Docker", () => {
    const kafkaVersion = /<kafka\.version>([^<]+)<\/kafka\.version>/.exec(readFileSync(join(ROOT, "tools/kafka/pom.xml"), "utf8"))?.[1];
    assert.equal(service("kafka").image, `apache/kafka:${kafkaVersion}`);
    const clusterId = String(service("kafka").environment?.["CLUSTER_ID"]);
    assert.equal(Buffer.from(clusterId, "base64url").length, 16, "CLUSTER_ID is a Kafka UUID: 16 bytes in URL-safe base64");
    assert.equal(clusterId.length, 22);

    // Jaeger v2 releases carry two tags: v2.N alongside v1.(N+63) (v2.0.0 was v1.63.0); tools/jaeger pins the v1 tag.
    const goMod = join(ROOT, "tools/jaeger/go.mod");
    const image = service("jaeger").image ?? "";
    assert.match(image, /^jaegertracing\/jaeger:2\.\d+\.\d+$/);
    if (existsSync(goMod)) {
      const v1 = /github\.com\/jaegertracing\/jaeger v1\.(\d+)\.(\d+)/.exec(readFileSync(goMod, "utf8"));
      assert.ok(v1, "tools/jaeger/go.mod pins jaeger");
      assert.equal(image, `jaegertracing/jaeger:2.${Number(v1[1]) - 63}.${v1[2]}`);
    }
    assert.ok(jaegerSection.includes(service("kafka").image ?? "") && jaegerSection.includes(image), "the Docker Compose guide names both images");
  });
});
