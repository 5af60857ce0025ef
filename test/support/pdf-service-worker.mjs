// The HTTP side of seed 003's PDF generator (pdf-service.ts), in a worker thread of its own: its
// own event loop and a heap of a few kilobytes, so that what the test process does meanwhile
// (collecting children's output, a garbage collection of the test runner's heap) never delays
// when a call is seen to arrive. The rule is the seed's (examples/correspondence/
// fake-pdf-generator.ts): a call is refused while 10 accepted calls remain inside the last
// 1,000 ms (an accepted call exactly 1,000 ms before still counts: closed windows). Plain
// JavaScript: a worker thread does not get tsx's loader.
import { createServer } from "node:http";
import { setPriority } from "node:os";
import { parentPort, workerData } from "node:worker_threads";

// The generator stands for a system on a machine of its own: it must see a call when the call
// arrives, not when a loaded machine gets round to running it. Its thread alone (setPriority(0) is
// the calling thread on Linux) may be given a priority above the processes it measures.
if (workerData.nice !== undefined) {
  try {
    setPriority(workerData.nice);
  } catch {
    // Not allowed (no CAP_SYS_NICE): the generator runs at the process's priority.
  }
}

const MAX_PER_SECOND = 10;
const WINDOW_MS = 1_000;
const processes = workerData.processes;
const window = [];
const waitingForGo = [];
const server = createServer((request, response) => {
  const at = performance.timeOrigin + performance.now();
  const url = new URL(request.url ?? "/", "http://x");
  if (url.pathname === "/go") {
    waitingForGo.push(() => response.writeHead(200).end("go"));
    if (waitingForGo.length >= processes) for (const go of waitingForGo.splice(0)) go();
    return;
  }
  if (url.pathname !== "/generate") {
    response.writeHead(200).end("ok"); // a caller warming its connections up
    return;
  }
  const call = { at, id: url.searchParams.get("id") ?? "", handedAt: Number(url.searchParams.get("handed") ?? Number.NaN) };
  while (window.length > 0 && window[0] < at - WINDOW_MS) window.shift();
  if (window.length >= MAX_PER_SECOND) {
    parentPort.postMessage({ refused: call });
    response.writeHead(429).end("refused");
    return;
  }
  window.push(at);
  parentPort.postMessage({ accepted: call });
  response.writeHead(200).end("ok");
});
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ port: server.address().port }));

// How late this thread's own event loop ran (turns more than 10 ms late): a call seen at the end of
// such a stall may have arrived any time during it, and the checks must not read the generator's
// own stall as the throttler's (seed-003-check.ts).
let last = performance.now();
const monitor = setInterval(() => {
  const now = performance.now();
  if (now - last > 15) parentPort.postMessage({ stall: { at: performance.timeOrigin + last, ms: now - last } });
  last = now;
}, 5);

parentPort.on("message", (message) => {
  // Messages keep their order: "flushed" comes after every call posted before it.
  if (message === "flush") parentPort.postMessage({ flushed: true });
  if (message === "close") {
    clearInterval(monitor);
    server.closeAllConnections();
    server.close(() => parentPort.close());
  }
});
