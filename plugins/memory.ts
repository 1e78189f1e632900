// The memory plugin: notes an agent keeps across conversations, in its mount's
// session state (the agent's own SQLite), so they survive evictions and deploys.
import { z } from "zod";
import { ownValue } from "../lib/own.ts";
import type { Plugin, SessionState } from "./contract.ts";

const NOTES = "notes";
const MAX_NOTES = 200;
const MAX_TEXT = 2_000;

type Notes = Record<string, { text: string; at: string }>;

const notesOf = (session: SessionState): Notes => session.get<Notes>(NOTES) ?? {};

export const memoryPlugin: Plugin = {
  name: "memory",
  description: "Notes the agent keeps across conversations.",
  runsIn: "object",
  tools: [
    {
      name: "remember",
      description: "Save a note under a short key (replacing any note with that key). Use it for facts worth keeping beyond this conversation.",
      parameters: z.object({ key: z.string().min(1).max(80), text: z.string().min(1).max(MAX_TEXT) }),
      sideEffects: "write",
      idempotency: "idempotent", // writing the same key twice leaves one note
      async call({ key, text }, { session }) {
        const notes = notesOf(session);
        if (ownValue(notes, key) === undefined && Object.keys(notes).length >= MAX_NOTES) {
          return { text: `Memory is full (${MAX_NOTES} notes): forget one first.`, isError: true };
        }
        session.set(NOTES, { ...notes, [key]: { text, at: new Date().toISOString() } });
        return { text: `Remembered "${key}".` };
      },
    },
    {
      name: "recall",
      description: "List saved notes, optionally only those whose key or text contains a phrase.",
      parameters: z.object({ phrase: z.string().optional() }),
      sideEffects: "read",
      idempotency: "idempotent",
      async call({ phrase }, { session }) {
        const needle = phrase?.toLowerCase();
        const found = Object.entries(notesOf(session)).filter(
          ([key, note]) => !needle || key.toLowerCase().includes(needle) || note.text.toLowerCase().includes(needle),
        );
        if (found.length === 0) return { text: needle ? `No notes match "${phrase}".` : "No notes yet." };
        return { text: found.map(([key, note]) => `- ${key} (${note.at}): ${note.text}`).join("\n") };
      },
    },
    {
      name: "forget",
      description: "Delete the note with this key.",
      parameters: z.object({ key: z.string() }),
      sideEffects: "write",
      idempotency: "idempotent",
      async call({ key }, { session }) {
        const notes = notesOf(session);
        const gone = ownValue(notes, key);
        session.set(NOTES, Object.fromEntries(Object.entries(notes).filter(([k]) => k !== key)));
        return { text: gone ? `Forgot "${key}".` : `There was no note "${key}".` };
      },
    },
  ],
};
