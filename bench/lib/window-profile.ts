import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector/promises";

/**
 * A CPU profile of one stretch of a child's life (the timed window of a run), taken with the
 * inspector from inside the process, so that it holds neither the start (module loading, tsx
 * compiling, the group join) nor the wait for SIGTERM that `node --cpu-prof` adds.
 */
export interface WindowProfile {
  /** Stops sampling and writes a `.cpuprofile` (open it in Chrome DevTools or speedscope). */
  stop(path: string): Promise<void>;
}

export async function startWindowProfile(samplingIntervalUs = 200): Promise<WindowProfile> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: samplingIntervalUs });
  await session.post("Profiler.start");
  return {
    async stop(path) {
      const { profile } = await session.post("Profiler.stop");
      session.disconnect();
      await writeFile(path, JSON.stringify(profile));
    },
  };
}
