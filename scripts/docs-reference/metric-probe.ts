// A stand-in for any snapshot a metric writer reads: every property is the probe again, calling it
// returns the probe, it iterates and maps as a one-element array of itself, a record of it has one
// entry, and it converts to the number 1. Handed to the real writers, it makes each one write every
// family it can write with one series per label set, so the reference sees each family's labels
// without a running process.
// A writer that skips a family on a specific value (a `typeof x === "number"` test) would skip it
// here too; the completeness test (every metric name literal in packages/*/src) catches that.

// The probe is deliberately untyped: it stands in for every snapshot type at once.
export type Probe = unknown;

export function metricProbe(): Probe {
  const elements: unknown[] = [];
  const handler: ProxyHandler<() => void> = {
    get(_target, property) {
      if (property === Symbol.toPrimitive) return () => 1;
      if (property === "then") return undefined; // not a thenable: `await probe` must not hang
      if (property === "toJSON") return () => 1;
      if (typeof property === "symbol" || property === "length" || property in Array.prototype) {
        const value: unknown = Reflect.get(elements, property);
        return typeof value === "function" ? (value as (...args: unknown[]) => unknown).bind(elements) : value;
      }
      return probe;
    },
    apply() {
      return probe;
    },
    // Object.entries / Object.values / for…in over a record of the snapshot see one entry.
    ownKeys() {
      return ["probe"];
    },
    getOwnPropertyDescriptor(_target, property) {
      return property === "probe" ? { value: probe, enumerable: true, configurable: true, writable: true } : undefined;
    },
  };
  const probe: unknown = new Proxy(() => undefined, handler);
  elements.push(probe);
  return probe;
}
