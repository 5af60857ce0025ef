import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { QuotaBucket } from "../src/index.ts";
import { Advance, Cancel, commands, configArb, Reconfigure } from "./quota-bucket-model-commands.ts";
import { Model, type Real } from "./quota-bucket-reference-model.ts";

/**
 * Model-based test of QuotaBucket (issue 9, item 15): random sequences of operations run against the
 * real bucket and a small reference model of what each request id is doing. The model predicts what it
 * can predict exactly (every admission, every cancel and detach, when deadlines fire, what is
 * remembered), and after every step the invariants are checked:
 *
 * - no request id is granted twice within its grace;
 * - net granted ≤ capacity + limit × elapsed + releases + one request's overdraft;
 * - the queue never exceeds max_queue_size;
 * - memory (entries, queue entries, timers, remembered ids) is bounded by live requests and remembered ids;
 * - every request ends: granted, refused, cancelled, or timed out exactly at its deadline.
 *
 * Which waiting request is granted when is the scheduler's business (tested elsewhere); the model only
 * checks that a grant goes to a request that was waiting.
 */

describe("QuotaBucket model-based test", () => {
  it("keeps every invariant after every step of random operations, and every request ends", () => {
    fc.assert(
      fc.property(configArb, fc.commands(commands, { maxCommands: 80, size: "max" }), (config, cmds) => {
        const model = new Model(config);
        const real: Real = { bucket: new QuotaBucket("model", config, 0) };
        fc.modelRun(() => ({ model, real }), cmds);
        // The end: past every deadline and grace, then without a limit, nothing may still wait.
        new Advance(10_000).run(model, real);
        new Reconfigure({ ...model.config, limit: null, useClassWeightsAsLimit: false, maxGrantAmount: null }).run(model, real);
        assert.equal(model.pending(), 0, "every request ended");
        // Cancel what is still detached: then net granted is exactly what settled plus what was tried.
        for (const [key, r] of model.requests) {
          if (r.status === "detached") new Cancel([...model.requests.keys()].indexOf(key)).run(model, real);
        }
        const final = real.bucket.snapshot(model.now);
        const net = final.counters.granted - final.counters.refunded;
        const expected = model.settledAmount + model.triedAmount;
        assert.ok(Math.abs(net - expected) <= 1e-6 * Math.max(1, expected), `net granted ${net}, settled + tried ${expected}: refunds match grants`);
      }),
      { numRuns: 400, includeErrorInReport: true },
    );
  });
});
