// The input of bench/smooth-table.ts: seed 003's two publishers, with the everyday stream doubled so
// that the throttler stays backlogged (what calls/s then measures is what the throttler delivers):
// one letter every 125 ms, and 8 letters every 2 s, 12 letters/s on average against a limit of 10.
import { interval, map, merge, mergeMap, range } from "rxjs";

const letter = (id: string) => ({ key: id, value: { id } });

export default merge(
  interval(125).pipe(map((i) => letter(`steady-${i}`))),
  interval(2_000).pipe(mergeMap((i) => range(0, 8).pipe(map((j) => letter(`burst-${i}-${j}`))))),
);
