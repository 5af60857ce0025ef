// The commit coalescer alone, with a recording `send` in place of kafkajs: what is merged, what is
// refused, what is retried. The real broker path is covered by rebalance, rewind and
// commit-during-rebalance tests.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CommitCoalescer, type CommitCoalescerOptions } from "../src/commit-coalescer.ts";
import { isKafkaIoError } from "../src/kafka-io-error.ts";
import { PartitionLease } from "../src/partition-lease.ts";

type Offsets = { topic: string; partition: number; offset: string }[];

function coalescer(overrides: Partial<CommitCoalescerOptions> = {}) {
  const sent: Offsets[] = [];
  const sentAt: number[] = [];
  let release: (() => void) | null = null;
  let hold = false;
  const options: CommitCoalescerOptions = {
    groupId: "p.C",
    send: async (offsets) => {
      sent.push(offsets);
      sentAt.push(Date.now());
      if (hold) await new Promise<void>((resolve) => (release = resolve));
    },
    isGroupChange: (error) => error instanceof Error && error.message === "REBALANCE_IN_PROGRESS",
    waitForJoin: () => Promise.resolve(),
    joins: () => 0,
    intervalMs: 0,
    maxAttempts: 3,
    ...overrides,
  };
  return {
    commits: new CommitCoalescer(options),
    sent,
    sentAt,
    holdSends: () => (hold = true),
    releaseSend: () => {
      hold = false;
      release?.();
    },
  };
}

const lease = (partition = 0) => new PartitionLease("events", "t", partition);

test("asks made while a commit is in flight go out together, newest offset per partition", async () => {
  const { commits, sent, holdSends, releaseSend } = coalescer();
  const [p0, p1] = [lease(0), lease(1)];
  holdSends();
  const first = commits.request(p0, "10");
  await Promise.resolve();
  const later = [commits.request(p0, "20"), commits.request(p1, "5"), commits.request(p0, "30"), commits.request(p0, "25")];
  releaseSend();
  await Promise.all([first, ...later]);
  assert.deepEqual(sent, [
    [{ topic: "t", partition: 0, offset: "10" }],
    [
      { topic: "t", partition: 0, offset: "30" },
      { topic: "t", partition: 1, offset: "5" },
    ],
  ]);
  assert.equal(p0.durableOffset, "30");
  assert.equal(p1.durableOffset, "5");
});

test("commits are at least intervalMs apart", async () => {
  const { commits, sentAt } = coalescer({ intervalMs: 60 });
  const p0 = lease();
  await commits.request(p0, "1");
  await commits.request(p0, "2");
  await commits.request(p0, "3");
  assert.equal(sentAt.length, 3);
  for (let i = 1; i < sentAt.length; i++) assert.ok(sentAt[i]! - sentAt[i - 1]! >= 55, `gap ${sentAt[i]! - sentAt[i - 1]!} ms`);
});

test("hurry() sends at once what waits for the interval (a rebalance is starting)", async () => {
  const { commits, sentAt } = coalescer({ intervalMs: 10_000 });
  const p0 = lease();
  await commits.request(p0, "1");
  const second = commits.request(p0, "2");
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(sentAt.length, 1, "the second waits for the interval");
  commits.hurry();
  await second;
  assert.equal(sentAt.length, 2);
  assert.ok(sentAt[1]! - sentAt[0]! < 1_000, "sent long before the interval");
});

test("a lease taken away by a rebalance has its pending offset refused, never sent", async () => {
  const { commits, sent, holdSends, releaseSend } = coalescer();
  const p0 = lease(0);
  const p1 = lease(1);
  holdSends();
  const inFlight = commits.request(p1, "1");
  await Promise.resolve();
  const pending = commits.request(p0, "7");
  p0.revoke(new Error("assigned elsewhere by a rebalance"));
  releaseSend();
  await inFlight;
  await assert.rejects(pending, (error) => isKafkaIoError(error, "PARTITION_REVOKED") && /offset 7 .*partition 0.*assigned elsewhere/.test(error.message));
  assert.deepEqual(
    sent.flat().map((o) => o.partition),
    [1],
  );
});

