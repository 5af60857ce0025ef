// services: kafka
// The controller's consumers outlive a crash that kafkajs does not restart from (RestartingConsumer).
// A broker that dies or restarts while a consumer looks for its group coordinator fails the
// FindCoordinator request on a connection that was open; kafkajs then throws
// KafkaJSGroupCoordinatorNotFound, which is not retriable, and leaves the consumer stopped for good.
// A controller whose election consumer died so answered "no leader is known yet" for ever after a
// broker restart. Here that one request's connection is cut on purpose (the client's socket factory
// drops it when it carries FindCoordinator), on the shared broker, which is never stopped. About 20 s.
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { describe, it } from "node:test";
import { Kafka, logLevel, type ISocketFactory } from "kafkajs";
import type { ElectionListener, ElectionResult } from "@sluice/failover-ports";
import { controllerStateTopic, KafkaControllerElection, KafkaControllerStateStore } from "../src/index.ts";
import { createTopic, uniqueName, useBroker, waitFor, withTimeout } from "./kafka-test-kit.ts";

const FIND_COORDINATOR_API_KEY = 10;
const SESSION_TIMEOUT_MS = 6_000;

const broker = useBroker();

/** A socket factory that drops the connection of the next `armed` FindCoordinator requests instead of sending them. */
class FindCoordinatorCuts {
  armed = 0;
  cut = 0;
  readonly factory: ISocketFactory = ({ host, port, onConnect }) => {
    const socket = connect({ host, port }, onConnect);
    const write = socket.write.bind(socket) as (chunk: Uint8Array | string, ...rest: unknown[]) => boolean;
    const intercepted = (chunk: Uint8Array | string, ...rest: unknown[]): boolean => {
      // A kafkajs request is written whole: int32 size, then int16 api key.
      if (this.armed > 0 && typeof chunk !== "string" && chunk.length >= 6 && Buffer.from(chunk).readInt16BE(4) === FIND_COORDINATOR_API_KEY) {
        this.armed -= 1;
        this.cut += 1;
        setImmediate(() => socket.destroy(new Error("the test cut this connection mid-FindCoordinator")));
        return true;
      }
      return write(chunk, ...rest);
    };
    (socket as Socket & { write: typeof intercepted }).write = intercepted;
    return socket;
  };
}

/** A listener that claims the leadership it was given, like the FailoverController. */
function recorder(): ElectionListener & { results: ElectionResult[]; lost: string[]; leading(): ElectionResult | null } {
  const results: ElectionResult[] = [];
  const lost: string[] = [];
  let current: ElectionResult | null = null;
  return {
    results,
    lost,
    leading: () => (current?.leading ? current : null),
    claim: () => (current?.leading ? { generation: current.generation } : null),
    onElected: (result) => {
      results.push(result);
      current = result;
    },
    onConfirmed: () => {},
    onLost: (reason) => {
      lost.push(reason);
      current = null;
    },
  };
}

function faultyClient(cuts: FindCoordinatorCuts): Kafka {
  return new Kafka({ clientId: "sluice-consumer-restart-test", brokers: broker.brokers.split(","), logLevel: logLevel.NOTHING, socketFactory: cuts.factory });
}

describe("consumers that kafkajs gives up on are started again", () => {
  it("an election member whose rejoin loses its FindCoordinator connection joins the group again", async () => {
    const pipeline = uniqueName("election-rejoin");
    await createTopic(broker.admin, controllerStateTopic(pipeline), 1);
    const cuts = new FindCoordinatorCuts();
    const lines: string[] = [];
    const a = new KafkaControllerElection({
      kafka: faultyClient(cuts),
      pipeline,
      address: "127.0.0.1:7101",
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      log: (line) => lines.push(line),
    });
    const b = new KafkaControllerElection({ kafka: broker.kafka, pipeline, address: "127.0.0.1:7102", sessionTimeoutMs: SESSION_TIMEOUT_MS });
    broker.cleanup.push(["election a", () => a.close()], ["election b", () => b.close()]);
    const ra = recorder();
    const rb = recorder();
    const seen = () => `a: ${JSON.stringify(ra.results)} lost ${JSON.stringify(ra.lost)}; b: ${JSON.stringify(rb.results)}\n${lines.join("\n")}`;

    await a.start(ra);
    await waitFor(
      () => ra.leading() !== null,
      60_000,
      () => `a leads alone\n${seen()}`,
    );
    // b's join makes a rejoin, and a's rejoin asks for the coordinator first: that request's connection is cut.
    cuts.armed = 1;
    await b.start(rb);
    await waitFor(
      () => cuts.cut === 1,
      60_000,
      () => `a's rejoin sent FindCoordinator\n${seen()}`,
    );
    const resultsAtCut = ra.results.length;
    await waitFor(
      () => ra.lost.some((reason) => reason.includes("crashed")),
      60_000,
      () => `a reports its consumer's crash\n${seen()}`,
    );
    // Without a new consumer, a never hears of the group again.
    await waitFor(
      () => ra.results.length > resultsAtCut,
      60_000,
      () => `a elected again after the crash\n${seen()}`,
    );
    assert.ok(
      lines.some((line) => /crashed \(.*group coordinator.*\) and kafkajs does not restart it; starting a new consumer/.test(line)),
      `the crash and the new consumer are logged\n${seen()}`,
    );
    // Both members in one generation, exactly one of them leading.
    await waitFor(
      () => ra.results.at(-1)?.generation === rb.results.at(-1)?.generation,
      60_000,
      () => `a and b in the same generation\n${seen()}`,
    );
    assert.equal(Number(ra.results.at(-1)?.leading) + Number(rb.results.at(-1)?.leading), 1, `one leader\n${seen()}`);
  });

  it("a state reader whose first join loses its FindCoordinator connection still catches up", async () => {
    const pipeline = uniqueName("reader-rejoin");
    const cuts = new FindCoordinatorCuts();
    const lines: string[] = [];
    const store = new KafkaControllerStateStore({ kafka: faultyClient(cuts), pipeline, log: (line) => lines.push(line), catchUpTimeoutMs: 45_000 });
    broker.cleanup.push(["state store", () => store.close()]);
    cuts.armed = 1;
    await store.start();
    await waitFor(
      () => cuts.cut === 1,
      60_000,
      () => `the reader's join sent FindCoordinator\n${lines.join("\n")}`,
    );
    await store.claimWriter();
    const leader = { address: "127.0.0.1:7103", memberId: "m", generation: 1, sinceMs: Date.now() };
    await store.write({ leader });
    const state = await withTimeout(store.catchUp(), 60_000, () => `catchUp\n${lines.join("\n")}`);
    assert.deepEqual(state.leader, leader, lines.join("\n"));
    assert.ok(
      lines.some((line) => /reader of .* crashed \(.*\) and kafkajs does not restart it; starting a new consumer/.test(line)),
      lines.join("\n"),
    );
  });
});
