// The scheduler: passes run one at a time (a pass awaits tools, and events
// arrive meanwhile). Work that arrives (an event, a courier's report) starts a
// pass at once, in the background of the call that brought it, rather than an
// alarm for "now": one call into the object instead of two. The pass's first
// act is to arm its watchdog alarm, written before that call answers, so an
// eviction before the pass ends runs it again. After a pass the alarm is set
// only for work that is due: idle means nothing armed.

import { afterAccepts } from "./accepts-first.ts";

/** Armed while a pass runs, so a pass cut short by an eviction is run again. */
export const PASS_WATCHDOG_MS = 15_000;

export class Scheduler {
  private pass: Promise<void> | null = null;
  private passAgain = false;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly runPass: () => Promise<void>,
    /** When each part next has work: a time, or null for none. */
    private readonly dueTimes: () => (number | null)[],
  ) {}

  /**
   * Something changed: work due now starts a pass, in the background (its
   * watchdog alarm is the durable kick); work due later only moves the alarm,
   * so no pass runs to find nothing to do. A pass under way goes round again.
   */
  wake(): void {
    if (this.pass) return this.kick();
    // Read once: every report wakes the object, and each read is a query per part.
    const due = this.dueTimes();
    if (due.some((t) => t !== null && t <= Date.now())) this.kick();
    else this.arm(due).catch((err: unknown) => console.error("the alarm could not be set", err));
  }

  /** A pass now, in the background, whatever is due: for work no due time shows (a new mount's tool list). */
  kick(): void {
    this.drive().catch((err: unknown) => console.error("a pass failed; its watchdog alarm runs it again", err));
  }

  /** Runs a pass, or asks the running one to go round again. */
  drive(): Promise<void> {
    if (this.pass) {
      this.passAgain = true;
      return this.pass;
    }
    this.pass = (async () => {
      try {
        for (;;) {
          this.passAgain = false;
          await this.storage.setAlarm(Date.now() + PASS_WATCHDOG_MS);
          await afterAccepts();
          await this.runPass();
          await this.arm();
          // Asked again meanwhile, but for nothing due now: the alarm is set for what is due later, and no pass runs empty.
          if (!this.passAgain || !this.dueNow()) break;
        }
      } finally {
        this.pass = null;
      }
    })();
    return this.pass;
  }

  private dueNow(): boolean {
    const now = Date.now();
    return this.dueTimes().some((t) => t !== null && t <= now);
  }

  private async arm(times = this.dueTimes()): Promise<void> {
    const due = times.filter((t): t is number => t !== null);
    if (due.length === 0) await this.storage.deleteAlarm();
    else await this.storage.setAlarm(Math.min(...due));
  }
}
