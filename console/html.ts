// HTML for the console: a tagged template that escapes every interpolated value
// unless it is already Html, so forgetting to escape is not possible.
export class Html {
  constructor(readonly value: string) {}
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ENTITIES[ch] ?? ch);
}

function render(value: unknown): string {
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join("");
  if (value === undefined || value === null || value === false) return "";
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0] ?? "";
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? "");
  });
  return new Html(out);
}

export function isoTime(ms: number): string {
  return new Date(ms).toISOString();
}

const STYLE = `
body{font:15px/1.45 system-ui,sans-serif;max-width:60rem;margin:1.5rem auto;padding:0 1rem;color:#1d1d1f}
header{display:flex;gap:1rem;align-items:baseline;border-bottom:1px solid #ddd;margin-bottom:1rem}
header form{margin-left:auto}
a{color:#0b5cad}pre{white-space:pre-wrap;word-break:break-word;background:#f5f5f7;padding:.5rem;border-radius:4px}
label{display:block;margin:.4rem 0}input[type=text],input[type=password]{padding:.3rem;min-width:16rem}
button{padding:.3rem .9rem;margin-right:.4rem}.notice{background:#fff4ce;padding:.5rem;border-radius:4px}
.entry{border-left:3px solid #ccc;padding-left:.6rem;margin:.6rem 0}.role{font-weight:600}
.card{border:1px solid #ccc;border-radius:6px;padding:.6rem 1rem;margin:.8rem 0}.card dl{display:grid;grid-template-columns:9rem 1fr;gap:.2rem .6rem}
.card dt{color:#555}.card dd{margin:0}.pending{border-color:#d08700}.approve{background:#1a7f37;color:#fff}.deny{background:#cf222e;color:#fff}
`;

/** A whole page. `signedIn` adds the sign-out button. */
export function page(title: string, body: Html, signedIn = true): Html {
  const signOut = signedIn ? html`<form method="post" action="/console/logout"><button>Sign out</button></form>` : "";
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${title} · antiproton</title><style>${new Html(STYLE)}</style></head>
<body><header><h1><a href="/console">antiproton</a></h1>${signOut}</header>
<main><h2>${title}</h2>${body}</main></body></html>`;
}
