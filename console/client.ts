// The console's only script, sent inline with the page's CSP nonce. It shows
// times in the reader's zone, and keeps a page's live region current: it asks
// the same URL, with the mark the region was drawn at, every 1.5 s while the
// tab is visible; the server answers 204 when nothing changed, or the region's
// new HTML (escaped on the server, like the page). A redraw also removes the
// banner with the answer to the last form: it spoke of the state before.
export const CLIENT_SCRIPT = `(() => {
  const format = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  const localTimes = (root) => {
    for (const t of root.querySelectorAll("time[datetime]")) {
      const when = new Date(t.getAttribute("datetime"));
      if (!Number.isNaN(when.getTime())) t.textContent = format.format(when);
    }
  };
  localTimes(document);
  const live = document.querySelector("[data-live]");
  if (!live) return;
  const note = document.getElementById("live-note");
  const poll = async () => {
    if (document.visibilityState === "visible") {
      try {
        const res = await fetch(location.href, { headers: { "x-console-live": live.dataset.mark }, credentials: "same-origin", cache: "no-store" });
        if (res.status === 401) {
          if (note) note.textContent = "Signed out: reload the page to sign in again.";
          return;
        }
        if (res.status === 200) {
          const open = [...live.querySelectorAll("details[open][id]")].map((d) => d.id);
          live.innerHTML = await res.text();
          live.dataset.mark = res.headers.get("x-console-mark") || "";
          // The result banner reported the state the page was drawn at; that state has moved on.
          document.querySelector(".result[role=status]")?.remove();
          for (const id of open) document.getElementById(id)?.setAttribute("open", "");
          localTimes(live);
        }
      } catch {}
    }
    setTimeout(poll, 1500);
  };
  setTimeout(poll, 1500);
})();`;
