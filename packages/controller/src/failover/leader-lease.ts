/**
 * The fence of a leader that may have been deposed without knowing it (SIGSTOP, cut off from Kafka):
 * it serves only while its generation was confirmed by the group coordinator less than `leaseMs` ago.
 *
 * Why this is safe: the coordinator expires a member `session_timeout` after the last heartbeat it
 * received, and a successor is elected only after that. A confirmation arrives after the coordinator
 * received that heartbeat, so with `leaseMs` well below the session timeout the lease ends first.
 */
export class LeaderLease {
  private generation: number | null = null;
  private confirmedAt = Number.NEGATIVE_INFINITY;

  constructor(readonly leaseMs: number) {}

  /** A new leadership of `generation`, confirmed at `now` (the group sync that elected it). */
  grant(generation: number, now: number): void {
    this.generation = generation;
    this.confirmedAt = now;
  }

  /** A heartbeat of `generation` was accepted; a confirmation of another generation renews nothing. */
  confirm(generation: number, now: number): void {
    if (generation === this.generation) this.confirmedAt = Math.max(this.confirmedAt, now);
  }

  revoke(): void {
    this.generation = null;
    this.confirmedAt = Number.NEGATIVE_INFINITY;
  }

  get heldGeneration(): number | null {
    return this.generation;
  }

  valid(now: number): boolean {
    return this.generation !== null && now < this.confirmedAt + this.leaseMs;
  }

  /** Epoch ms the lease ends unless renewed; null when none is held. */
  expiresAt(): number | null {
    return this.generation === null ? null : this.confirmedAt + this.leaseMs;
  }
}
