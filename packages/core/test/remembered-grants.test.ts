import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { hashRequestId, scopeSeedOf, type IdHasher } from "../src/id-hash.ts";
import { RememberedGrants } from "../src/remembered-grants.ts";

/** Test-only: ids of the same length share one hash, so distinct ids collide on purpose. */
const byLength: IdHasher = (id, out) => {
  out[0] = 7;
  out[1] = id.length;
};

describe("RememberedGrants", () => {
  it("answers a remembered id with its grant (and its slots) until the grace ends, in grant order", () => {
    const grants = new RememberedGrants();
    grants.remember("a", 3, 10, 1_000, 100);
    grants.remember("b", 4, 0, 2_000, 100, { startAt: 1_500, intervalMs: 104.2 });
    assert.deepEqual(grants.get("a"), { amount: 3, waitedMs: 10, expiresAt: 1_000 });
    assert.deepEqual(grants.get("b"), { amount: 4, waitedMs: 0, expiresAt: 2_000, pace: { startAt: 1_500, intervalMs: 104.2 } });
    assert.equal(grants.get("c"), undefined);
    grants.forgetExpired(999);
    assert.equal(grants.size, 2);
    grants.forgetExpired(1_000);
    assert.equal(grants.get("a"), undefined, "expired at its grace");
    assert.equal(grants.get("b")?.amount, 4);
    grants.forgetExpired(5_000);
    assert.equal(grants.size, 0);
    assert.equal(grants.forgottenEarly, 0, "expiry is not forgetting early");
  });

  it("forgets the oldest early past its bound and counts only ids it really forgot", () => {
    const grants = new RememberedGrants();
    for (let i = 0; i < 5; i += 1) grants.remember(`id${i}`, 1, 0, 60_000 + i, 3);
    assert.equal(grants.size, 3);
    assert.equal(grants.forgottenEarly, 2);
    assert.equal(grants.get("id1"), undefined);
    assert.equal(grants.get("id2")?.expiresAt, 60_002);
    // A granted-again id supersedes its earlier grant: dropping that one forgets nothing.
    grants.remember("id2", 1, 5, 60_010, 10);
    grants.remember("x", 1, 0, 60_011, 3);
    assert.equal(grants.forgottenEarly, 3, "the head was id2's superseded grant (nothing forgotten), then id3");
    assert.equal(grants.get("id3"), undefined);
    assert.equal(grants.get("id2")?.waitedMs, 5);
    assert.equal(grants.size, 3);
    grants.remember("y", 1, 0, 60_012, 3);
    assert.equal(grants.forgottenEarly, 4, "id4 forgotten");
    assert.equal(grants.get("id4"), undefined);
    assert.equal(grants.get("x")?.expiresAt, 60_011);
  });

  it("takes distinct ids with the same 64-bit hash for one id (the documented false positive)", () => {
    const grants = new RememberedGrants(byLength);
    grants.remember("ab", 2, 0, 100, 10);
    assert.equal(grants.get("cd")?.amount, 2, "same hash: answered as a retry");
    assert.equal(grants.get("abc"), undefined, "another hash");
    grants.remember("cd", 9, 1, 200, 10);
    assert.equal(grants.size, 1);
    assert.equal(grants.get("ab")?.amount, 9);
    grants.forgetExpired(100);
    assert.equal(grants.get("ab")?.amount, 9, "the superseded grant's expiry forgets nothing");
    grants.forgetExpired(200);
    assert.equal(grants.size, 0);
  });

  it("scoped views share one table: an id counts per scope, the bound and the expiry are the table's", () => {
    const grants = new RememberedGrants();
    const a = grants.scoped("key-a", (bound) => bound);
    const b = grants.scoped("key-b", (bound) => bound);
    a.remember("id", 3, 0, 1_000, 4);
    assert.equal(b.get("id"), undefined, "the same id in another scope is another request");
    assert.equal(grants.get("id"), undefined, "and unscoped too");
    b.remember("id", 5, 2, 2_000, 4);
    assert.deepEqual([a.get("id")?.amount, b.get("id")?.amount], [3, 5]);
    assert.equal(grants.scoped("key-a", (bound) => bound).get("id")?.amount, 3, "a new view of the same scope finds it");
    assert.deepEqual([a.size, b.size, grants.size], [2, 2, 2], "a view's size is the table's");
    for (let i = 0; i < 3; i += 1) b.remember(`more${i}`, 1, 0, 3_000, 4);
    assert.equal(a.get("id"), undefined, "the oldest, in any scope, goes first past the bound");
    assert.equal(a.forgottenEarly, 1);
    b.forgetExpired(2_000);
    assert.equal(b.get("id"), undefined, "expired at its grace");
    assert.equal(grants.size, 3);
  });

  it("tells 200,000 UUID-like ids apart and finds none it was not given", () => {
    const grants = new RememberedGrants();
    const id = (i: number) => `${(i * 2_654_435_761) % 4_294_967_296}`.padStart(10, "0") + `-4a1b-8c2d-${i.toString(16).padStart(12, "0")}`;
    for (let i = 0; i < 200_000; i += 1) grants.remember(id(i), 1 + (i % 7), 0, 60_000, 1_000_000);
    assert.equal(grants.size, 200_000, "no two of them share a hash");
    for (let i = 0; i < 200_000; i += 997) assert.equal(grants.get(id(i))?.amount, 1 + (i % 7));
    let falsePositives = 0;
    for (let i = 200_000; i < 400_000; i += 1) if (grants.get(id(i))) falsePositives += 1;
    assert.equal(falsePositives, 0);
  });
});

describe("hashRequestId", () => {
  it("spreads sequential ids evenly over the table positions and differs for prefixes and swaps", () => {
    const out = new Uint32Array(2);
    const buckets = new Array<number>(256).fill(0);
    for (let i = 0; i < 256_000; i += 1) {
      hashRequestId(`req-${i}`, out);
      buckets[(out[1] as number) & 255] = (buckets[(out[1] as number) & 255] as number) + 1;
    }
    // 1,000 expected per bucket, σ ≈ 31: ±200 is more than 6 σ.
    for (const count of buckets) assert.ok(count > 800 && count < 1_200, `bucket count ${count}`);
    const hashOf = (id: string) => {
      hashRequestId(id, out);
      return `${out[0]}:${out[1]}`;
    };
    assert.notEqual(hashOf("ab"), hashOf("ba"));
    assert.notEqual(hashOf("a"), hashOf("a\u0000"));
    assert.notEqual(hashOf(""), hashOf("\u0000"));
    assert.equal(hashOf("é-ok"), hashOf("é-ok"), "deterministic");
  });

  it("hashes a scope and an id as a pair: no other split of the same code units, nor the bare id, gives the same hash", () => {
    const out = new Uint32Array(2);
    const hashOf = (id: string, scope?: string) => {
      if (scope === undefined) hashRequestId(id, out);
      else hashRequestId(id, out, ...scopeSeedOf(scope));
      return `${out[0]}:${out[1]}`;
    };
    const seen = new Set([
      hashOf("c", "ab"),
      hashOf("bc", "a"),
      hashOf("abc"),
      hashOf("abc", ""),
      hashOf("abc", "\u0000"),
      hashOf("", "abc"),
      hashOf("c", "ba"),
    ]);
    assert.equal(seen.size, 7);
    assert.equal(hashOf("id", "k"), hashOf("id", "k"), "deterministic");
  });
});