test("a lease ended by close() still commits what it asked for: the member owns the partition until it leaves", async () => {
  const { commits, sent, holdSends, releaseSend } = coalescer();
  const p0 = lease(0);
  holdSends();
  const first = commits.request(p0, "1");
  await Promise.resolve();
  const second = commits.request(p0, "9");
  p0.revoke(new Error("closed"), { stillMember: true });
  releaseSend();
  await commits.flush();
  await Promise.all([first, second]);
  assert.deepEqual(
    sent.flat().map((o) => o.offset),
    ["1", "9"],
  );
});

test("a new lease of the same partition replaces the old one's pending offset", async () => {
  const { commits, sent, holdSends, releaseSend } = coalescer();
  const other = lease(1);
  const old = lease(0);
  holdSends();
  const inFlight = commits.request(other, "1");
  await Promise.resolve();
  const stale = commits.request(old, "50");
  old.revoke(new Error("moved"));
  const fresh = lease(0);
  const current = commits.request(fresh, "40");
  releaseSend();
  await Promise.all([inFlight, current]);
  await assert.rejects(stale, (error) => isKafkaIoError(error, "PARTITION_REVOKED"));
  assert.deepEqual(sent[1], [{ topic: "t", partition: 0, offset: "40" }]);
});

test("a rebalance answer is retried after the next join; other failures are refused with the attempts", async () => {
  let joins = 0;
  let failures = ["REBALANCE_IN_PROGRESS"];
  const sent: Offsets[] = [];
  const { commits } = coalescer({
    waitForJoin: async () => {
      joins++;
    },
    send: async (offsets) => {
      sent.push(offsets);
      const failure = failures.shift();
      if (failure) throw new Error(failure);
    },
  });
  await commits.request(lease(0), "3");
  assert.equal(joins, 1);
  assert.equal(sent.length, 2, "sent again after the join");

  failures = ["broker gone"];
  await assert.rejects(
    commits.request(lease(2), "8"),
    (error) => isKafkaIoError(error, "COMMIT_FAILED") && /offset 8 .*after 1 attempt\(s\): broker gone/.test(error.message),
  );

  failures = ["REBALANCE_IN_PROGRESS", "REBALANCE_IN_PROGRESS", "REBALANCE_IN_PROGRESS"];
  await assert.rejects(commits.request(lease(3), "9"), (error) => isKafkaIoError(error, "COMMIT_FAILED") && /after 3 attempt\(s\)/.test(error.message));
});

test("a rebalance already answered by a join while the commit was on its way is retried without waiting", async () => {
  let joins = 0;
  let first = true;
  const sent: Offsets[] = [];
  const { commits } = coalescer({
    joins: () => joins,
    waitForJoin: () => new Promise<void>(() => {}), // the join already happened: nothing more will come
    send: async (offsets) => {
      sent.push(offsets);
      if (first) {
        first = false;
        joins++; // the member rejoined while this commit was in flight
        throw new Error("REBALANCE_IN_PROGRESS");
      }
    },
  });
  await commits.request(lease(0), "4");
  assert.equal(sent.length, 2);
});

test("with no join to follow a rebalance answer (the member is leaving), the offset is not sent again", async () => {
  const sent: Offsets[] = [];
  const { commits } = coalescer({
    waitForJoin: () => Promise.reject(new Error("closed")),
    send: async (offsets) => {
      sent.push(offsets);
      throw new Error("REBALANCE_IN_PROGRESS");
    },
  });
  const p0 = lease(0);
  p0.revoke(new Error("closed"), { stillMember: true });
  await assert.rejects(commits.request(p0, "6"), (error) => isKafkaIoError(error, "COMMIT_FAILED"));
  assert.equal(sent.length, 1);
});

test("a lease ended by close() stops committing once the group moves on (endMembership)", async () => {
  const { commits, sent } = coalescer();
  const p0 = lease(0);
  p0.revoke(new Error("closed"), { stillMember: true });
  p0.endMembership();
  await assert.rejects(commits.request(p0, "3"), (error) => isKafkaIoError(error, "PARTITION_REVOKED"));
  assert.equal(sent.length, 0);
});
