// Fills the `tasks` stream: task `index` of the run. Costs vary widely, as seed 004's queries did:
// 1, 2 or 3 cores, for 0.2 s to 2 s each (a log-uniform spread), so no fixed number of tasks at once
// is right for long — 16 one-core tasks and 16 three-core tasks are a 3× different load.
// Deterministic: the same index is always the same task, so runs can be compared.

/** A small deterministic hash of the index into [0, 1). */
function unit(index: number, salt: number): number {
  let h = (index * 2654435761 + salt * 40503) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 2246822507) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 3266489909) >>> 0;
  return ((h ^ (h >>> 16)) >>> 0) / 2 ** 32;
}

const CORES = [1, 1, 2, 2, 2, 3] as const;

export interface ClusterTask {
  readonly cores: number;
  /** Core-seconds of work: seconds on an idle cluster × cores. */
  readonly work: number;
}

export function taskAt(index: number): ClusterTask {
  const cores = CORES[Math.floor(unit(index, 1) * CORES.length)] ?? 1;
  const seconds = 0.2 * 10 ** unit(index, 2); // 0.2 s … 2 s
  return { cores, work: Math.round(cores * seconds * 1000) / 1000 };
}

export default (index: number) => ({ key: `task-${index}`, value: taskAt(index) });
