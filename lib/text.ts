// The one rule for cutting text to a length: never inside a surrogate pair (an
// emoji stays whole or goes whole), and a cut text says that it was cut. Each
// caller names its own limit (Slack 4,000 per message, Discord 2,000, a tool's
// output for the summariser 400…); replies are split into several messages,
// anything else is clipped.

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff;

/** A cut at or before `at` that does not separate a surrogate pair. */
export function safeCut(text: string, at: number): number {
  return isHighSurrogate(text.charCodeAt(at - 1)) ? at - 1 : at;
}

/** `text` within `limit` UTF-16 units; cut, it ends in `marker`, which counts within the limit. */
export function clip(text: string, limit: number, marker = "…"): string {
  return text.length <= limit ? text : `${text.slice(0, safeCut(text, Math.max(0, limit - marker.length)))}${marker}`;
}

/**
 * `text` as parts of at most `limit` units, cut at a line break, else a space
 * (the separator is dropped), else hard; never inside a surrogate pair.
 */
export function splitText(text: string, limit: number): string[] {
  const parts: string[] = [];
  let rest = text;
  while (rest.length > limit) {
    let cut = rest.lastIndexOf("\n", limit);
    if (cut < limit / 2) cut = rest.lastIndexOf(" ", limit);
    const atSeparator = cut >= limit / 2;
    if (!atSeparator) cut = safeCut(rest, limit);
    parts.push(rest.slice(0, cut));
    rest = rest.slice(atSeparator ? cut + 1 : cut);
  }
  parts.push(rest);
  return parts;
}
