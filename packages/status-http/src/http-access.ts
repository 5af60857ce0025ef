import { timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";

// Who may read the status endpoints. With a token, every request must show it — as a bearer
// header (Prometheus' `authorization`, curl -H), or as the cookie a browser gets by opening the
// dashboard once with `?token=…` (or through the sign-in page a tokenless visit shows). /metrics and
// /healthz may be left open for scrapers and health checks that cannot send a header.

export interface HttpAccessOptions {
  /** Required on every request; absent = everything open. */
  readonly token?: string | undefined;
  /** /metrics and /healthz answer without the token (the dashboard and /api/snapshot still need it). */
  readonly openMetrics?: boolean | undefined;
  /** The cookie is marked Secure when the server speaks https. */
  readonly secure: boolean;
}

export const TOKEN_COOKIE = "sluice_token";
export const TOKEN_QUERY = "token";
const OPEN_PATHS = new Set(["/metrics", "/healthz"]);

/** How a request fared: let it through, or it has been answered (a redirect or a refusal). */
export type AccessDecision = "allowed" | "answered";

export function checkAccess(request: IncomingMessage, response: ServerResponse, url: URL, options: HttpAccessOptions): AccessDecision {
  const { token } = options;
  if (token === undefined) return "allowed";
  if (options.openMetrics && OPEN_PATHS.has(url.pathname)) return "allowed";
  const expected = Buffer.from(token);

  const offered = url.searchParams.get(TOKEN_QUERY);
  if (offered !== null) {
    if (!matches(offered, expected)) return refuse(request, response, url, "the token in ?token= does not match this server's --token");
    // Into a cookie, and off the address bar (and the browser history) at once.
    url.searchParams.delete(TOKEN_QUERY);
    const cookie = [`${TOKEN_COOKIE}=${encodeURIComponent(token)}`, "Path=/", "HttpOnly", "SameSite=Strict", ...(options.secure ? ["Secure"] : [])];
    response.writeHead(303, { location: `${url.pathname}${url.search}`, "set-cookie": cookie.join("; "), "cache-control": "no-store", "content-length": 0 });
    response.end();
    return "answered";
  }

  const header = request.headers.authorization;
  if (header !== undefined) {
    if (header.startsWith("Bearer ") && matches(header.slice("Bearer ".length), expected)) return "allowed";
    return refuse(request, response, url, 'the "authorization" header does not carry this server\'s token (expected "Bearer <token>")');
  }
  const fromCookie = cookieValue(request.headers.cookie, TOKEN_COOKIE);
  if (fromCookie !== undefined) {
    if (matches(fromCookie, expected)) return "allowed";
    return refuse(request, response, url, "the token this browser remembered no longer matches (the server's --token changed): enter the new one");
  }
  return refuse(request, response, url, "this server requires its token");
}

/** Constant-time, so response timing does not reveal how much of a guess was right. */
function matches(given: string, expected: Buffer): boolean {
  const bytes = Buffer.from(given);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  for (const part of (header ?? "").split(";")) {
    const [key, ...rest] = part.trim().split("=");
    if (key !== name) continue;
    try {
      return decodeURIComponent(rest.join("="));
    } catch {
      return rest.join("=");
    }
  }
  return undefined;
}

function refuse(request: IncomingMessage, response: ServerResponse, url: URL, reason: string): AccessDecision {
  const page = url.pathname === "/" || url.pathname === "/index.html";
  const body = page
    ? signInPage(reason)
    : `401 unauthorized: ${reason}. Send "authorization: Bearer <token>" (the --token of this process), ` +
      `or open the dashboard once with ?${TOKEN_QUERY}=<token>` +
      `${OPEN_PATHS.has(url.pathname) ? "; the operator can leave /metrics and /healthz open with --metrics-open" : ""}\n`;
  response.writeHead(401, {
    "content-type": page ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
    "content-length": Buffer.byteLength(body),
    "www-authenticate": 'Bearer realm="sluice"',
    "cache-control": "no-store",
  });
  response.end(request.method === "HEAD" ? undefined : body);
  return "answered";
}

/** A form that sends the token as ?token=, which the server turns into a cookie. */
function signInPage(reason: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sluice: token required</title>
<style>body{font:15px system-ui,sans-serif;margin:4em auto;max-width:32em;color:#222}input{font:inherit;padding:.3em;width:100%;box-sizing:border-box}button{font:inherit;margin-top:.6em}</style>
</head><body>
<h1>Token required</h1>
<p>${escapeHtml(reason)}. Enter the token this process was started with (<code>--token</code> or <code>$SLUICE_CONTROLLER_TOKEN</code>); it is kept in a cookie for this site.</p>
<form method="get" action="/"><input type="password" name="${TOKEN_QUERY}" autocomplete="current-password" autofocus aria-label="token"><br><button type="submit">Open the dashboard</button></form>
</body></html>
`;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
