// The model's Markdown as Telegram's HTML parse mode (of its two, HTML needs
// only &, < and > escaped; MarkdownV2 would need eighteen characters escaped
// everywhere but in code). Code blocks and inline code keep their text as it
// is; bold, italic, strike-through, links and headings become tags. What is
// not Markdown stays text. A text Telegram cannot parse all the same is sent
// plain (outbound.ts), never lost.

const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const attribute = (text: string) => escape(text).replace(/"/g, "&quot;");

/** Inline Markdown of one stretch of text that holds no code. */
function inline(text: string): string {
  return escape(text)
    .replace(/\[([^\]\n]+)\]\(((?:https?|tg):\/\/[^\s)]+)\)/g, (_, label: string, url: string) => `<a href="${attribute(url.replace(/&amp;/g, "&"))}">${label}</a>`)
    .replace(/\*\*(?=\S)([^*\n]*?\S)\*\*/g, "<b>$1</b>")
    .replace(/(^|[^\w*])\*(?=\S)([^*\n]*?\S)\*(?![\w*])/g, "$1<i>$2</i>")
    .replace(/(^|[^\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, "$1<i>$2</i>")
    .replace(/~~(?=\S)([^~\n]*?\S)~~/g, "<s>$1</s>");
}

/** A line outside code blocks: a heading in bold, anything else with its inline code kept as it is. */
function line(text: string): string {
  const heading = /^#{1,6}\s+(.*)$/.exec(text);
  const body = heading ? heading[1]! : text;
  const rendered = body
    .split(/(`[^`\n]+`)/)
    .map((part, i) => (i % 2 === 1 ? `<code>${escape(part.slice(1, -1))}</code>` : inline(part)))
    .join("");
  return heading ? `<b>${rendered}</b>` : rendered;
}

/** Markdown as Telegram HTML. A fence left open (a reply split inside a code block) runs to the end. */
export function markdownToHtml(markdown: string): string {
  const out: string[] = [];
  const lines = markdown.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*```\s*([\w+-]*)\s*$/.exec(lines[i]!);
    if (!fence) {
      out.push(line(lines[i]!));
      continue;
    }
    const code: string[] = [];
    for (i++; i < lines.length && !/^\s*```\s*$/.test(lines[i]!); i++) code.push(lines[i]!);
    const language = fence[1] ? ` class="language-${attribute(fence[1])}"` : "";
    out.push(`<pre><code${language}>${escape(code.join("\n"))}</code></pre>`);
  }
  return out.join("\n");
}
