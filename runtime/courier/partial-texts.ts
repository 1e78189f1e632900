// The text a courier's model calls are writing, per lane, for the Responses
// streams that listen (runtime/responses): the courier reads the provider's
// stream anyway, so a listener hears the text as it comes with no call into
// the agent's object, none per chunk. A listener is sent what it has not seen
// each time it asks for more, so a slow one gets fewer, larger pieces and
// nothing piles up; one that joins while a call writes gets its text so far.
import * as z from "zod";

/** A piece of a model call's text: `calledAt` names the call (its reply's timestamp), `at` is where `delta` starts in its text. */
export const partialText = z.object({ calledAt: z.number(), at: z.number().int().nonnegative(), delta: z.string() });
export type PartialText = z.infer<typeof partialText>;

const encoder = new TextEncoder();

export class PartialTexts {
  /** Each lane's call being written, and its text so far. */
  private readonly texts = new Map<string, { calledAt: number; text: string }>();
  /** Listeners waiting for more of a lane's text. */
  private readonly waiting = new Map<string, Set<() => void>>();

  /** A call's text so far (it only grows). */
  write(lane: string, calledAt: number, text: string): void {
    this.texts.set(lane, { calledAt, text });
    const waiting = this.waiting.get(lane);
    this.waiting.delete(lane);
    waiting?.forEach((wake) => wake());
  }

  /** The lane's call has ended: its message reaches listeners through the feed. */
  end(lane: string): void {
    this.texts.delete(lane);
  }

  /** The lane's text as it is written, as lines of JSON PartialText, until the listener cancels. */
  listen(lane: string): ReadableStream<Uint8Array> {
    let seen = { calledAt: 0, length: 0 };
    let wake: (() => void) | undefined;
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          for (;;) {
            const now = this.texts.get(lane);
            if (now && (now.calledAt !== seen.calledAt || now.text.length > seen.length)) {
              const at = now.calledAt === seen.calledAt ? seen.length : 0;
              const piece: PartialText = { calledAt: now.calledAt, at, delta: now.text.slice(at) };
              controller.enqueue(encoder.encode(`${JSON.stringify(piece)}\n`));
              seen = { calledAt: now.calledAt, length: now.text.length };
              return;
            }
            await new Promise<void>((resolve) => {
              wake = resolve;
              const waiting = this.waiting.get(lane) ?? new Set();
              this.waiting.set(lane, waiting.add(resolve));
            });
          }
        },
        cancel: () => {
          if (wake) this.waiting.get(lane)?.delete(wake);
        },
      },
      { highWaterMark: 0 },
    );
  }
}
