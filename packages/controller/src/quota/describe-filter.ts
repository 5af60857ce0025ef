import { SluiceError } from "@sluice/core";
import type { DescribeThrottlersFilter } from "@sluice/protocol";
import type { ControllerSnapshot } from "./controller-snapshot.ts";
import type { KeyDescription } from "./keyed/keyed-throttler.ts";

// DescribeThrottlers for one throttler, or for one key of a keyed throttler (docs/design.md §11.4): the
// snapshot narrowed to that throttler, with the key's own figures in its keyed section. A filter
// naming something that is not there is refused saying what is.

export function describedFor(
  snapshot: ControllerSnapshot,
  filter: DescribeThrottlersFilter,
  describeKey: (throttlerId: string, key: string) => KeyDescription | undefined,
): ControllerSnapshot {
  const { throttlerId, key } = filter;
  if (throttlerId === undefined) {
    if (key === undefined) return snapshot;
    throw new SluiceError("INVALID_REQUEST", `DescribeThrottlers for key ${JSON.stringify(key)} needs the id of the keyed throttler it belongs to`, { key });
  }
  const throttler = snapshot.throttlers.find((t) => t.id === throttlerId);
  if (!throttler) {
    const declared = snapshot.throttlers.map((t) => t.id);
    throw new SluiceError(
      "UNKNOWN_THROTTLER",
      `DescribeThrottlers: throttler ${JSON.stringify(throttlerId)} is not declared in dynamic_spec.throttlers (declared: ${declared.length > 0 ? declared.map((id) => JSON.stringify(id)).join(", ") : "none"})`,
      { throttlerId, declared },
    );
  }
  if (key === undefined) return { ...snapshot, throttlers: [throttler] };
  const described = throttler.keyed ? describeKey(throttlerId, key) : undefined;
  if (!throttler.keyed || !described) {
    throw new SluiceError(
      "INVALID_REQUEST",
      `DescribeThrottlers: throttler ${JSON.stringify(throttlerId)} is not keyed, so it has no key ${JSON.stringify(key)}; ask for the throttler without a key`,
      { throttlerId, key },
    );
  }
  return { ...snapshot, throttlers: [{ ...throttler, keyed: { ...throttler.keyed, key: described } }] };
}
