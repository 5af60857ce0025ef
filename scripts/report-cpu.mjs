// `--import`ed into each test process by scripts/run-test-files.mjs: prints the CPU time the process
// used when it exits, which the runner takes out of the output and sums up for the lane. CPU time,
// unlike wall time, hardly depends on how loaded the machine is.
process.on("exit", () => {
  const { user, system } = process.cpuUsage();
  process.stderr.write(`\n[test-process-cpu-ms] ${Math.round((user + system) / 1000)}\n`);
});
