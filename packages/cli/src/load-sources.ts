import { loadSourceOf, type LoadSource, type LoadSpec } from "@sluice/controller";

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
        await beforeModules();
        return source.read(signal);
      },
    };
  };
}
