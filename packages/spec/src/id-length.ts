/**
 * The longest id Sluice accepts — throttler and class ids in a spec, client and request ids on the
 * wire — in UTF-16 code units. Ids are echoed in messages, spans and logs and kept while requests
 * wait or are remembered; a megabyte id would carry a megabyte into each of those.
 */
export const MAX_ID_LENGTH = 1024;

/** An id as a message shows it: quoted, and cut to its first 32 characters when longer than MAX_ID_LENGTH. */
export function quoteId(id: string): string {
  return id.length > MAX_ID_LENGTH ? `${JSON.stringify(id.slice(0, 32))}… (${id.length} characters)` : JSON.stringify(id);
}
