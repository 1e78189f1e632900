// A reply streamed to the chat while the model writes it, from the courier
// that reads the provider's stream; the agent's object is not called per
// chunk. The message is shown at most once a second (the first time a second
// after the text starts, so a quick reply is never streamed at all), each time
// with the reply so far; the last time, before the courier reports, with the
// whole reply. Its ref goes to the object as soon as the message exists (one
// call per job, and one more each time the platform's answer names a new
// one), so a re-run after a crash, and the outbox row that finishes the
// message, find it.
import { type ChatOutbound, openingRef, type Route, type StreamShown, type StreamTarget } from "../chat.ts";
import { sleep } from "../../lib/timeout.ts";

/** The least time between two updates of a streamed message (and from the first text to the first). */
export const STREAM_INTERVAL_MS = 1_000;

/** A `<` not closed yet near the end of the text. */
const UNFINISHED_TAG = /<[^<>\n]{0,100}$/;

type Streamer = Required<Pick<ChatOutbound, "stream" | "split">>;

export class ReplyStream {
  private text = "";
  private firstTextAt: number | null = null;
  /** When the last update was answered: the next may start a second later. */
  private lastAt: number | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private running: Promise<void> | null = null;
  private finished = false;
  /** The platform refused an update for good: the message is left as it is. */
  private refused = false;

  constructor(
    private readonly env: Env,
    private readonly route: Route,
    private readonly outbound: Streamer,
    private readonly target: StreamTarget,
    /** Tells the object the message's ref (and what it shows) when it is opened or its ref changes. */
    private readonly opened: (shown: StreamShown) => Promise<void>,
  ) {}

  /** The reply so far (called as the provider's stream grows). */
  onText(text: string): void {
    this.text = text;
    this.firstTextAt ??= Date.now();
    this.schedule();
  }

  /**
   * The provider is done: the message (if one was opened, now or by an
   * earlier attempt) is brought to the whole reply, a second after its last
   * update. Returns what it is and shows, for the object; undefined when no
   * message exists. `text` undefined: no reply (an error), the message is left as it is.
   */
  async finish(text: string | undefined): Promise<StreamShown | undefined> {
    this.finished = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
    if (text !== undefined && this.target.ref) {
      this.text = text;
      const wait = (this.lastAt ?? 0) + STREAM_INTERVAL_MS - Date.now();
      await sleep(wait);
      await this.update();
    }
    const { ref, shown } = this.target;
    return ref ? { ref, shown: shown ?? "" } : undefined;
  }

  private schedule(): void {
    if (this.timer || this.running || this.finished || this.refused) return;
    const due = (this.lastAt ?? this.firstTextAt!) + STREAM_INTERVAL_MS;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.running = this.update().finally(() => {
        this.running = null;
        if (this.firstPart() !== (this.target.shown ?? "")) this.schedule();
      });
    }, Math.max(0, due - Date.now()));
  }

  /**
   * The first part of the reply so far; while the model writes, without an
   * unfinished `<…` at its end (a link, a mention), which a platform may show
   * differently once it is closed.
   */
  private firstPart(): string {
    const part = this.outbound.split(this.text)[0] ?? "";
    return this.finished ? part : part.replace(UNFINISHED_TAG, "");
  }

  /** A ref the bridge names before a call whose answer may be lost (the rest of the reply going on a new message): the object hears it first. */
  private async record(ref: string): Promise<void> {
    this.target.ref = ref;
    await this.opened({ ref, shown: this.target.shown ?? "" });
  }

  /** One update (or the opening): best effort, the object's outbox finishes the message whatever happens here. */
  private async update(): Promise<void> {
    const text = this.firstPart();
    if (this.refused || text === "" || (this.target.ref && text === this.target.shown)) return;
    try {
      // Before the platform is asked to make the message, the object hears that it may exist: its answer can be lost.
      if (!this.target.ref) await this.opened({ ref: openingRef(Date.now()), shown: "" });
      const result = await this.outbound.stream(this.env, this.route, this.target, text, (ref) => this.record(ref));
      if (!result.ok) {
        // A refusal that will not change (the platform ended the stream): no more updates; the outbox finishes the reply.
        if (result.permanent) this.refused = true;
        return console.warn(`streaming a reply: ${result.error}`);
      }
      const ref = result.ref ?? this.target.ref;
      if (!ref) return;
      const changed = ref !== this.target.ref;
      this.target.ref = ref;
      this.target.shown = text;
      if (changed) await this.opened({ ref, shown: text });
    } catch (err) {
      console.warn(`streaming a reply failed: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      this.lastAt = Date.now();
    }
  }
}
