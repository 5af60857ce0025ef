import { loadSourceOf, type LoadSource, type LoadSpec } from "@sluice/controller";
import type { PipelineSpec } from "@sluice/spec";

/**
 * The controller's adaptive load sources, but a `load.module` is imported only after
 * `beforeModules` has run: the `sluice` bin registers tsx there (a `.ts` load module), and registers
 * it only when a module is about to load. A dynamic spec may name a module at any time (`sluice
 * reconfigure`), so the wait is in `read`, not at start.
 */
export function loadSourcesOf(baseDir: string, beforeModules: (() => Promise<void>) | undefined): (throttlerId: string, load: LoadSpec) => LoadSource {
  return (_throttlerId, load) => {
    const source = loadSourceOf(load, { baseDir });
    if (beforeModules === undefined || load.module === undefined) return source;
    return {
      description: source.description,
      async read(signal) {
        // `read` must never throw (LoadSource's contract): the adaptive loop would end the controller.
        try {
          await beforeModules();
        } catch (error) {
          const why = error instanceof Error ? error.message : String(error);
          return { ok: false, reason: `registering tsx to load ${source.description} failed (${why}); the next reading tries again` };
        }
        return source.read(signal);
      },
    };
  };
}

/**
 * Whether a throttler of the spec reads its load from a module: the CLI then registers tsx before the
 * controller starts, so the first reading is not late by tsx's own start (a module added later by
 * `sluice reconfigure` still waits in `read`).
 */
export function namesLoadModule(spec: PipelineSpec): boolean {
  return Object.values(spec.dynamic_spec.throttlers).some((throttler) => throttler.adaptive?.load.module !== undefined);
}
