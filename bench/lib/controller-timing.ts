import { createHistogram, monitorEventLoopDelay, PerformanceObserver, type RecordableHistogram } from "node:perf_hooks";
import type { Controller } from "@sluice/controller";

/**
 * The controller's own share of a RequestQuota's latency, measured inside its process: from the
 * handler being called until the turn after it settles (when the stream's answer frame has been
 * written: the frame batcher flushes on setImmediate, scheduled before this one), and the event
 * loop's delay — how long a frame that arrived waited before the controller could read it. The two
 * together describe the controller; a client's latency adds its own process and the wire.
 */
export class ControllerTiming {
  private handler: RecordableHistogram = createHistogram();
  private readonly loop = monitorEventLoopDelay({ resolution: 1 });
  /** Off outside a timed window, so that runs measuring CPU per grant pay nothing for it. */
  private on = false;
  /** Garbage-collection pauses in the window: the usual cause of a long event-loop delay here. */
  private gcCount = 0;
  private gcTotalMs = 0;
  private gcMaxMs = 0;
  private readonly gc = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      this.gcCount += 1;
      this.gcTotalMs += entry.duration;
      this.gcMaxMs = Math.max(this.gcMaxMs, entry.duration);
    }
  });

  constructor(controller: Controller) {
    const serve = controller.requestQuota.bind(controller);
    controller.requestQuota = (call, context) => {
      if (!this.on) return serve(call, context);
      const startedAt = process.hrtime.bigint();
      const answer = serve(call, context);
      // Inline arrows, not named ones: the TypeScript loader names a named arrow with defineProperty.
      answer.then(
        () => setImmediate(() => this.handler.record(Number(process.hrtime.bigint() - startedAt) || 1)),
        () => setImmediate(() => this.handler.record(Number(process.hrtime.bigint() - startedAt) || 1)),
      );
      return answer;
    };
  }

  /** Starts a timed window: what was recorded before is dropped. */
  reset(): void {
    this.handler = createHistogram();
    this.loop.enable();
    this.loop.reset();
    this.gcCount = 0;
    this.gcTotalMs = 0;
    this.gcMaxMs = 0;
    this.gc.observe({ entryTypes: ["gc"] });
    this.on = true;
  }

  /** Ends the timed window; milliseconds. */
  read(): {
    count: number;
    handlerP50Ms: number;
    handlerP99Ms: number;
    loopDelayP99Ms: number;
    loopDelayMaxMs: number;
    gcCount: number;
    gcTotalMs: number;
    gcMaxMs: number;
  } {
    this.on = false;
    this.loop.disable();
    this.gc.disconnect();
    const ms = (ns: number) => ns / 1e6;
    return {
      count: this.handler.count,
      handlerP50Ms: ms(this.handler.percentile(50)),
      handlerP99Ms: ms(this.handler.percentile(99)),
      // monitorEventLoopDelay's samples include its own 1 ms resolution timer.
      loopDelayP99Ms: Math.max(0, ms(this.loop.percentile(99)) - 1),
      loopDelayMaxMs: Math.max(0, ms(this.loop.max) - 1),
      gcCount: this.gcCount,
      gcTotalMs: this.gcTotalMs,
      gcMaxMs: this.gcMaxMs,
    };
  }
}
