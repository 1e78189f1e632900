// A tenant's audit trail in the console (runtime/access): who changed what,
// when, and the value before and after, newest first. Read-only: the trail is
// never edited.
import { Time } from "./layout.tsx";

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
      {props.entries.length === 0 ? (
        <p>No change has been made to this tenant through the console or the API yet.</p>
      ) : (
        <table class="audit">
          <thead>
            <tr><th>When</th><th>Who</th><th>What</th><th>On</th><th>Before</th><th>After</th></tr>
          </thead>
          <tbody>
            {props.entries.map((e) => (
              <tr>
                <td><Time at={Date.parse(e.at)} /></td>
                <td class="actor">{e.actor}</td>
                <td class="action">{e.action}</td>
                <td><code>{e.subject}</code></td>
                <td><code>{shown(e.before)}</code></td>
                <td><code>{shown(e.after)}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
