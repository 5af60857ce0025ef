import type { Stat } from "./stats.ts";

/** Three significant digits, thousands separated; small values keep their precision. */
export function formatNumber(value: number): string {
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "n/a" : value > 0 ? "∞" : "-∞";
  const magnitude = Math.abs(value);
  if (magnitude === 0) return "0";
  if (magnitude >= 1000) return Math.round(value).toLocaleString("en-US");
  if (magnitude >= 100) return value.toFixed(0);
  if (magnitude >= 10) return value.toFixed(1);
  if (magnitude >= 1) return value.toFixed(2);
  if (magnitude >= 0.01) return value.toFixed(3);
  return value.toPrecision(2);
}

/** `1.23 (1.20–1.31)`: median and the range of the runs. */
export function formatStat(stat: Stat | null | undefined, unit = ""): string {
  if (!stat) return "—";
  const suffix = unit ? ` ${unit}` : "";
  if (stat.runs.length <= 1) return `${formatNumber(stat.median)}${suffix}`;
  return `${formatNumber(stat.median)}${suffix} (${formatNumber(stat.min)}–${formatNumber(stat.max)})`;
}

export function formatRatio(stat: Stat | null | undefined): string {
  if (!stat) return "—";
  return `×${formatNumber(stat.median)}`;
}

export function formatPercent(fraction: number, digits = 2): string {
  return Number.isFinite(fraction) ? `${(fraction * 100).toFixed(digits)} %` : "n/a";
}
