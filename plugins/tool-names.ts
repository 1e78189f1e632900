// The names the model calls tools by: `<alias>__<tool>`, which every provider
// must accept (OpenAI and Anthropic take letters, digits, `_` and `-`, at most
// 64 characters). Declared tools fit by construction; a discovered tool whose
// name does not fit, or is taken, is renamed by one rule, so the same list
// always gives the same names.

export const SEPARATOR = "__";
const MAX_NAME = 64;
const VALID = /^[A-Za-z0-9_-]+$/;
const INVALID_CHARS = /[^A-Za-z0-9_-]/g;

export interface NamedTool<T> {
  /** What the model calls it. */
  name: string;
  tool: T;
}

export interface Naming<T> {
  named: NamedTool<T>[];
  /** Sentences for `status`: each tool renamed or left out, and why. */
  notes: string[];
}

/**
 * Names a mount's tools. A valid name that is free is kept, and valid names
 * are placed first, so a renamed tool never takes a name the server gave
 * another. Any other tool gets its name with each character outside
 * [A-Za-z0-9_-] made `_`; if that is too long or taken, it is cut to fit and
 * ends in `_` and 8 hex digits (FNV-1a of the tool's own name, UTF-8). A
 * tool listed twice is offered once; one whose new name is taken is left out.
 */
export function nameTools<T extends { name: string }>(alias: string, tools: readonly T[]): Naming<T> {
  const used = new Set<string>();
  const names: (string | undefined)[] = tools.map((tool) => {
    const name = `${alias}${SEPARATOR}${tool.name}`;
    if (!fits(name) || used.has(name)) return undefined;
    used.add(name);
    return name;
  });
  const notes: string[] = [];
  tools.forEach((tool, i) => {
    if (names[i] !== undefined) return;
    if (tools.findIndex((other) => other.name === tool.name) < i) {
      notes.push(`"${tool.name}" of mount "${alias}" is left out: it is listed more than once.`);
      return;
    }
    const asIs = `${alias}${SEPARATOR}${tool.name}`;
    const why = fits(asIs) ? `${asIs} is taken` : asIs.length > MAX_NAME ? `${asIs} is longer than ${MAX_NAME} characters` : `${asIs} has characters providers refuse`;
    const cleaned = `${alias}${SEPARATOR}${tool.name.replace(INVALID_CHARS, "_")}`;
    const name = fits(cleaned) && !used.has(cleaned) ? cleaned : `${cleaned.slice(0, MAX_NAME - 9)}_${fnv1a(tool.name)}`;
    if (used.has(name)) {
      notes.push(`"${tool.name}" of mount "${alias}" is left out: another tool already has the name ${name}.`);
      return;
    }
    used.add(name);
    names[i] = name;
    notes.push(`"${tool.name}" of mount "${alias}" is offered as ${name} (${why}).`);
  });
  const named = tools.flatMap((tool, i) => (names[i] === undefined ? [] : [{ name: names[i]!, tool }]));
  return { named, notes };
}

function fits(name: string): boolean {
  return name.length <= MAX_NAME && VALID.test(name);
}

/** FNV-1a over the UTF-8 bytes: short, stable, and synchronous (the name is needed wherever a gateway is built). */
function fnv1a(text: string): string {
  let hash = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(text)) hash = Math.imul(hash ^ byte, 0x01000193) >>> 0;
  return hash.toString(16).padStart(8, "0");
}
