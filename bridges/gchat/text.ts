// Markdown as Google Chat's text formatting. Chat reads `code` and ``` fences
// as Markdown does, but its bold is *x*, italic _x_, strike-through ~x~ and a
// link <url|label>; a heading has no form of its own and is shown bold.
// Code, inline or fenced (a fence a split left open runs to the end), is
// kept as written.
const CODE = /(```[\s\S]*?(?:```|$)|`[^`\n]+`)/;
/** Stands for bold while italics are rewritten (a character no model writes). */
const BOLD = "\u0001";

function prose(text: string): string {
  return text
    .replace(/^#{1,6}[ \t]+(.+?)[ \t]*#*$/gm, `${BOLD}$1${BOLD}`)
    .replace(/\*\*([^*\n]+?)\*\*|__([^_\n]+?)__/g, (_m, a: string | undefined, b: string | undefined) => `${BOLD}${a ?? b}${BOLD}`)
    .replace(/(?<![*\w])\*([^*\s][^*\n]*?)\*(?![*\w])/g, "_$1_")
    .replace(/~~([^~\n]+?)~~/g, "~$1~")
    .replace(/\[([^\]\n]+)\]\((https?:\/\/[^)\s|>]+)\)/g, "<$2|$1>")
    .replaceAll(BOLD, "*");
}

export function markdownToChat(markdown: string): string {
  return markdown
    .split(CODE)
    .map((part, i) => (i % 2 === 1 ? part : prose(part)))
    .join("");
}
