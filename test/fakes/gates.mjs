// Gates let a harness see what the fakes are asked, as events, and hold one
// chosen request mid-flight: the fake has recorded it (a post is made, an
// append is written) but has not answered yet. The fault harness kills the
// Worker at that moment; a test holds the answer past the Worker's send
// timeout. With no rule the fakes answer at once.
import { EventEmitter } from "node:events";

export class Gates extends EventEmitter {
  #rules = [];

  /**
   * Holds the first request at `fake` for which `match(info)` is true, and
   * emits "held" with { fake, info } when it arrives. It is answered after
   * `ms`, or never (the harness kills the Worker that is waiting for it).
   */
  holdOnce(fake, match, ms = Infinity) {
    this.#rules.push({ fake, match, ms });
  }

  /** Called by a fake for each request: emits `fake` with `info`, then holds it if a rule matches. */
  async pass(fake, info) {
    this.emit(fake, info);
    const index = this.#rules.findIndex((rule) => rule.fake === fake && rule.match(info));
    if (index < 0) return;
    const [rule] = this.#rules.splice(index, 1);
    this.emit("held", { fake, info });
    // A timer that keeps no process alive: a run may end with an answer still held.
    await new Promise((resolve) => rule.ms !== Infinity && setTimeout(resolve, rule.ms).unref());
  }

  /** Called by a fake when something happened that is not a request (an answer was sent). */
  tell(fake, info) {
    this.emit(fake, info);
  }

  clear() {
    this.#rules = [];
  }
}
