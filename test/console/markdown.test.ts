// The console's Markdown renderer: what chat models write becomes HTML, and
// nothing in the source becomes markup of its own.
import { describe, expect, it } from "vitest";
import { Markdown } from "../../console/markdown.tsx";

const render = (text: string) => String(Markdown({ text }));

describe("console Markdown", () => {
  it("renders paragraphs with their line breaks, headings, lists, quotes, rules and code", () => {
    expect(render("one\ntwo\n\nthree")).toBe('<div class="md"><p>one<br/>two</p><p>three</p></div>');
    expect(render("## Plan\n1. first\n2. second\n   continued\n\n- a\n- b")).toBe(
      '<div class="md"><h4>Plan</h4><ol><li>first</li><li>second<br/>continued</li></ol><ul><li>a</li><li>b</li></ul></div>',
    );
    expect(render("> quoted **text**\n\n---")).toBe('<div class="md"><blockquote><p>quoted <strong>text</strong></p></blockquote><hr/></div>');
    expect(render("```js\nif (a < b) **x**\n```")).toBe('<div class="md"><pre class="code"><code data-lang="js">if (a &lt; b) **x**</code></pre></div>');
  });

  it("renders tables, emphasis, code spans and links", () => {
    expect(render("| a | b |\n|---|:-:|\n| 1 | *2* |")).toBe(
      '<div class="md"><table class="md-table"><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td><em>2</em></td></tr></tbody></table></div>',
    );
    expect(render("a | b\n---")).toBe('<div class="md"><p>a | b</p><hr/></div>');
    expect(render("`**not bold**` and __bold__ and ~~gone~~ and snake_case_name")).toBe(
      '<div class="md"><p><code>**not bold**</code> and <strong>bold</strong> and <del>gone</del> and snake_case_name</p></div>',
    );
    expect(render("see https://example.com/a_b. or [docs](https://example.com)")).toBe(
      '<div class="md"><p>see <a href="https://example.com/a_b" rel="noopener noreferrer nofollow">https://example.com/a_b</a>. or <a href="https://example.com" rel="noopener noreferrer nofollow">docs</a></p></div>',
    );
  });

  it("never makes markup from the source: HTML is text, unsafe links are text, images are links", () => {
    expect(render('<img src=x onerror="alert(1)"> & <b>')).toBe('<div class="md"><p>&lt;img src=x onerror=&quot;alert(1)&quot;&gt; &amp; &lt;b&gt;</p></div>');
    expect(render("[x](javascript:alert(1)) [y](data:text/html,hi)")).toBe('<div class="md"><p>x (javascript:alert(1)) y (data:text/html,hi)</p></div>');
    expect(render('[q](https://e.com/"onmouseover=alert(1))')).not.toContain('"onmouseover');
    expect(render("![cat](https://example.com/cat.png)")).toBe(
      '<div class="md"><p><a href="https://example.com/cat.png" rel="noopener noreferrer nofollow">image: cat</a></p></div>',
    );
  });
});
