// The agent's Markdown as HTML that cannot run: it is parsed into JSX
// elements whose text hono/jsx escapes, so any HTML in the source is shown as
// text. Links go only to http(s) and mailto; images are shown as links, never
// loaded. Covers what chat models write: paragraphs, headings, lists, quotes,
// code, tables, emphasis, links.
import type { Child } from "hono/jsx";

const FENCE = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/;
const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^\s*([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^\s*>\s?(.*)$/;
const BULLET = /^\s*[-*+]\s+(.*)$/;
const NUMBERED = /^\s*\d{1,9}[.)]\s+(.*)$/;
const TABLE_RULE = /^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;

export function Markdown(props: { text: string }) {
  return <div class="md">{blocks(props.text.replace(/\r\n?/g, "\n").split("\n"))}</div>;
}

function startsBlock(line: string, next: string | undefined): boolean {
  return FENCE.test(line) || HEADING.test(line) || RULE.test(line) || QUOTE.test(line) || BULLET.test(line) || NUMBERED.test(line) || isTableStart(line, next);
}

function isTableStart(line: string, next: string | undefined): boolean {
  return line.includes("|") && next !== undefined && next.includes("|") && TABLE_RULE.test(next);
}

function cells(line: string): string[] {
  return line.trim().replace(/^\|/, "").replace(/\|$/, "").split("|").map((cell) => cell.trim());
}

function blocks(lines: string[]): Child[] {
  const out: Child[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === "") {
      i++;
      continue;
    }
    const fence = FENCE.exec(line);
    if (fence) {
      const body: string[] = [];
      for (i++; i < lines.length && !lines[i]!.trim().startsWith(fence[1]!); i++) body.push(lines[i]!);
      i++;
      out.push(<pre class="code"><code data-lang={fence[2] || undefined}>{body.join("\n")}</code></pre>);
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading) {
      const level = heading[1]!.length;
      const text = inline(heading[2]!);
      out.push(level <= 2 ? <h4>{text}</h4> : level <= 4 ? <h5>{text}</h5> : <h6>{text}</h6>);
      i++;
      continue;
    }
    if (RULE.test(line)) {
      out.push(<hr />);
      i++;
      continue;
    }
    if (QUOTE.test(line)) {
      const quoted: string[] = [];
      for (; i < lines.length && QUOTE.test(lines[i]!); i++) quoted.push(QUOTE.exec(lines[i]!)![1]!);
      out.push(<blockquote>{blocks(quoted)}</blockquote>);
      continue;
    }
    const list = BULLET.test(line) ? BULLET : NUMBERED.test(line) ? NUMBERED : null;
    if (list) {
      const items: string[][] = [];
      while (i < lines.length) {
        const item = list.exec(lines[i]!);
        if (item) items.push([item[1]!]);
        else if (/^\s+\S/.test(lines[i]!) && items.length) items.at(-1)!.push(lines[i]!.trim());
        else break;
        i++;
      }
      const rendered = items.map((item) => <li>{withBreaks(item)}</li>);
      out.push(list === BULLET ? <ul>{rendered}</ul> : <ol>{rendered}</ol>);
      continue;
    }
    if (isTableStart(line, lines[i + 1])) {
      const head = cells(line);
      const rows: string[][] = [];
      for (i += 2; i < lines.length && lines[i]!.includes("|") && lines[i]!.trim() !== ""; i++) rows.push(cells(lines[i]!));
      out.push(
        <table class="md-table">
          <thead><tr>{head.map((cell) => <th>{inline(cell)}</th>)}</tr></thead>
          <tbody>{rows.map((row) => <tr>{head.map((_, n) => <td>{inline(row[n] ?? "")}</td>)}</tr>)}</tbody>
        </table>,
      );
      continue;
    }
    const paragraph: string[] = [];
    for (; i < lines.length && lines[i]!.trim() !== "" && (paragraph.length === 0 || !startsBlock(lines[i]!, lines[i + 1])); i++) paragraph.push(lines[i]!.trim());
    out.push(<p>{withBreaks(paragraph)}</p>);
  }
  return out;
}

/** Chat text means its line breaks. */
function withBreaks(lines: string[]): Child[] {
  return lines.flatMap((line, n) => (n === 0 ? inline(line) : [<br />, ...inline(line)]));
}

const SAFE_URL = /^(https?:\/\/|mailto:)[^\s<>"]+$/i;

function link(label: Child[], url: string): Child {
  return SAFE_URL.test(url) ? <a href={url} rel="noopener noreferrer nofollow">{label}</a> : <>{label} ({url})</>;
}

// One pass over the text: the earliest match wins; code spans take their text literally.
const INLINE = new RegExp(
  [
    /`([^`]+)`/.source,
    /!\[([^\]]*)\]\(([^)\s]+)\)/.source,
    /\[([^\]]+)\]\(([^)\s]+)\)/.source,
    /\*\*(.+?)\*\*|__(.+?)__/.source,
    /~~(.+?)~~/.source,
    /(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?!\w)|(?<!\w)_(?!\s)(.+?)(?<!\s)_(?!\w)/.source,
    /(https?:\/\/[^\s<>"')\]]+)/.source,
  ].join("|"),
  "g",
);

function inline(text: string): Child[] {
  const out: Child[] = [];
  let at = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > at) out.push(text.slice(at, m.index));
    at = m.index + m[0].length;
    const [, code, imageAlt, imageUrl, label, url, strong1, strong2, del, em1, em2, bare] = m;
    if (code !== undefined) out.push(<code>{code}</code>);
    else if (imageUrl !== undefined) out.push(link([`image: ${imageAlt || imageUrl}`], imageUrl));
    else if (url !== undefined) out.push(link(inline(label!), url));
    else if (strong1 !== undefined || strong2 !== undefined) out.push(<strong>{inline((strong1 ?? strong2)!)}</strong>);
    else if (del !== undefined) out.push(<del>{inline(del)}</del>);
    else if (em1 !== undefined || em2 !== undefined) out.push(<em>{inline((em1 ?? em2)!)}</em>);
    else if (bare !== undefined) {
      // Sentence punctuation after a bare URL is not part of it.
      const url = bare.replace(/[.,;:!?]+$/, "");
      out.push(link([url], url), bare.slice(url.length));
    }
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}
