import { hostname } from "node:os";

/** A worker's id when none is given: `<host>-<pid>`, unique among live processes on a network. */
export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}`;
}
