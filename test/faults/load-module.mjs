// The adaptive throttler's load in the fault harness (spec `adaptive.load.module`): a sawtooth in
// wall-clock time, low for 16 s (the limit climbs) and high for 8 s (it is cut), so failovers land
// at every point of the loop: a successor must restore the limit in force, not initial_limit.
export default function load() {
  return Date.now() % 24_000 < 16_000 ? 0.3 : 0.97;
}
