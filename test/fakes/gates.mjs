// Gates let a harness see what the fakes are asked, as events, and hold one
// chosen request mid-flight: the fake has recorded it (a post is made, an
// append is written) but has not answered yet. The fault harness kills the
// Worker at that moment. Without a Gates object the fakes answer at once.
import { EventEmitter } from "node:events";

export class Gates extends EventEmitter {
  #rules = [];

  /**
   * Holds the first request at `fake` for which `match(info)` is true, and
   * emits "held" with { fake, info } when it arrives. It is never answered:
   * the harness kills the Worker that is waiting for it.
   */
  holdOnce(fake, match) {
    this.#rules.push({ fake, match });
  }

  /** Called by a fake for each request: emits `fake` with `info`, then holds it if a rule matches. */
  async pass(fake, info) {
    this.emit(fake, info);
    const index = this.#rules.findIndex((rule) => rule.fake === fake && rule.match(info));
    if (index < 0) return;
    this.#rules.splice(index, 1);
    this.emit("held", { fake, info });
    await new Promise(() => {});
  }

  /** Called by a fake when something happened that is not a request (an answer was sent). */
  tell(fake, info) {
    this.emit(fake, info);
  }

  clear() {
    this.#rules = [];
  }
}
