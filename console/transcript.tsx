// A conversation's transcript: people's words as text, the agent's as safe
// Markdown, tool calls and results folded when long.
import type { ConversationView } from "../runtime/index.ts";
import { Time } from "./layout.tsx";
import { Markdown } from "./markdown.tsx";
import { Person } from "./names.tsx";

type Entry = ConversationView["transcript"][number];

/** Longer than this (or more lines), tool output starts folded. */
const FOLD_CHARS = 600;
const FOLD_LINES = 12;

function Folded(props: { id: string; summary: string; text: string }) {
  const { text } = props;
  const lines = text.split("\n").length;
  if (text.length <= FOLD_CHARS && lines <= FOLD_LINES) return <pre>{text}</pre>;
  return (
    <details id={props.id}>
      <summary>{`${props.summary} (${lines} lines, ${text.length} characters)`}</summary>
      <pre>{text}</pre>
    </details>
  );
}

const TRIGGERS: Record<Extract<Entry, { role: "compaction" }>["trigger"], string> = {
  window: "the context window was filling up",
  output: "too little room was left for the answer",
  refused: "the provider refused the request as too long",
  person: "asked for",
};

function EntryView(props: { entry: Entry; n: number }) {
  const { entry, n } = props;
  switch (entry.role) {
    case "user":
      return (
        <div class="entry user">
          <span class="who"><Person who={entry.by} />{entry.steer ? " (while the agent worked)" : ""}</span> <small><Time at={entry.at} /></small>
          <pre>{entry.text}</pre>
        </div>
      );
    case "assistant":
      return (
        <div class="entry assistant">
          <span class="who">Agent</span> <small><Time at={entry.at} /></small>
          {entry.text ? <Markdown text={entry.text} /> : null}
          {entry.toolCalls.map((call, k) => (
            <div class="call">
              <small>Calls</small> <code>{call.name}</code>
              <Folded id={`call-${n}-${k}`} summary="Arguments" text={JSON.stringify(call.arguments, null, 2)} />
            </div>
          ))}
        </div>
      );
    case "tool":
      return (
        <div class="entry tool">
          <span class="who">{`Tool ${entry.toolName}${entry.isError ? " (error)" : ""}`}</span> <small><Time at={entry.at} /></small>
          <Folded id={`result-${n}`} summary="Result" text={entry.text} />
        </div>
      );
    case "compaction":
      return (
        <div class="entry compaction">
          <span class="who">{`Compacted here (${TRIGGERS[entry.trigger]})`}</span> <small><Time at={entry.at} /></small>
          <p class="muted">{`${entry.summarised} messages summarised into this handover, the ${entry.kept} after them kept as written; the log keeps them all.`}</p>
          <Folded id={`handover-${n}`} summary="Handover" text={entry.text} />
        </div>
      );
    case "note":
      return (
        <div class="entry note">
          <span class="who">Runtime note</span> <small><Time at={entry.at} /></small>
          <Folded id={`note-${n}`} summary="Note" text={entry.text} />
        </div>
      );
  }
}

export function Transcript(props: { entries: Entry[] }) {
  if (props.entries.length === 0) return <p class="muted">Nothing yet.</p>;
  return <div class="transcript">{props.entries.map((entry, n) => <EntryView entry={entry} n={n} />)}</div>;
}
