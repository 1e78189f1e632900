// A tenant's audit trail in the console (runtime/access): who changed what,
// when, and the value before and after, newest first. Read-only: the trail is
// never edited.
import { Time } from "./layout.tsx";
import { Person } from "./names.tsx";

export interface AuditEntryView {
  seq: number;
  at: string;
  actor: string;
  action: string;
  subject: string;
  before: unknown;
  after: unknown;
}

const shown = (value: unknown) => (value === null || value === undefined ? "—" : typeof value === "string" ? value : JSON.stringify(value));

export function AuditSection(props: { entries: AuditEntryView[] }) {
  return (
    <section id="audit">
      <h3>Audit trail</h3>
      <ul class="audit">
        {props.entries.map((e) => (
          <li>
            <Time at={Date.parse(e.at)} /> <b class="actor"><Person who={e.actor} /></b> <span class="action">{e.action}</span> <code>{e.subject}</code>: <code>{shown(e.before)}</code> → <code>{shown(e.after)}</code>
          </li>
        ))}
      </ul>
    </section>
  );
}
