import { readdirSync, readFileSync } from "node:fs";

// Who used the machine's cores during a timed window, read from Linux's own accounting, so that a
// latency figure can say what share of the 2 cores was the server's, the load generators' and
// everyone else's, and how long each process's main thread was ready to run but had no core (the
// part of a latency that is the machine's, not the code's). /proc/<pid>/task/<tid>/schedstat holds
// "ns on a CPU, ns waiting on a run queue, time slices" per thread; /proc/stat the machine's ticks.

export interface ProcessTimes {
  /** ns on a CPU, all threads (JavaScript, libuv's pool, V8's GC and compiler threads). */
  readonly cpuNs: number;
  /** ns the main thread (the event loop) was runnable but waited for a CPU. */
  readonly mainWaitNs: number;
  /** ns the main thread ran. */
  readonly mainCpuNs: number;
}

export interface MachineTimes {
  /** Ticks the cores were busy (user, nice, system, irq, softirq, steal), all cores together. */
  readonly busyTicks: number;
  /** Every tick of every core, idle included. */
  readonly totalTicks: number;
}

export interface Snapshot {
  readonly atMs: number;
  readonly machine: MachineTimes | null;
  readonly processes: ReadonlyMap<number, ProcessTimes>;
}

/** What a window's two snapshots say, in cores (1 = one core busy for the whole window). */
export interface WindowShares {
  /** Cores the machine had (what the shares below are out of). */
  readonly cores: number;
  /** Cores busy, whoever used them. */
  readonly machineBusy: number;
  /** Cores each watched process used, by pid. */
  readonly byPid: ReadonlyMap<number, number>;
  /** Milliseconds per second each watched process's main thread waited for a CPU while runnable. */
  readonly mainWaitMsPerSByPid: ReadonlyMap<number, number>;
}

function schedstat(path: string): [number, number] | null {
  try {
    const [cpu, wait] = readFileSync(path, "utf8").trim().split(/\s+/).map(Number);
    return cpu === undefined || wait === undefined ? null : [cpu, wait];
  } catch {
    return null; // the thread ended between the listing and the read, or no schedstat here
  }
}

export function processTimes(pid: number): ProcessTimes | null {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return null;
  }
  let cpuNs = 0;
  let mainWaitNs = 0;
  let mainCpuNs = 0;
  for (const tid of tids) {
    const times = schedstat(`/proc/${pid}/task/${tid}/schedstat`);
    if (!times) continue;
    cpuNs += times[0];
    if (tid === String(pid)) {
      mainCpuNs = times[0];
      mainWaitNs = times[1];
    }
  }
  return { cpuNs, mainWaitNs, mainCpuNs };
}

export function machineTimes(): MachineTimes | null {
  try {
    const line = readFileSync("/proc/stat", "utf8")
      .split("\n")
      .find((l) => l.startsWith("cpu "));
    if (!line) return null;
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = line.trim().split(/\s+/).slice(1).map(Number);
    const busyTicks = user + nice + system + irq + softirq + steal;
    return { busyTicks, totalTicks: busyTicks + idle + iowait };
  } catch {
    return null;
  }
}

export function snapshot(pids: readonly number[]): Snapshot {
  const processes = new Map<number, ProcessTimes>();
  for (const pid of pids) {
    const times = processTimes(pid);
    if (times) processes.set(pid, times);
  }
  return { atMs: performance.now(), machine: machineTimes(), processes };
}

export function windowShares(before: Snapshot, after: Snapshot, cores: number): WindowShares {
  const wallNs = (after.atMs - before.atMs) * 1e6;
  const byPid = new Map<number, number>();
  const mainWaitMsPerSByPid = new Map<number, number>();
  for (const [pid, end] of after.processes) {
    const start = before.processes.get(pid);
    if (!start || !(wallNs > 0)) continue;
    byPid.set(pid, (end.cpuNs - start.cpuNs) / wallNs);
    mainWaitMsPerSByPid.set(pid, ((end.mainWaitNs - start.mainWaitNs) / wallNs) * 1000);
  }
  const m0 = before.machine;
  const m1 = after.machine;
  const total = m0 && m1 ? m1.totalTicks - m0.totalTicks : 0;
  const machineBusy = m0 && m1 && total > 0 ? ((m1.busyTicks - m0.busyTicks) / total) * cores : Number.NaN;
  return { cores, machineBusy, byPid, mainWaitMsPerSByPid };
}
