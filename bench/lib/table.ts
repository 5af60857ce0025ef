import { formatRatio, formatStat } from "./format.ts";
import type { Figure, GoalResult, GroupResult } from "./results.ts";

/** A plain-text table with a header rule; column widths fit the widest cell. */
export function renderTable(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? "").length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((width) => "-".repeat(width)).join("  "), ...rows.map(line)].join("\n");
}

/**
 * One row per figure and subject: Sluice first, then each peer with Sluice ÷ peer. For a "lower is
 * better" figure a ratio below 1 means Sluice is cheaper; for "higher is better", above 1 is better.
 */
export function figureRows(figures: readonly Figure[]): string[][] {
  const rows: string[][] = [];
  for (const f of figures) {
    const direction = f.better === "lower" ? "↓" : "↑";
    rows.push([f.label, "Sluice", formatStat(f.sluice, f.unit), direction, ""]);
    for (const [name, peer] of Object.entries(f.peers)) {
      rows.push(["", name, formatStat(peer.value, f.unit), "", peer.ratio ? formatRatio(peer.ratio) : ""]);
    }
    for (const [name, text] of Object.entries(f.published ?? {})) rows.push(["", `${name} (published)`, text, "", ""]);
  }
  return rows;
}

export function renderGroup(group: GroupResult): string {
  const parts = [`\n== ${group.title} [${group.status}, ${group.durationS.toFixed(1)} s]`];
  if (group.figures.length > 0) {
    parts.push(renderTable(["figure", "subject", "median (min–max of runs)", "", "Sluice ÷ subject"], figureRows(group.figures)));
  }
  if (group.goals.length > 0) parts.push(renderGoals(group.goals));
  for (const message of group.messages) parts.push(`note: ${message}`);
  return parts.join("\n");
}

export function renderGoals(goals: readonly GoalResult[]): string {
  return renderTable(
    ["goal", "measured", "met"],
    goals.map((g) => [g.text, g.measured, g.met === null ? "not measured" : g.met ? "yes" : "NO"]),
  );
}
