import { defineComputation } from "@sluice/runtime";

/** Specs of controller-only runs need a module per computation; nothing ever runs it. */
export default defineComputation({
  process() {},
});
