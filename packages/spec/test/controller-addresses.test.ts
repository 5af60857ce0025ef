import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { controllerAddressesOf, validatePipelineSpec } from "@sluice/spec";

const base = {
  pipeline: "group",
  streams: { in: { topic: "in" } },
  computations: { C: { module: "./c.ts", inputs: ["in"] } },
};

// docs/design.md §5.2: `controller.addresses` lists a failover group; `controller.address` stays valid for one.
describe("controller.addresses", () => {
  it("lists every controller of a failover group, in order", () => {
    const result = validatePipelineSpec({ ...base, controller: { addresses: ["127.0.0.1:7070", "127.0.0.1:7071"] } });
    assert.ok(result.ok);
    assert.deepEqual(controllerAddressesOf(result.value.controller), ["127.0.0.1:7070", "127.0.0.1:7071"]);
  });

  it("keeps controller.address valid for one controller", () => {
    const result = validatePipelineSpec({ ...base, controller: { address: "127.0.0.1:7070" } });
    assert.ok(result.ok);
    assert.deepEqual(controllerAddressesOf(result.value.controller), ["127.0.0.1:7070"]);
    assert.deepEqual(controllerAddressesOf(undefined), []);
  });

  it("refuses both at once, an empty list, a duplicate and a malformed address, each at its path", () => {
    const issuesOf = (controller: unknown) => {
      const result = validatePipelineSpec({ ...base, controller });
      assert.equal(result.ok, false);
      return result.ok ? [] : result.issues.map((i) => `${i.path}: ${i.message}`);
    };
    assert.match(issuesOf({ address: "127.0.0.1:1", addresses: ["127.0.0.1:2"] }).join("\n"), /controller\.addresses: set either "address" .* not both/);
    assert.match(issuesOf({ addresses: [] }).join("\n"), /controller\.addresses: .*at least one/);
    assert.match(issuesOf({ addresses: ["127.0.0.1:2", "127.0.0.1:2"] }).join("\n"), /controller\.addresses\[1\]: "127\.0\.0\.1:2" is listed twice/);
    assert.match(issuesOf({ addresses: ["nope"] }).join("\n"), /controller\.addresses\[0\]: .*host:port/);
  });
});
