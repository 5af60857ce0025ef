import { readFileSync } from "node:fs";

/**
 * The dashboard page (GET / of a controller's status server). Its sources are split by concept —
 * dashboard.html (the markup), dashboard.css, and the scripts dashboard-format.js, dashboard-charts.js,
 * dashboard-panels.js and dashboard.js — and joined here into one self-contained page: one request,
 * nothing else to fetch, so a token-protected server needs no rule for assets.
 *
 * The files ship beside this module (no bundler); `pnpm build` copies them into dist
 * (scripts/build-packages.mjs, ASSETS), so every one named by an {{INCLUDE …}} must be listed there.
 */
const PAGE_FILE = "dashboard.html";
const INCLUDE = /\{\{INCLUDE ([a-z][a-z-]*\.(?:css|js))\}\}/g;

let template: string | null = null;

/** The page with its title filled in; the files are read once. */
export function dashboardPage(title: string): string {
  template ??= readAsset(PAGE_FILE).replace(INCLUDE, (_marker, file: string) => readAsset(file).trimEnd());
  return template.replaceAll("{{TITLE}}", escapeHtml(title));
}

function readAsset(file: string): string {
  return readFileSync(new URL(`./${file}`, import.meta.url), "utf8");
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
