// The two publishers of seed 003, as one rxjs Observable that fills the `letters` stream:
// everyday correspondence, one letter every 250 ms, and the periodic run, 8 letters every 2 s.
import { interval, map, merge, mergeMap, range } from "rxjs";

const letter = (id: string) => ({ key: id, value: { id, createdAt: Date.now() } });

export default merge(
  interval(250).pipe(map((i) => letter(`steady-${i}`))),
  interval(2_000).pipe(mergeMap((i) => range(0, 8).pipe(map((j) => letter(`burst-${i}-${j}`))))),
);
