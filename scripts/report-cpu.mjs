// `--import`ed into each test process by scripts/run-test-files.mjs: prints the CPU time the process
// used when it exits, and the CPU time of the child processes it ended and waited for (its
// `sluice` children, brokers, browsers: what an end-to-end file mostly costs), which the runner
// takes out of the output and sums up for the lane. CPU time, unlike wall time, hardly depends on
// how loaded the machine is.
import { readFileSync } from "node:fs";

/** cutime + cstime of /proc/self/stat (Linux; clock ticks of 10 ms), or NaN elsewhere. */
function childrenCpuMs() {
  try {
    const stat = readFileSync("/proc/self/stat", "utf8");
    // The fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    // Fields 16 and 17 of proc(5) (cutime, cstime) are the 14th and 15th after the name.
    return (Number(fields[13]) + Number(fields[14])) * 10;
  } catch {
    return Number.NaN;
  }
}

process.on("exit", () => {
  const { user, system } = process.cpuUsage();
  const children = childrenCpuMs();
  process.stderr.write(`\n[test-process-cpu-ms] ${Math.round((user + system) / 1000)}${Number.isFinite(children) ? ` ${children}` : ""}\n`);
});
