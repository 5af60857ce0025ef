// Prints the results section of bench/README.md from a results file, so that the README's tables
// are copied from a run rather than typed:  node --import tsx bench/render-markdown.ts [results.json]
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { formatNumber, formatRatio, formatStat } from "./lib/format.ts";
import { BENCH_DIR } from "./lib/paths.ts";
import type { BenchResults } from "./lib/results.ts";

const path = process.argv[2] ?? join(BENCH_DIR, "results.json");
const results = JSON.parse(readFileSync(path, "utf8")) as BenchResults;
const lines: string[] = [];
const cell = (text: string) => text.replaceAll("|", "\\|");
const { machine } = results;

lines.push(
  `Run: \`pnpm bench\` (${results.mode}), ${results.startedAt}, ${formatNumber(results.durationS)} s. ` +
    `Machine: ${machine.nproc} cores (\`nproc\`), ${machine.cpuModel}, ${formatNumber(machine.memoryGiB)} GiB, node ${machine.node}, ${machine.platform}; ` +
    `1-minute load average ${machine.loadAverageAtStart} at the start (the cores are shared with other work).`,
  "",
  `Versions: ${Object.entries(results.versions)
    .map(([name, version]) => `${name} ${version}`)
    .join(", ")}.`,
  "",
  "### Goals",
  "",
  "| goal | measured | met |",
  "|---|---|---|",
);
for (const group of results.groups) {
  for (const goal of group.goals)
    lines.push(`| ${cell(goal.text)} | ${cell(goal.measured)} | ${goal.met === null ? "not measured" : goal.met ? "yes" : "**no**"} |`);
}
for (const group of results.groups) {
  lines.push(
    "",
    `### ${group.title}`,
    "",
    `Status: ${group.status}, ${formatNumber(group.durationS)} s.`,
    "",
    "| figure | subject | median (min–max of runs) | Sluice ÷ subject |",
    "|---|---|---|---|",
  );
  for (const figure of group.figures) {
    const arrow = figure.better === "lower" ? "lower is better" : "higher is better";
    lines.push(`| ${cell(figure.label)} (${arrow}) | **Sluice** | ${cell(formatStat(figure.sluice, figure.unit))} | |`);
    for (const [name, peer] of Object.entries(figure.peers)) {
      lines.push(
        `| | ${cell(name)}${peer.note ? ` — ${cell(peer.note)}` : ""} | ${cell(formatStat(peer.value, figure.unit))} | ${peer.ratio ? formatRatio(peer.ratio) : ""} |`,
      );
    }
    for (const [name, text] of Object.entries(figure.published ?? {})) lines.push(`| | ${cell(name)} (published, not measured here) | ${cell(text)} | |`);
  }
  const notes = group.figures.filter((figure) => figure.note).map((figure) => `- *${figure.label}*: ${figure.note}`);
  if (notes.length > 0) lines.push("", ...notes);
  for (const message of group.messages) lines.push(`- Note: ${message}`);
}
process.stdout.write(`${lines.join("\n")}\n`);
