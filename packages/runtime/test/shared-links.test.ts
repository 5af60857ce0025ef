import assert from "node:assert/strict";
import { test } from "node:test";
import { SharedLinks } from "../src/job/shared-links.ts";

test("batches delivered under one source signal share one link; it follows the source and the job", () => {
  const job = new AbortController();
  const source = new AbortController();
  const links = new SharedLinks(job.signal);
  const first = links.enter(source.signal);
  links.leave(first);
  const second = links.enter(source.signal);
  assert.equal(second, first);
  source.abort(new Error("partition revoked"));
  assert.equal((second.signal.reason as Error).message, "partition revoked");
  links.leave(second);
});

test("an aborted link is never handed out again; the old one is disposed once its last batch leaves", () => {
  const job = new AbortController();
  const source = new AbortController();
  const links = new SharedLinks(job.signal);
  const old = links.enter(source.signal);
  old.link.abort(new Error("partner failed"));
  const fresh = links.enter(source.signal);
  assert.notEqual(fresh, old);
  assert.equal(fresh.signal.aborted, false);
  links.leave(old);
  links.leave(fresh);
  job.abort(new Error("job stopped"));
  assert.equal(fresh.signal.aborted, true);
});

test("a new source signal (a new assignment) gets its own link; the older batch keeps following its own source", () => {
  const job = new AbortController();
  const before = new AbortController();
  const after = new AbortController();
  const links = new SharedLinks(job.signal);
  const older = links.enter(before.signal);
  const newer = links.enter(after.signal);
  assert.notEqual(newer, older);
  before.abort(new Error("revoked"));
  assert.equal(older.signal.aborted, true, "still linked while its batch runs");
  assert.equal(newer.signal.aborted, false);
  links.leave(older);
  links.leave(newer);
  links.close();
  job.abort(new Error("job stopped"));
  assert.equal(newer.signal.aborted, false, "after close nobody follows the job any more");
});
