// The PDF generator of seed 003: it accepts at most 10 documents in any 1,000 ms and throws on the
// next one (a real service would answer 429). One instance per process; with several processes
// the e2e test runs it as an HTTP service they all call (PDF_GENERATOR_URL), so the rule is global.

export const MAX_PER_SECOND = 10;
const WINDOW_MS = 1_000;

export class ThroughputExceededError extends Error {
  constructor(readonly inWindow: number) {
    super(`PDF generator: ${inWindow} documents accepted in the last ${WINDOW_MS} ms (at most ${MAX_PER_SECOND}); refused`);
  }
}

/** The seed's sliding window: calls accepted in the last second, oldest first. */
export class FakePdfGenerator {
  private readonly accepted: number[] = [];
  refusals = 0;
  generated = 0;

  /** Documents accepted in the last second, as the generator counts them. */
  inWindow(now = Date.now()): number {
    while (this.accepted.length > 0 && (this.accepted[0] ?? 0) < now - WINDOW_MS) this.accepted.shift();
    return this.accepted.length;
  }

  generate(now = Date.now()): void {
    this.inWindow(now);
    if (this.accepted.length >= MAX_PER_SECOND) {
      this.refusals += 1;
      throw new ThroughputExceededError(this.accepted.length);
    }
    this.accepted.push(now);
    this.generated += 1;
  }
}

const local = new FakePdfGenerator();
const startedAt = Date.now();
let reportedAt = startedAt;
let busiest = 0;

/** One line a second in the embedded run: what the generator saw, and how long letters waited. */
function report(waitedMs: number): void {
  const now = Date.now();
  busiest = Math.max(busiest, local.inWindow(now));
  if (now - reportedAt < 1_000) return;
  reportedAt = now;
  const t = ((now - startedAt) / 1000).toFixed(0).padStart(3);
  console.log(
    `t=${t}s generated ${String(local.generated).padStart(4)}, in the last 1 s ${local.inWindow(now)}, most in any 1 s ${busiest}, refused ${local.refusals}, this letter waited ${waitedMs} ms`,
  );
}

/** Generates one letter's PDF: in this process, or at the shared service when PDF_GENERATOR_URL is set. */
export async function generatePdf(letterId: string, waitedMs = 0): Promise<void> {
  const url = process.env["PDF_GENERATOR_URL"];
  if (!url) {
    local.generate();
    report(waitedMs);
    return;
  }
  const response = await fetch(`${url}/generate?id=${encodeURIComponent(letterId)}`, { method: "POST" });
  if (response.status === 429) throw new ThroughputExceededError(Number(await response.text()));
  if (!response.ok) throw new Error(`PDF generator at ${url} answered ${response.status}`);
}
