import { isSluiceError, systemClock, type SluiceError } from "@sluice/core";
import { controllerClient, parseControllerList } from "../controller-client.ts";
import { controllerTlsSpecSchema, extractDynamicSpec, parseJson, validateDynamicSpec, type ControllerTlsSpec, type SpecIssue } from "@sluice/spec";
import { readFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { EXIT_FAILURE, EXIT_OK, type Cli } from "../cli.ts";
import { loadClientTls, type ClientTlsFlags } from "../tls-options.ts";
import { CONTROLLER_TOKEN_ENV } from "./controller.ts";

export interface ReconfigureOptions extends ClientTlsFlags {
  readonly controller: string;
  readonly token?: string;
}

/** One UpdateDynamicSpec call; the controller answers at once (it validates and applies, nothing waits). */
const UPDATE_DEADLINE_MS = 10_000;

export async function reconfigureAction(cli: Cli, file: string, options: ReconfigureOptions): Promise<void> {
  const fail = (lines: readonly string[]) => {
    for (const line of lines) cli.stderr(`${line}\n`);
    cli.setExitCode(EXIT_FAILURE);
  };
  const path = resolve(file);
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    return fail([`sluice reconfigure: cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`]);
  }
  const parsed = parseJson(text);
  if (!parsed.ok) {
    return fail([`✗ (root): ${path} is not valid JSON at line ${parsed.line}, column ${parsed.column}: ${parsed.message}`]);
  }

  // Checked here first, so a typo is reported with its path without touching the controller. A
  // whole pipeline spec also names its computations, which bounds dynamic_spec.computations.
  const dynamicSpec = extractDynamicSpec(parsed.value);
  const computations = computationNames(parsed.value, dynamicSpec);
  const local = validateDynamicSpec(dynamicSpec, {
    pathPrefix: "dynamic_spec",
    ...(computations ? { computations } : {}),
  });
  if (!local.ok) {
    return fail([...issueLines(local.issues), `sluice reconfigure: ${countIssues(local.issues)} in ${path}; nothing was sent`]);
  }

  // A whole pipeline spec brings its controller.tls (paths relative to it); the flags override it.
  const specTls = controllerTlsOf(parsed.value);
  if (!specTls.ok) return fail([`✗ controller.tls: ${specTls.message}`, `sluice reconfigure: nothing was sent`]);
  let tls: Awaited<ReturnType<typeof loadClientTls>>;
  try {
    tls = await loadClientTls(options, { tls: specTls.tls, dir: dirname(path) });
  } catch (error) {
    return fail([`✗ ${error instanceof Error ? error.message : String(error)}`, `sluice reconfigure: nothing was sent`]);
  }
  const token = options.token ?? (process.env[CONTROLLER_TOKEN_ENV] || undefined);
  const client = controllerClient(parseControllerList(options.controller), {
    ...(token !== undefined ? { token } : {}),
    ...(tls !== undefined ? { tls } : {}),
  });
  try {
    const { version } = await client.updateDynamicSpec(JSON.stringify(dynamicSpec), {
      deadlineAt: systemClock.now() + UPDATE_DEADLINE_MS,
    });
    cli.stdout(`dynamic_spec version ${version} applied on ${client.currentAddress}\n`);
    cli.setExitCode(EXIT_OK);
  } catch (error) {
    fail(refusalLines(error, options.controller));
  } finally {
    client.close();
  }
}

function refusalLines(error: unknown, address: string): string[] {
  if (!isSluiceError(error)) return [`sluice reconfigure: ${error instanceof Error ? error.message : String(error)}`];
  switch (error.code) {
    case "SPEC_INVALID": {
      const issues = issuesOf(error);
      if (issues.length === 0) return [`sluice reconfigure: the controller at ${address} refused the dynamic_spec: ${error.text}`];
      return [...issueLines(issues), `sluice reconfigure: the controller at ${address} refused the dynamic_spec (${countIssues(issues)}); nothing changed`];
    }
    case "CONTROLLER_UNAVAILABLE":
    case "QUOTA_TIMEOUT":
      return [`sluice reconfigure: ${error.text}`, `nothing was applied; is \`sluice controller\` running at ${address}?`];
    case "UNAUTHENTICATED":
      return [`sluice reconfigure: ${error.message}`, "nothing was applied"];
    default:
      return [`sluice reconfigure: the controller at ${address} refused: ${error.message}`];
  }
}

/** The controller's issues travel with its SPEC_INVALID error (figures metadata), as {path, message}. */
function issuesOf(error: SluiceError): SpecIssue[] {
  const issues = error.details["issues"];
  if (!Array.isArray(issues)) return [];
  return issues.filter(
    (issue): issue is SpecIssue => typeof issue === "object" && issue !== null && typeof issue.path === "string" && typeof issue.message === "string",
  );
}

function issueLines(issues: readonly SpecIssue[]): string[] {
  return issues.map((issue) => `✗ ${issue.path}: ${issue.message}`);
}

function countIssues(issues: readonly unknown[]): string {
  return `${issues.length} ${issues.length === 1 ? "issue" : "issues"}`;
}

/** Computation names of a whole pipeline spec; undefined for a bare dynamic_spec (the controller checks them). */
function computationNames(document: unknown, dynamicSpec: unknown): string[] | undefined {
  if (document === dynamicSpec || typeof document !== "object" || document === null) return undefined;
  const computations = (document as Record<string, unknown>)["computations"];
  if (typeof computations !== "object" || computations === null || Array.isArray(computations)) return undefined;
  return Object.keys(computations);
}

/** controller.tls of a whole pipeline spec (none for a bare dynamic_spec), checked by the spec's own rule. */
function controllerTlsOf(document: unknown): { ok: true; tls: ControllerTlsSpec | undefined } | { ok: false; message: string } {
  if (typeof document !== "object" || document === null) return { ok: true, tls: undefined };
  const controller = (document as Record<string, unknown>)["controller"];
  if (typeof controller !== "object" || controller === null) return { ok: true, tls: undefined };
  const raw = (controller as Record<string, unknown>)["tls"];
  if (raw === undefined) return { ok: true, tls: undefined };
  const parsed = controllerTlsSpecSchema.safeParse(raw);
  if (parsed.success) return { ok: true, tls: parsed.data };
  return { ok: false, message: parsed.error.issues.map((issue) => `${issue.path.join(".") || "(tls)"}: ${issue.message}`).join("; ") };
}
