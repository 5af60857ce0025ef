// Headless Chromium (Debian's package, installed by .ci/run) driven by playwright-core, for the
// browser tests (test/e2e/dashboard-browser, zipkin-browser): where it is, whether to skip, and a
// page in a fresh profile that is closed and removed with the test's cleanups.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

// The machine has no internet: without the background-networking flags Chromium keeps trying to
// reach Google's services and floods the log with refused connections.
const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export const chromiumMissing = !existsSync(CHROMIUM);

/**
 * The `skip` option of a browser test: in CI a missing browser is a broken setup (.ci/run installs
 * it) and the test fails on `assertChromium()`; on a developer's machine, a skip that says how to
 * get it.
 */
export const skipWithoutChromium: string | false = chromiumMissing && !process.env["CI"] ? `${CHROMIUM} not found: apt-get install -y chromium` : false;

export function assertChromium(): void {
  if (chromiumMissing) throw new Error(`${CHROMIUM} is missing: .ci/run installs Debian's chromium before the tests`);
}

/**
 * A page of a Chromium with a profile of its own (1440×900); its close is pushed onto `cleanups`.
 * `timeoutMs` bounds the browser's start.
 */
export async function openPage(cleanups: (() => Promise<void> | void)[], { timeoutMs = 30_000 } = {}): Promise<Page> {
  const profile = mkdtempSync(join(tmpdir(), "sluice-chromium-"));
  const browser: BrowserContext = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1440, height: 900 },
    timeout: timeoutMs,
  });
  cleanups.push(async () => {
    await browser.close();
    rmSync(profile, { recursive: true, force: true });
  });
  return browser.pages()[0] ?? (await browser.newPage());
}
