// Markdown (what the model writes) → what Slack takes: a reply as Slack's own
// Markdown (markdown_text, the one path for a reply streamed, posted or edited,
// so it renders the same whichever way it went), other text as mrkdwn; and
// splitting long replies into messages Slack accepts.

/** chat.postMessage text is kept within 4000 characters; chat.update rejects more. */
export const SLACK_TEXT_LIMIT = 4000;
/** Room for the fence a split part may need to close and reopen. */
const FENCE_ROOM = 8;
/** Long lines are cut into pieces this long, so even a line of "&" (5× once escaped) fits. */
const LINE_PIECE = 700;

const FENCE = /^\s*```/;

/**
 * A channel link or a person's mention, as Slack writes them (`<#C123>`,
 * `<@U456|Ana>`): the model's own stay links. Broadcasts (`<!here>`,
 * `<!channel>`, `<!everyone>`, user groups) are not among them: they stay text.
 */
const SLACK_REFERENCE = /<(#[CGD][A-Z0-9]{2,30}|@[UW][A-Z0-9]{2,30})(?:\|([^<>|\n]{1,80}))?>/g;

/** Slack takes at most this much markdown_text in one call. */
export const SLACK_MARKDOWN_LIMIT = 12_000;

/**
 * A reply as Slack's markdown_text: the model's Markdown, except that a
 * broadcast it writes (`<!channel>`, `<!here>`, `<!everyone>`, a user group's
 * `<!subteam^…>`) is shown as text and pings nobody. Every `<!` is escaped,
 * closed or not, so the rendering of a text's start is the start of the
 * rendering of the whole (a stream appends the difference), as long as the
 * start does not end in `<` (the courier holds back an unfinished `<…`).
 */
export function slackMarkdown(markdown: string): string {
  return markdown.replaceAll("<!", "&lt;!");
}

/** Slack treats &, < and > as control characters, so text is escaped (model-written <!channel> pings nobody). */
function escape(text: string): string {
  return text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;");
}

function inline(text: string): string {
  return text
    .split(/(`[^`\n]+`)/)
    .map((part, i) => (i % 2 === 1 ? escape(part) : inlineProse(part)))
    .join("");
}

const BOLD = "\u0001";

function inlineProse(text: string): string {
  const links: string[] = [];
  const keep = (link: string) => `\u0002${links.push(link) - 1}\u0002`;
  let out = text
    .replace(/!?\[([^\]\n]+)\]\((https?:\/\/[^)\s]+)\)/g, (_m, label: string, url: string) => keep(`<${escape(url)}|${escape(label)}>`))
    .replace(/<(https?:\/\/[^>\s]+)>/g, (_m, url: string) => keep(`<${escape(url)}>`))
    .replace(SLACK_REFERENCE, (_m, ref: string, label?: string) => keep(label === undefined ? `<${ref}>` : `<${ref}|${escape(label)}>`));
  out = escape(out)
    .replace(/\*\*(?=\S)(.+?)(?<=\S)\*\*/g, `${BOLD}$1${BOLD}`)
    .replace(/__(?=\S)(.+?)(?<=\S)__/g, `${BOLD}$1${BOLD}`)
    .replace(/(?<![*\w])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![*\w])/g, "_$1_")
    .replace(/~~(?=\S)(.+?)(?<=\S)~~/g, "~$1~")
    .replaceAll(BOLD, "*");
  return out.replace(/\u0002(\d+)\u0002/g, (_m, i: string) => links[Number(i)]!);
}

/** Renders Markdown as Slack mrkdwn: bold, italic, strike, links, headings, bullets; code stays code. */
export function toMrkdwn(markdown: string): string {
  const out: string[] = [];
  let inCode = false;
  for (const line of markdown.split("\n")) {
    if (FENCE.test(line)) {
      out.push("```"); // Slack shows a language tag as code text, so it is dropped.
      inCode = !inCode;
      continue;
    }
    if (inCode) {
      out.push(escape(line));
      continue;
    }
    const heading = /^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading) {
      out.push(`*${inline(heading[1]!).replaceAll("*", "")}*`);
      continue;
    }
    const bullet = /^(\s*)[-*+]\s+(.*)$/.exec(line);
    if (bullet && !/^\s*([-*_])\s*\1\s*\1/.test(line)) {
      out.push(`${bullet[1]}• ${inline(bullet[2]!)}`);
      continue;
    }
    out.push(inline(line));
  }
  return out.join("\n");
}

/** Lines of `markdown`, each ending in its newline, with overlong lines cut (at a space when there is one). */
function pieces(markdown: string): string[] {
  const result: string[] = [];
  for (const line of markdown.split(/(?<=\n)/)) {
    let rest = line;
    while (rest.length > LINE_PIECE) {
      const space = rest.lastIndexOf(" ", LINE_PIECE);
      const cut = space > LINE_PIECE / 2 ? space + 1 : LINE_PIECE;
      result.push(rest.slice(0, cut));
      rest = rest.slice(cut);
    }
    result.push(rest);
  }
  return result;
}

const openFence = (text: string) => text.split("\n").filter((l) => FENCE.test(l)).length % 2 === 1;

/**
 * Splits a Markdown reply into parts whose rendered mrkdwn fits one Slack
 * message, at line boundaries where possible; a code block cut in two is
 * closed and reopened so both parts render as code.
 */
export function splitForSlack(markdown: string, limit = SLACK_TEXT_LIMIT): string[] {
  const budget = limit - FENCE_ROOM;
  const parts: string[] = [];
  let current = "";
  for (const piece of pieces(markdown)) {
    const candidate = current + piece;
    if (current === "" || toMrkdwn(candidate).length <= budget) {
      current = candidate;
      continue;
    }
    if (openFence(current)) {
      parts.push(`${current.replace(/\n?$/, "\n")}\`\`\``);
      current = `\`\`\`\n${piece}`;
    } else {
      parts.push(current);
      current = piece;
    }
  }
  parts.push(current);
  return parts.map((p) => p.replace(/\s+$/, "")).filter((p) => p.trim() !== "");
}
