import assert from "node:assert/strict";
import { test } from "node:test";
import { LinkedAbort } from "../src/job/linked-abort.ts";

test("aborts with the reason of whichever parent aborts first", () => {
  const a = new AbortController();
  const b = new AbortController();
  const linked = new LinkedAbort([a.signal, b.signal]);
  assert.equal(linked.signal.aborted, false);
  b.abort(new Error("partition revoked"));
  a.abort(new Error("job stopped"));
  assert.equal(linked.signal.aborted, true);
  assert.equal((linked.signal.reason as Error).message, "partition revoked");
});

test("is aborted at once when a parent already is", () => {
  const a = new AbortController();
  a.abort("gone");
  const linked = new LinkedAbort([new AbortController().signal, a.signal]);
  assert.equal(linked.signal.reason, "gone");
});

test("after dispose a parent's abort no longer reaches it, and its own abort() does not touch the parents", () => {
  const a = new AbortController();
  const linked = new LinkedAbort([a.signal]);
  linked.dispose();
  a.abort();
  assert.equal(linked.signal.aborted, false);
  const b = new AbortController();
  const other = new LinkedAbort([b.signal]);
  other.abort(new Error("one throttler failed"));
  assert.equal(other.signal.aborted, true);
  assert.equal(b.signal.aborted, false);
});
