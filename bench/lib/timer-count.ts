import { createHook } from "node:async_hooks";

/**
 * Counts the timers (setTimeout, setInterval, setImmediate) created while `work` runs, however
 * they were created — a library that captured `setTimeout` at load time is counted too, because
 * the count comes from async_hooks' init events rather than from wrapping the globals. Hooks slow
 * promises down, so this runs as its own pass, never inside a timed one.
 */
export async function countTimers(work: () => Promise<void>): Promise<number> {
  let count = 0;
  const hook = createHook({
    init(_id, type) {
      if (type === "Timeout" || type === "Immediate") count += 1;
    },
  });
  hook.enable();
  try {
    await work();
  } finally {
    hook.disable();
  }
  return count;
}
